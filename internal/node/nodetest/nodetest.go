// Package nodetest serves a real kioku (package node) for tests, as kioku
// serve opens it: an embedded store in a directory of the test's own, a
// log that goes nowhere unless the test gives one, the node closed and the
// server stopped when the test ends; and the key files that put it behind
// API keys.
package nodetest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/modeltest"
)

// Open opens a node on cfg and closes it when the test ends. With no store
// named and no DataDir, the embedded store goes in a directory of the
// test's own; with no Logger, the log is discarded.
func Open(t testing.TB, cfg node.Config) *node.Node {
	t.Helper()
	if cfg.DataDir == "" && (cfg.Store == "" || cfg.Store == "sqlite") {
		cfg.DataDir = t.TempDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	n, err := node.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// Serve opens a node as Open does and serves its handler on a loopback
// test server (HTTP/1.1, as a browser or curl calls it), stopped when the
// test ends. It returns the node and the server's URL.
func Serve(t testing.TB, cfg node.Config) (*node.Node, string) {
	t.Helper()
	n := Open(t, cfg)
	srv := httptest.NewServer(n.Handler())
	t.Cleanup(srv.Close)
	return n, srv.URL
}

// ServeH2C is Serve with the node's own HTTP server settings, as kioku
// serve listens: HTTP/2 without TLS beside HTTP/1.1, so that gRPC clients
// reach it too.
func ServeH2C(t testing.TB, cfg node.Config) (*node.Node, string) {
	t.Helper()
	n := Open(t, cfg)
	srv := httptest.NewUnstartedServer(n.Handler())
	srv.Config = n.HTTPServer()
	srv.Start()
	t.Cleanup(srv.Close)
	return n, srv.URL
}

// Listen opens a node as Open does and serves it on a listener at addr
// ("127.0.0.1:0": a free loopback port) with the node's own Serve, as
// kioku serve runs it, until the test ends. It returns the node and
// "http://" followed by the listener's address.
func Listen(t testing.TB, cfg node.Config, addr string) (*node.Node, string) {
	t.Helper()
	n := Open(t, cfg)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return n, "http://" + ln.Addr().String()
}

// REST makes one REST call over HTTP/1.1 with a JSON body (none when body
// is empty) and the given header fields (name, value, ...), and returns the
// status and the decoded JSON answer. An answer that is not JSON fails the
// test.
func REST(t testing.TB, method, url, body string, header ...string) (int, map[string]any) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: %s, not JSON: %q", method, url, res.Status, raw)
	}
	return res.StatusCode, out
}

// Path reads a value out of decoded JSON by keys and list indexes; nil
// where there is none.
func Path(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// KeyFile writes a key file holding entries in a directory of the test's
// own and returns its path.
func KeyFile(t testing.TB, entries ...auth.Key) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"keys": entries})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Keys writes a key file holding entries, as KeyFile does, and loads it.
func Keys(t testing.TB, entries ...auth.Key) *auth.Keys {
	t.Helper()
	keys, err := auth.LoadKeys(KeyFile(t, entries...))
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// Gemini is the model configuration that sends kioku's model calls (and
// its embeddings) to the fake Gemini server, with quick retries.
func Gemini(fake *modeltest.Gemini) model.Config {
	return model.Config{Provider: "gemini", GeminiAPIKey: "k", GeminiBaseURL: fake.URL, Retry: modeltest.FastRetry}
}

// LogBuffer is a log destination that the server and the test share, safe
// for concurrent writes.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the log.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what has been written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
