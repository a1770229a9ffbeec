package vertex_test

import (
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

// sessionClient is a gRPC client of Google's Sessions API on k, closed when
// the test ends.
func (k *kioku) sessionClient(t *testing.T) *aiplatform.SessionClient {
	t.Helper()
	c, err := aiplatform.NewSessionClient(t.Context(), k.grpcOptions()...)
	closeAtEnd(t, c, err)
	return c
}

// memoryClient is a gRPC client of Google's Memory Bank API on k, closed
// when the test ends.
func (k *kioku) memoryClient(t *testing.T) *aiplatform.MemoryBankClient {
	t.Helper()
	c, err := aiplatform.NewMemoryBankClient(t.Context(), k.grpcOptions()...)
	closeAtEnd(t, c, err)
	return c
}

// sessionRESTClient is sessionClient over REST.
func (k *kioku) sessionRESTClient(t *testing.T) *aiplatform.SessionClient {
	t.Helper()
	c, err := aiplatform.NewSessionRESTClient(t.Context(), k.restOptions()...)
	closeAtEnd(t, c, err)
	return c
}

// memoryRESTClient is memoryClient over REST.
func (k *kioku) memoryRESTClient(t *testing.T) *aiplatform.MemoryBankClient {
	t.Helper()
	c, err := aiplatform.NewMemoryBankRESTClient(t.Context(), k.restOptions()...)
	closeAtEnd(t, c, err)
	return c
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

// closeAtEnd fails the test if a client's constructor failed, and closes
// the client when the test ends.
func closeAtEnd(t *testing.T, c interface{ Close() error }, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
}
