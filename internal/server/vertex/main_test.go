package vertex_test

import (
	"strings"
	"testing"

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
