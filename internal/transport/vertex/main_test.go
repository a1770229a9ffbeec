package vertex_test

import (
	"context"
	"strings"
	"testing"

	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"

	aiplatform "cloud.google.com/go/aiplatform/apiv1beta1"

	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/model/modeltest"
)

// kioku is a running kioku for one test.
type kioku struct {
	node *node.Node
	url  string // http://127.0.0.1:PORT
}

// startKioku serves a fresh kioku (embedded store) on loopback; with a
// fake Gemini, memory generation uses it.
func startKioku(t *testing.T, fake *modeltest.Gemini) *kioku {
	t.Helper()
	return startKiokuWith(t, func(cfg *node.Config) {
		if fake != nil {
			cfg.Models = nodetest.Gemini(fake)
		}
	})
}

// startKiokuWith is startKioku with a configuration set by configure.
func startKiokuWith(t *testing.T, configure func(*node.Config)) *kioku {
	t.Helper()
	var cfg node.Config
	configure(&cfg)
	n, url := nodetest.ServeH2C(t, cfg)
	return &kioku{node: n, url: url}
}

// grpcOptions point Google's gRPC clients at k, as docs/vertex.md says: the
// address, no credentials, plaintext.
func (k *kioku) grpcOptions() []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(strings.TrimPrefix(k.url, "http://")),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
}

// restOptions point Google's REST clients at k.
func (k *kioku) restOptions() []option.ClientOption {
	return []option.ClientOption{option.WithEndpoint(k.url), option.WithoutAuthentication()}
}

// googleClient makes one of Google's clients with its constructor and
// the options that point it at kioku (k.grpcOptions() or
// k.restOptions(), and any more), fails the test if it cannot, and closes
// the client when the test ends.
func googleClient[C interface{ Close() error }](t *testing.T, newClient func(context.Context, ...option.ClientOption) (C, error), opts []option.ClientOption) C {
	t.Helper()
	c, err := newClient(t.Context(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// sessionClient starts a kioku and returns Google's session client on it,
// over REST or gRPC.
func sessionClient(t *testing.T, rest bool) *aiplatform.SessionClient {
	t.Helper()
	k := startKioku(t, nil)
	if rest {
		return googleClient(t, aiplatform.NewSessionRESTClient, k.restOptions())
	}
	return googleClient(t, aiplatform.NewSessionClient, k.grpcOptions())
}

// createSession creates session id of user in the test's engine through
// c, waits for its operation and returns the session.
func createSession(t *testing.T, c *aiplatform.SessionClient, id, user string) *aiplatformpb.Session {
	t.Helper()
	op, err := c.CreateSession(t.Context(), &aiplatformpb.CreateSessionRequest{Parent: engine, SessionId: id, Session: &aiplatformpb.Session{UserId: user}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := op.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return s
}
