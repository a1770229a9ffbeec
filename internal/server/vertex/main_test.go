package vertex_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/server/auth"
	kmodel "github.com/kioku-ai/kioku/model"
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
			cfg.Models = kmodel.Config{Provider: "gemini", GeminiAPIKey: "k", GeminiBaseURL: fake.URL, Retry: modeltest.FastRetry}
		}
	})
}

// startKiokuWith is startKioku with a configuration set by configure.
func startKiokuWith(t *testing.T, configure func(*node.Config)) *kioku {
	t.Helper()
	cfg := node.Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	configure(&cfg)
	n, err := node.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	srv := httptest.NewUnstartedServer(n.Handler())
	srv.Config = n.HTTPServer()
	srv.Start()
	t.Cleanup(srv.Close)
	return &kioku{node: n, url: srv.URL}
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

// loadKeys writes a key file of entries and loads it.
func loadKeys(t *testing.T, entries ...auth.Key) *auth.Keys {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"keys": entries})
	path := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := auth.LoadKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}
