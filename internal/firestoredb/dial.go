package firestoredb

import (
	"context"
	"math"
	"os"
	"strings"
	"time"

	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
)

// Dial says how a Firestore client of kioku's is connected: through which
// interceptors, and to the emulator or to Firestore.
type Dial struct {
	// Meter, when set, counts the documents the client reads, writes and
	// deletes.
	Meter *Meter
	// Guard, when set, applies kioku's fault policy to the connection
	// (see Guard).
	Guard *Guard
	// EmulatorHost is the host:port of a Firestore emulator. Empty:
	// $FIRESTORE_EMULATOR_HOST, and without it Firestore itself.
	EmulatorHost string
}

// reconnect is how the connection is dialed again after it failed: at
// most a second apart, so that a client finds Firestore back within about
// a second of its return instead of after gRPC's default backoff, which
// grows to two minutes.
var reconnect = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
	MinConnectTimeout: 5 * time.Second,
})

// ClientOptions returns the options of firestore.NewClient for d. With an
// emulator, the client library would dial the emulator itself and ignore
// dial options, so the options carry a connection to it, dialed as the
// library does, with d's interceptors.
func (d Dial) ClientOptions() ([]option.ClientOption, error) {
	var unary []grpc.UnaryClientInterceptor
	var stream []grpc.StreamClientInterceptor
	// The guard is outermost, so that the meter counts what Firestore
	// answered, whatever the guard makes of it.
	if d.Guard != nil {
		unary, stream = append(unary, d.Guard.unary), append(stream, d.Guard.stream)
	}
	if d.Meter != nil {
		unary, stream = append(unary, d.Meter.unary), append(stream, d.Meter.stream)
	}
	dial := []grpc.DialOption{reconnect, grpc.WithChainUnaryInterceptor(unary...), grpc.WithChainStreamInterceptor(stream...)}
	addr := d.EmulatorHost
	if addr == "" {
		addr = os.Getenv("FIRESTORE_EMULATOR_HOST")
	}
	if addr == "" {
		out := make([]option.ClientOption, len(dial))
		for i, o := range dial {
			out[i] = option.WithGRPCDialOption(o)
		}
		return out, nil
	}
	addr = strings.TrimPrefix(strings.TrimPrefix(addr, "http://"), "https://")
	conn, err := grpc.NewClient(addr, append(dial,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(emulatorOwner{}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32), grpc.MaxCallSendMsgSize(math.MaxInt32)),
	)...)
	if err != nil {
		return nil, err
	}
	return []option.ClientOption{option.WithGRPCConn(conn)}, nil
}

// emulatorOwner authenticates to the emulator as its administrator, as the
// client library does.
type emulatorOwner struct{}

func (emulatorOwner) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer owner"}, nil
}

func (emulatorOwner) RequireTransportSecurity() bool { return false }
