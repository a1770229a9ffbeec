package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/transport/auth/authtest"
	"github.com/kioku-ai/kioku/resource"
)

// TestAPIKeys makes a key with `kioku key`, starts `kioku serve
// --auth-keys` with its entry, and calls the server through the Go client.
func TestAPIKeys(t *testing.T) {
	t.Parallel()
	bin := kiokuBinary(t)
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
		_, err := c.CreateSession(t.Context(), &kiokuv1.CreateSessionRequest{Parent: resource.UserName(app, "ann")})
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

	// Rotation: the file now holds only a new key; SIGHUP puts it in force
	// and revokes the old one.
	// The new key expires in 30 days (--ttl).
	out, err = exec.Command(bin, "key", "--app", "demo", "--name", "rotated", "--ttl", "720h").Output()
	if err != nil {
		t.Fatalf("kioku key: %v", err)
	}
	lines = strings.Split(strings.TrimSpace(string(out)), "\n")
	key2, entry2 := strings.TrimSpace(lines[1]), strings.TrimSpace(lines[3])
	var e struct {
		ExpireTime time.Time `json:"expire_time"`
	}
	if err := json.Unmarshal([]byte(entry2), &e); err != nil {
		t.Fatalf("entry %s: %v", entry2, err)
	}
	if d := time.Until(e.ExpireTime); d < 719*time.Hour || d > 720*time.Hour {
		t.Fatalf("kioku key --ttl 720h: entry %s expires in %v", entry2, d)
	}
	if err := exec.Command(bin, "key", "--app", "demo", "--ttl", "-1h").Run(); err == nil {
		t.Fatal("kioku key --ttl -1h succeeded")
	}
	if err := os.WriteFile(keys, []byte(`{"keys": [`+entry2+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := proc.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for create(client.New(proc.url, client.WithAuthToken(key2)), "demo") != nil {
		if time.Now().After(deadline) {
			t.Fatal("the new key was not accepted within 10s of SIGHUP")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := create(client.New(proc.url, client.WithAuthToken(key)), "demo"); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("with the revoked key: %v", err)
	}

	// A broken file on reload leaves the keys in force, and the server up.
	if err := os.WriteFile(keys, []byte(`{"keys": [{"name": "x", "app": "demo", "sha256": "not hex"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := proc.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := create(client.New(proc.url, client.WithAuthToken(key2)), "demo"); err != nil {
		t.Fatalf("after reloading a broken key file, with the key in force: %v", err)
	}
}

// TestUserTokens starts `kioku serve` with an identity file (named by
// KIOKU_IDENTITY_FILE) and a token signing key that `kioku token --new-key`
// wrote, and calls it with a token `kioku token` printed and with an ID
// token of an issuer on loopback: each reaches its own user only. A
// SIGHUP puts a changed identity file in force.
func TestUserTokens(t *testing.T) {
	bin := kiokuBinary(t)
	dir := t.TempDir()
	signing := filepath.Join(dir, "signing.pem")
	if out, err := exec.Command(bin, "token", "--new-key", signing).CombinedOutput(); err != nil {
		t.Fatalf("kioku token --new-key: %v\n%s", err, out)
	}
	is := authtest.NewIssuer(t)
	identity := authtest.WriteIdentityFile(t, map[string]any{"type": "oidc", "issuer": is.URL, "audience": "kioku", "app": "web"})
	t.Setenv("KIOKU_IDENTITY_FILE", identity)
	proc := startKioku(t, "--data-dir", dir, "--token-signing-key-file", signing)

	out, err := exec.Command(bin, "token", "--token-signing-key-file", signing, "--app", "demo", "--user", "ann", "--ttl", "10m").Output()
	if err != nil {
		t.Fatalf("kioku token: %v", err)
	}
	minted := strings.TrimSpace(string(out))
	idToken := is.Sign(t, is.Claims("kioku", "ann"))
	create := func(token, parent string) error {
		_, err := client.New(proc.url, client.WithAuthToken(token)).CreateSession(t.Context(), &kiokuv1.CreateSessionRequest{Parent: parent})
		return err
	}
	for _, c := range []struct {
		what, token, parent string
		want                connect.Code
	}{
		{"the printed token, its user", minted, "apps/demo/users/ann", 0},
		{"the printed token, another user", minted, "apps/demo/users/bob", connect.CodePermissionDenied},
		{"the ID token, its user", idToken, "apps/web/users/ann", 0},
		{"the ID token, another app", idToken, "apps/demo/users/ann", connect.CodePermissionDenied},
	} {
		if err := create(c.token, c.parent); connect.CodeOf(err) != c.want && !(c.want == 0 && err == nil) {
			t.Errorf("%s: %v; want %v", c.what, err, c.want)
		}
	}
	if err := exec.Command(bin, "token", "--token-signing-key-file", signing, "--app", "demo", "--user", "ann", "--ttl", "48h").Run(); err == nil {
		t.Error("kioku token --ttl 48h succeeded")
	}

	// The issuer's tokens for audience "kioku" are no longer accepted once
	// the file says "kioku-web" and the server has its SIGHUP.
	if err := os.WriteFile(identity, []byte(`{"providers": [{"type": "oidc", "issuer": "`+is.URL+`", "audience": "kioku-web", "app": "web"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := proc.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for err := create(idToken, "apps/web/users/ann"); connect.CodeOf(err) != connect.CodeUnauthenticated; err = create(idToken, "apps/web/users/ann") {
		if time.Now().After(deadline) {
			t.Fatalf("the ID token of the removed audience, 10s after SIGHUP: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := create(is.Sign(t, is.Claims("kioku-web", "ann")), "apps/web/users/ann"); err != nil {
		t.Errorf("a token of the new audience: %v", err)
	}
}
