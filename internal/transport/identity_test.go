package transport_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/internal/transport/auth/authtest"
)

// identityServer is a kioku with an app key of app a (and the extra keys
// given), an identity file
// naming one issuer for apps a (audience "kioku") and b (audience
// "kioku-b"), and a token signing key.
type identityServer struct {
	url, appKey, signingFile string
	is                       *authtest.Issuer
}

// identityParts returns an issuer of ID tokens, the identity providers
// that name it for apps a (audience "kioku") and b (audience "kioku-b"),
// and a new token signing key: its file and the keys loaded from it.
func identityParts(t testing.TB) (is *authtest.Issuer, ids *auth.Providers, signingFile string, signing *auth.SigningKeys) {
	t.Helper()
	is = authtest.NewIssuer(t)
	ids, err := auth.LoadProviders(authtest.WriteIdentityFile(t,
		map[string]any{"type": "oidc", "issuer": is.URL, "audience": "kioku", "app": "a"},
		map[string]any{"type": "oidc", "issuer": is.URL, "audience": "kioku-b", "app": "b"}), auth.ProvidersOptions{})
	if err != nil {
		t.Fatal(err)
	}
	signingFile = filepath.Join(t.TempDir(), "signing.pem")
	if err := auth.NewSigningKeyFile(signingFile); err != nil {
		t.Fatal(err)
	}
	signing, err = auth.LoadSigningKeys(signingFile)
	if err != nil {
		t.Fatal(err)
	}
	return is, ids, signingFile, signing
}

func startIdentityServer(t testing.TB, extraKeys ...auth.Key) identityServer {
	t.Helper()
	is, ids, signingFile, signing := identityParts(t)
	appKey, appEntry := auth.NewKey("backend of a", "a", "")
	_, url := nodetest.ServeH2C(t, node.Config{Keys: nodetest.Keys(t, append(extraKeys, appEntry)...), Identities: ids, SigningKeys: signing})
	return identityServer{url: url, appKey: appKey, signingFile: signingFile, is: is}
}

func (s identityServer) client(token string, opts ...client.Option) *client.Client {
	return client.New(s.url, append(opts, client.WithHTTPClient(h2cClient()), client.WithAuthToken(token))...)
}

// mint calls MintUserToken over Connect JSON with a bearer credential.
func (s identityServer) mint(t testing.TB, bearer, parent, ttl string) (int, string) {
	t.Helper()
	status, out := nodetest.REST(t, "POST", s.url+"/kioku.v1.AuthService/MintUserToken", `{"parent": "`+parent+`", "ttl": "`+ttl+`"}`, "Authorization", "Bearer "+bearer)
	if status != http.StatusOK {
		msg, _ := out["message"].(string)
		return status, msg
	}
	return status, out["token"].(string)
}

// TestIdentityTokensOnEverySurface: an ID token and a minted token reach
// their own user's sessions, state and memories over Connect, gRPC, REST
// and the Vertex AI API; another user's resources are PERMISSION_DENIED,
// and so are another app's token's; only an app key mints; a second
// server with the same signing key accepts minted tokens; the protected-
// resource metadata names the issuer.
func TestIdentityTokensOnEverySurface(t *testing.T) {
	s := startIdentityServer(t)
	ctx := t.Context()
	app := s.client(s.appKey)
	for _, name := range []string{"apps/a/users/ann/sessions/s1", "apps/a/users/bob/sessions/b1"} {
		parent, id, _ := strings.Cut(strings.TrimPrefix(name, ""), "/sessions/")
		if _, err := app.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: parent, SessionId: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := app.CreateMemory(ctx, &kiokuv1.CreateMemoryRequest{Parent: "apps/a", MemoryId: "m1", Memory: &kiokuv1.Memory{Fact: "Ann likes tea.", Scope: map[string]string{"user_id": "ann"}}}); err != nil {
		t.Fatal(err)
	}

	idToken := s.is.Sign(t, s.is.Claims("kioku", "ann"))
	status, minted := s.mint(t, s.appKey, "apps/a/users/ann", "3600s")
	if status != http.StatusOK {
		t.Fatalf("minting with the app key: %d %s", status, minted)
	}
	for what, token := range map[string]string{"ID token": idToken, "minted token": minted} {
		for proto, c := range map[string]*client.Client{"Connect": s.client(token), "gRPC": s.client(token, client.WithGRPC())} {
			if _, err := c.GetSession(ctx, &kiokuv1.GetSessionRequest{Name: "apps/a/users/ann/sessions/s1"}); err != nil {
				t.Errorf("%s over %s, own session: %v", what, proto, err)
			}
			if _, err := c.GetState(ctx, &kiokuv1.GetStateRequest{Name: "apps/a/users/ann/state"}); err != nil {
				t.Errorf("%s over %s, own state: %v", what, proto, err)
			}
			if res, err := c.ListMemories(ctx, &kiokuv1.ListMemoriesRequest{Parent: "apps/a", Scope: map[string]string{"user_id": "ann"}}); err != nil || len(res.GetMemories()) != 1 {
				t.Errorf("%s over %s, own memories: %v, %v", what, proto, res, err)
			}
			if _, err := c.GetSession(ctx, &kiokuv1.GetSessionRequest{Name: "apps/a/users/bob/sessions/b1"}); connect.CodeOf(err) != connect.CodePermissionDenied {
				t.Errorf("%s over %s, bob's session: %v; want PERMISSION_DENIED", what, proto, err)
			}
		}
		if status, out := nodetest.REST(t, "GET", s.url+"/v1/apps/a/users/ann/sessions/s1", "", "Authorization", "Bearer "+token); status != 200 {
			t.Errorf("%s over REST, own session: %d %v", what, status, out)
		}
		if status, out := nodetest.REST(t, "GET", s.url+"/v1/apps/a/users/bob/sessions/b1", "", "Authorization", "Bearer "+token); status != 403 {
			t.Errorf("%s over REST, bob's session: %d %v; want 403", what, status, out)
		}
		vertex := s.url + "/v1beta1/projects/p/locations/us-central1/reasoningEngines/a/sessions"
		if status, out := nodetest.REST(t, "POST", vertex, `{"userId": "ann"}`, "Authorization", "Bearer "+token); status != 200 {
			t.Errorf("%s over the Vertex AI API, a session of ann's: %d %v", what, status, out)
		}
		if status, out := nodetest.REST(t, "POST", vertex, `{"userId": "bob"}`, "Authorization", "Bearer "+token); status != 403 {
			t.Errorf("%s over the Vertex AI API, a session of bob's: %d %v; want 403", what, status, out)
		}
		// A token stands for a user: it mints nothing.
		if status, msg := s.mint(t, token, "apps/a/users/ann", "60s"); status != 403 {
			t.Errorf("%s minting: %d %s; want 403", what, status, msg)
		}
	}

	// Another app's token (the issuer's tokens for audience kioku-b).
	other := s.client(s.is.Sign(t, s.is.Claims("kioku-b", "ann")))
	if _, err := other.GetSession(ctx, &kiokuv1.GetSessionRequest{Name: "apps/a/users/ann/sessions/s1"}); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("app b's token on app a: %v; want PERMISSION_DENIED", err)
	}
	// Minting is bounded and names what is wrong.
	for _, c := range []struct {
		parent, ttl string
		status      int
		want        string
	}{
		{"apps/a/users/ann", "90000s", 400, "ttl"},
		{"apps/b/users/ann", "60s", 403, `app "b"`},
	} {
		if status, msg := s.mint(t, s.appKey, c.parent, c.ttl); status != c.status || !strings.Contains(msg, c.want) {
			t.Errorf("minting for %s, ttl %s: %d %s; want %d naming %s", c.parent, c.ttl, status, msg, c.status, c.want)
		}
	}

	// A second server with the same signing key accepts the minted token
	// (the session is not there: NOT_FOUND, not UNAUTHENTICATED).
	signing, err := auth.LoadSigningKeys(s.signingFile)
	if err != nil {
		t.Fatal(err)
	}
	_, second := serveNode(t, func(c *node.Config) { c.SigningKeys = signing })
	c2 := client.New(second, client.WithHTTPClient(h2cClient()), client.WithAuthToken(minted))
	if _, err := c2.GetSession(ctx, &kiokuv1.GetSessionRequest{Name: "apps/a/users/ann/sessions/s1"}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("the minted token on a second server with the key: %v; want NOT_FOUND", err)
	}

	// A refused call says where to learn how to get a token (RFC 9728).
	for _, path := range []string{"/v1/apps/a/users/ann/sessions/s1", "/kioku.v1.SessionService/GetSession"} {
		req, _ := http.NewRequestWithContext(ctx, "POST", s.url+path, strings.NewReader(`{"name": "apps/a/users/ann/sessions/s1"}`))
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if want := `Bearer resource_metadata="` + s.url + `/.well-known/oauth-protected-resource"`; res.StatusCode != 401 || res.Header.Get("WWW-Authenticate") != want {
			t.Errorf("%s without a token: %s, WWW-Authenticate %q; want 401 with %q", path, res.Status, res.Header.Get("WWW-Authenticate"), want)
		}
	}
	status, out := nodetest.REST(t, "GET", s.url+"/.well-known/oauth-protected-resource", "")
	if servers, _ := out["authorization_servers"].([]any); status != 200 || len(servers) != 1 || servers[0] != s.is.URL || out["resource"] != s.url {
		t.Errorf("the protected-resource metadata: %d %v", status, out)
	}
}

// TestWatchSessionEndsWhenItsTokenExpires: a WatchSession opened with a
// minted token of two seconds ends UNAUTHENTICATED when the token expires.
func TestWatchSessionEndsWhenItsTokenExpires(t *testing.T) {
	s := startIdentityServer(t)
	ctx := t.Context()
	if _, err := s.client(s.appKey).CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: "apps/a/users/ann", SessionId: "s1"}); err != nil {
		t.Fatal(err)
	}
	status, token := s.mint(t, s.appKey, "apps/a/users/ann", "2s")
	if status != 200 {
		t.Fatalf("minting: %d %s", status, token)
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	start := time.Now()
	var err error
	for _, err = range s.client(token).WatchSession(ctx, &kiokuv1.WatchSessionRequest{Name: "apps/a/users/ann/sessions/s1", AfterSequence: new(int64(0))}) {
		if err != nil {
			break
		}
	}
	if connect.CodeOf(err) != connect.CodeUnauthenticated || !strings.Contains(err.Error(), "the token expired at") {
		t.Fatalf("the stream ended with %v after %v; want UNAUTHENTICATED at the token's expiry", err, time.Since(start))
	}
	t.Logf("the stream ended %v after it opened: %v", time.Since(start).Round(100*time.Millisecond), err)
}

// BenchmarkCallWithToken is the CPU of one GetSession over Connect
// (docs/benchmarks.md) with a user key, an ID token and a minted token of
// the same user, the tokens verified on their first call and remembered
// after.
func BenchmarkCallWithToken(b *testing.B) {
	annKey, annEntry := auth.NewKey("ann", "a", "ann")
	s := startIdentityServer(b, annEntry)
	ctx := b.Context()
	if _, err := s.client(s.appKey).CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: "apps/a/users/ann", SessionId: "s1"}); err != nil {
		b.Fatal(err)
	}
	status, minted := s.mint(b, s.appKey, "apps/a/users/ann", "3600s")
	if status != 200 {
		b.Fatalf("minting: %d %s", status, minted)
	}
	for _, c := range []struct{ name, token string }{
		{"key", annKey},
		{"id-token", s.is.Sign(b, s.is.Claims("kioku", "ann"))},
		{"minted-token", minted},
	} {
		b.Run(c.name, func(b *testing.B) {
			cl := s.client(c.token)
			req := &kiokuv1.GetSessionRequest{Name: "apps/a/users/ann/sessions/s1"}
			b.ReportAllocs()
			before := cpuTime(b)
			for b.Loop() {
				if _, err := cl.GetSession(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			// The process's CPU (client and server together), as the
			// machine's load inflates ns/op.
			b.ReportMetric(float64((cpuTime(b)-before).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
