package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
)

// TestAPIKeys makes a key with `kioku key`, starts `kioku serve
// --auth-keys` with its entry, and calls the server through the Go client.
func TestAPIKeys(t *testing.T) {
	bin, err := buildKioku()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "key", "--app", "demo", "--name", "test").Output()
	if err != nil {
		t.Fatalf("kioku key: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 4 || !strings.HasPrefix(strings.TrimSpace(lines[1]), "kioku_") {
		t.Fatalf("kioku key printed:\n%s", out)
	}
	key, entry := strings.TrimSpace(lines[1]), strings.TrimSpace(lines[3])
	keys := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(keys, []byte(`{"keys": [`+entry+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	proc := startKioku(t, "--data-dir", t.TempDir(), "--auth-keys", keys)

	create := func(c *client.Client, app string) error {
		_, err := c.CreateSession(t.Context(), &kiokuv1.CreateSessionRequest{Parent: client.UserName(app, "ann")})
		return err
	}
	if err := create(client.New(proc.url, client.WithAuthToken(key)), "demo"); err != nil {
		t.Fatalf("with the key, in its app: %v", err)
	}
	if err := create(client.New(proc.url, client.WithAuthToken(key)), "other"); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("with the key, in another app: %v", err)
	}
	if err := create(client.New(proc.url), "demo"); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("without a key: %v", err)
	}
	if err := create(client.New(proc.url, client.WithGRPC(), client.WithAuthToken(key)), "demo"); err != nil {
		t.Fatalf("with the key over gRPC: %v", err)
	}
}
