package server_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/firestoretest"
	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/modeltest"
	"github.com/kioku-ai/kioku/resource"
	"github.com/kioku-ai/kioku/server"
)

var quiet = slog.New(slog.DiscardHandler)

// start runs New's Server behind a test listener, closing both after the
// test.
func start(t *testing.T, opts server.Options) (*server.Server, string) {
	t.Helper()
	opts.Logger = quiet
	s, err := server.New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		ts.Close()
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, ts.URL
}

// writeKeys writes a key file holding keys.
func writeKeys(t *testing.T, path string, keys ...auth.Key) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestOptionsAreChecked: an option New cannot use is an error naming it,
// and nothing is opened.
func TestOptionsAreChecked(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		opts server.Options
		want string
	}{
		{"no store", server.Options{}, "DataDir"},
		{"two stores", server.Options{DataDir: dir, FirestoreProject: "p"}, "not both"},
		{"database without project", server.Options{DataDir: dir, FirestoreDatabase: "db"}, "FirestoreDatabase needs FirestoreProject"},
		{"wildcard origin", server.Options{DataDir: dir, CORSOrigins: []string{"https://*.example.com"}}, "CORSOrigins"},
		{"origin with a path", server.Options{DataDir: dir, CORSOrigins: []string{"https://app.example.com/x"}}, "CORSOrigins"},
		{"missing key file", server.Options{DataDir: dir, KeysFile: filepath.Join(dir, "none.json")}, "KeysFile"},
		{"unknown model provider", server.Options{DataDir: dir, Models: model.Config{Provider: "gemni"}}, "gemni"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.opts.Logger = quiet
			s, err := server.New(t.Context(), c.opts)
			if err == nil {
				s.Close()
				t.Fatalf("New(%+v) succeeded, want an error naming %q", c.opts, c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("New: %v, want it to name %q", err, c.want)
			}
		})
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refused options left %d files in the data directory", len(entries))
	}
}

// TestKeys: with a KeysFile, calls need one of its keys, confined to its
// app; ReloadKeys puts a new file in force at once.
func TestKeys(t *testing.T) {
	keysPath := filepath.Join(t.TempDir(), "keys.json")
	annKey, ann := auth.NewKey("ann", "demo", "")
	writeKeys(t, keysPath, ann)
	s, url := start(t, server.Options{DataDir: t.TempDir(), KeysFile: keysPath})
	create := func(c *client.Client, app string) error {
		_, err := c.CreateSession(t.Context(), &kiokuv1.CreateSessionRequest{Parent: resource.UserName(app, "ann")})
		return err
	}
	if err := create(client.New(url), "demo"); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("a call without a key: %v, want unauthenticated", err)
	}
	withAnn := client.New(url, client.WithAuthToken(annKey))
	if err := create(withAnn, "demo"); err != nil {
		t.Errorf("a call with the app's key: %v", err)
	}
	if err := create(withAnn, "other"); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("a call with another app's key: %v, want permission denied", err)
	}

	bobKey, bob := auth.NewKey("bob", "demo", "")
	writeKeys(t, keysPath, bob)
	if err := s.ReloadKeys(); err != nil {
		t.Fatal(err)
	}
	if err := create(withAnn, "demo"); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("a removed key after ReloadKeys: %v, want unauthenticated", err)
	}
	if err := create(client.New(url, client.WithAuthToken(bobKey)), "demo"); err != nil {
		t.Errorf("a new key after ReloadKeys: %v", err)
	}
	if err := os.WriteFile(keysPath, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.ReloadKeys(); err == nil {
		t.Error("ReloadKeys of a malformed file succeeded")
	}
	if err := create(client.New(url, client.WithAuthToken(bobKey)), "demo"); err != nil {
		t.Errorf("the keys in force after a failed reload: %v", err)
	}
}

// TestCORSOrigins: a page of a listed origin may call kioku from a
// browser; another origin is refused 403 with no CORS headers.
func TestCORSOrigins(t *testing.T) {
	s, _ := start(t, server.Options{DataDir: t.TempDir(), CORSOrigins: []string{"https://App.example.com/"}})
	for origin, want := range map[string]struct {
		code  int
		allow string
	}{
		"https://app.example.com":   {http.StatusOK, "https://app.example.com"},
		"https://other.example.com": {http.StatusForbidden, ""},
	} {
		rec := httptest.NewRecorder()
		r := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/v1/apps/demo/users/ann/sessions", nil)
		r.Header.Set("Origin", origin)
		s.ServeHTTP(rec, r)
		if got := rec.Header().Get("Access-Control-Allow-Origin"); rec.Code != want.code || got != want.allow {
			t.Errorf("GET from %s: %d, Access-Control-Allow-Origin %q, want %d and %q", origin, rec.Code, got, want.code, want.allow)
		}
	}
}

// TestFirestore: FirestoreProject stores in Firestore (the emulator), and
// what one Server wrote another reads.
func TestFirestore(t *testing.T) {
	project := firestoretest.Project(t)
	_, url := start(t, server.Options{FirestoreProject: project})
	s, err := client.New(url).CreateSession(t.Context(), &kiokuv1.CreateSessionRequest{Parent: resource.UserName("demo", "ann"), SessionId: "fs"})
	if err != nil {
		t.Fatal(err)
	}
	_, url2 := start(t, server.Options{FirestoreProject: project})
	got, err := client.New(url2).GetSession(t.Context(), &kiokuv1.GetSessionRequest{Name: s.GetName()})
	if err != nil || got.GetName() != s.GetName() {
		t.Errorf("another Server on the project: %v, %v", got.GetName(), err)
	}
}

// TestModels: Models reaches the memory bank: a generation from events
// calls the configured model (a Gemini API faked at the HTTP level) and
// stores the fact it extracted.
func TestModels(t *testing.T) {
	fake := modeltest.NewGemini(t)
	fake.ReplyText(`{"facts":[{"fact":"The user moved to Sapporo.","topic":"USER_PERSONAL_INFO","events":[1]}]}`)
	_, url := start(t, server.Options{DataDir: t.TempDir(), Models: model.Config{
		Provider: "gemini", GeminiAPIKey: "k", GeminiBaseURL: fake.URL, Retry: modeltest.FastRetry,
	}})
	c := client.New(url)
	op, err := c.GenerateMemories(t.Context(), &kiokuv1.GenerateMemoriesRequest{
		Parent: resource.AppName("demo"),
		Scope:  client.Scope("ann"),
		Source: client.FromEvents(&kiokuv1.Event{Author: "user", Content: client.Text("user", "I moved to Sapporo.")}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if op, err = c.WaitOperation(t.Context(), op.GetName()); err != nil || client.OperationError(op) != nil {
		t.Fatalf("generation: %v, %v", err, client.OperationError(op))
	}
	var facts []string
	for m, err := range c.AllMemories(t.Context(), &kiokuv1.ListMemoriesRequest{Parent: resource.AppName("demo")}) {
		if err != nil {
			t.Fatal(err)
		}
		facts = append(facts, m.GetFact())
	}
	if len(fake.Calls()) == 0 || len(facts) != 1 || facts[0] != "The user moved to Sapporo." {
		t.Errorf("%d model calls, memories %q; want the fact the model extracted", len(fake.Calls()), facts)
	}
}
