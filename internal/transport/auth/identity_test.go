package auth_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/internal/transport/auth/authtest"
)

// tokenGuard is a Guard over providers and signing keys, with a handler
// that records the caller it reaches, and a clock the test moves.
type tokenGuard struct {
	h       http.Handler
	reached *auth.Caller
	now     atomic.Pointer[time.Time]
}

func newTokenGuard(t *testing.T, providers *auth.Providers, signing *auth.SigningKeys) *tokenGuard {
	t.Helper()
	g := &tokenGuard{}
	start := time.Now()
	g.now.Store(&start)
	guard := auth.NewGuard(auth.Options{
		Providers: providers, SigningKeys: signing,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:    func() time.Time { return *g.now.Load() },
	}, auth.Policy{proc: {Access: auth.Read}})
	g.h = guard.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := auth.CallerFrom(r.Context())
		g.reached = &c
	}))
	return g
}

func (g *tokenGuard) advance(d time.Duration) {
	next := g.now.Load().Add(d)
	g.now.Store(&next)
}

// call presents a bearer token and returns the caller reached, or the
// HTTP status and the body of the refusal.
func (g *tokenGuard) call(token string) (*auth.Caller, int, string) {
	req := httptest.NewRequest("POST", proc, strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	g.reached = nil
	g.h.ServeHTTP(rec, req)
	var status struct{ Message string }
	if json.Unmarshal(rec.Body.Bytes(), &status) == nil && status.Message != "" {
		return g.reached, rec.Code, status.Message
	}
	return g.reached, rec.Code, rec.Body.String()
}

func loadProviders(t *testing.T, path string, emulator string, now func() time.Time) *auth.Providers {
	t.Helper()
	p, err := auth.LoadProviders(path, auth.ProvidersOptions{FirebaseAuthEmulator: emulator, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestIDTokensOfAnIssuer: an ID token of a configured OpenID issuer stands
// for the user its sub names, in the provider's app; every wrong token is
// UNAUTHENTICATED with a message naming what is wrong.
func TestIDTokensOfAnIssuer(t *testing.T) {
	is := authtest.NewIssuer(t)
	other := authtest.NewIssuer(t) // an issuer the file does not name
	path := authtest.WriteIdentityFile(t, map[string]any{"type": "oidc", "issuer": is.URL, "audience": "kioku", "app": "web"})
	var g *tokenGuard
	g = newTokenGuard(t, loadProviders(t, path, "", func() time.Time { return *g.now.Load() }), nil)

	c, code, body := g.call(is.Sign(t, is.Claims("kioku", "ann")))
	if c == nil || c.App != "web" || c.User != "ann" || c.Expires.IsZero() {
		t.Fatalf("a valid ID token: caller %+v, %d %s", c, code, body)
	}
	if c, _, _ := g.call(is.SignWith(t, is.Claims("kioku", "bob"), jose.ES256, "")); c == nil || c.User != "bob" {
		t.Errorf("an ES256 ID token: caller %+v", c)
	}

	with := func(change func(map[string]any)) map[string]any {
		claims := is.Claims("kioku", "ann")
		change(claims)
		return claims
	}
	valid := is.Sign(t, is.Claims("kioku", "ann"))
	tampered := valid[:strings.LastIndexByte(valid, '.')] + "." + strings.Repeat("A", len(valid)-strings.LastIndexByte(valid, '.')-1)
	parts := strings.Split(valid, ".")
	forged := authtest.Unsigned(with(func(map[string]any) {}))
	forgedPayload := strings.Split(authtest.Unsigned(with(func(c map[string]any) { c["sub"] = "bob" })), ".")[1]
	for _, c := range []struct{ name, token, want string }{
		{"expired", is.Sign(t, with(func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() })), "the token expired at"},
		{"wrong audience", is.Sign(t, is.Claims("someone-else", "ann")), `the token's audience ["someone-else"] is not one of ["kioku"]`},
		{"wrong issuer", other.Sign(t, with(func(c map[string]any) { c["iss"] = other.URL })), "tokens of issuer \"" + other.URL + "\" are not accepted here"},
		{"another issuer's key", other.Sign(t, is.Claims("kioku", "ann")), "signature does not match"},
		{"tampered signature", tampered, "signature does not match"},
		{"payload swapped", parts[0] + "." + forgedPayload + "." + parts[2], "signature does not match"},
		{"alg none", forged, "the token is not signed (alg none)"},
		{"unknown kid", is.SignWith(t, is.Claims("kioku", "ann"), jose.RS256, "made-up"), `signing key (kid "made-up") is not among the keys of issuer`},
		{"no exp", is.Sign(t, with(func(c map[string]any) { delete(c, "exp") })), "the token has no exp claim"},
		{"not yet valid", is.Sign(t, with(func(c map[string]any) { c["nbf"] = time.Now().Add(time.Hour).Unix() })), "not valid before"},
		{"issued in the future", is.Sign(t, with(func(c map[string]any) { c["iat"] = time.Now().Add(time.Hour).Unix() })), "issued in the future"},
		{"user claim not a user id", is.Sign(t, is.Claims("kioku", "auth0|123")), "the token's claim sub"},
		{"not a JWT", "a.b.c", "not base64url JSON"},
	} {
		caller, code, body := g.call(c.token)
		if caller != nil || code != http.StatusUnauthorized || !strings.Contains(body, c.want) {
			t.Errorf("%s: caller %+v, %d %s; want 401 with %q", c.name, caller, code, body, c.want)
		}
	}
}

// TestEmailClaimMustBeVerified: with user_claim "email", a token whose
// address the issuer has not verified names no user (anyone can sign up
// with another's address at many issuers); a verified one does.
func TestEmailClaimMustBeVerified(t *testing.T) {
	is := authtest.NewIssuer(t)
	path := authtest.WriteIdentityFile(t, map[string]any{"type": "oidc", "issuer": is.URL, "audience": "kioku", "app": "web", "user_claim": "email"})
	var g *tokenGuard
	g = newTokenGuard(t, loadProviders(t, path, "", func() time.Time { return *g.now.Load() }), nil)
	email := func(verified any) string {
		claims := is.Claims("kioku", "x")
		claims["email"] = "ann@example.com"
		if verified != nil {
			claims["email_verified"] = verified
		}
		return is.Sign(t, claims)
	}
	for _, verified := range []any{nil, false, "true"} {
		if c, code, body := g.call(email(verified)); c != nil || code != http.StatusUnauthorized || !strings.Contains(body, "email is not verified") {
			t.Errorf("email_verified %v: caller %+v, %d %s; want 401 naming the unverified email", verified, c, code, body)
		}
	}
	if c, code, body := g.call(email(true)); c == nil || c.User != "ann@example.com" {
		t.Fatalf("a verified email: caller %+v, %d %s", c, code, body)
	}
}

// TestIssuerKeysRotateAndSurviveOutages: keys are fetched once and
// cached; a key rotated in at the issuer is picked up on its first token;
// made-up kids refetch the set at a bounded rate; an issuer that is down
// changes nothing for tokens of cached keys, even past the keys' max-age;
// an issuer whose keys were never fetched is UNAVAILABLE, naming it.
func TestIssuerKeysRotateAndSurviveOutages(t *testing.T) {
	is := authtest.NewIssuer(t)
	path := authtest.WriteIdentityFile(t, map[string]any{"type": "oidc", "issuer": is.URL, "audience": "kioku", "app": "web"})
	var g *tokenGuard
	g = newTokenGuard(t, loadProviders(t, path, "", func() time.Time { return *g.now.Load() }), nil)
	ok := func(what, token string) {
		t.Helper()
		if c, code, body := g.call(token); c == nil {
			t.Fatalf("%s: %d %s", what, code, body)
		}
	}
	ok("first token", is.Sign(t, is.Claims("kioku", "ann")))
	for i := range 5 {
		ok("another token", is.Sign(t, is.Claims("kioku", "ann"+string(rune('a'+i)))))
	}
	if n := is.KeySetFetches(); n != 1 {
		t.Errorf("%d key set fetches for 6 tokens of one key; want 1 (cached)", n)
	}

	// Rotation: the new kid is unknown, so the set is fetched again.
	g.advance(11 * time.Second)
	is.Rotate(t)
	ok("a token of the rotated-in key", is.Sign(t, is.Claims("kioku", "ann")))
	if n := is.KeySetFetches(); n != 2 {
		t.Errorf("%d key set fetches after a rotation; want 2", n)
	}

	// Made-up kids: at most one fetch every 10 s however many come.
	for i := range 20 {
		_, code, _ := g.call(is.SignWith(t, is.Claims("kioku", "ann"), jose.RS256, "random-"+string(rune('a'+i))))
		if code != http.StatusUnauthorized {
			t.Fatalf("a made-up kid: %d", code)
		}
	}
	if n := is.KeySetFetches(); n > 3 {
		t.Errorf("%d key set fetches after 20 tokens of made-up kids within a second; want at most 3", n)
	}

	// The issuer down, for two hours (past the set's max-age of an hour):
	// tokens of the cached keys still pass.
	is.SetDown(true)
	g.advance(2 * time.Hour)
	ok("a cached key's token while the issuer is down", is.Sign(t, with(is.Claims("kioku", "carol"), g.now.Load())))
	// Back up: the stale set is fetched again in the background while the
	// cached keys serve. The background fetch the call above started may
	// still be on its way to the issuer, and fail or succeed: calls go on,
	// each past minRefetch, until one's fetch (or that one) is counted.
	before := is.KeySetFetches()
	is.SetDown(false)
	for deadline := time.Now().Add(10 * time.Second); is.KeySetFetches() == before; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stale key set was not fetched again within 10s")
		}
		g.advance(11 * time.Second)
		ok("a cached key's token once the issuer is back", is.Sign(t, with(is.Claims("kioku", "dave"), g.now.Load())))
	}
	is.SetDown(true)

	// A server that never had the issuer's keys: UNAVAILABLE, naming it.
	var fresh *tokenGuard
	fresh = newTokenGuard(t, loadProviders(t, path, "", func() time.Time { return *fresh.now.Load() }), nil)
	c, code, body := fresh.call(is.Sign(t, is.Claims("kioku", "ann")))
	if c != nil || code != http.StatusServiceUnavailable || !strings.Contains(body, "the signing keys of issuer "+is.URL+" cannot be fetched") {
		t.Errorf("issuer down, no keys cached: %+v, %d %s; want 503 naming the issuer", c, code, body)
	}
	is.SetDown(false)
	fresh.advance(11 * time.Second)
	if c, code, body := fresh.call(is.Sign(t, is.Claims("kioku", "ann"))); c == nil {
		t.Errorf("the issuer back: %d %s", code, body)
	}
}

// with returns claims issued at now, valid for an hour.
func with(claims map[string]any, now *time.Time) map[string]any {
	claims["iat"], claims["exp"] = now.Unix(), now.Add(time.Hour).Unix()
	return claims
}

// TestFirebaseEmulatorTokens: with FIREBASE_AUTH_EMULATOR_HOST, the Auth
// emulator's unsigned tokens stand for the uid in sub, for firebase
// providers only; without it they are refused.
func TestFirebaseEmulatorTokens(t *testing.T) {
	is := authtest.NewIssuer(t)
	path := authtest.WriteIdentityFile(t,
		map[string]any{"type": "firebase", "project": "demo-kioku", "app": "companion"},
		map[string]any{"type": "oidc", "issuer": is.URL, "audience": "kioku", "app": "web"})
	now := time.Now()
	firebase := authtest.Unsigned(map[string]any{
		"iss": "https://securetoken.google.com/demo-kioku", "aud": "demo-kioku", "sub": "Xz9uid", "user_id": "Xz9uid",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "firebase": map[string]any{"sign_in_provider": "anonymous"},
	})
	emu := newTokenGuard(t, loadProviders(t, path, "127.0.0.1:9099", nil), nil)
	if c, code, body := emu.call(firebase); c == nil || c.App != "companion" || c.User != "Xz9uid" {
		t.Errorf("an emulator token in emulator mode: %+v, %d %s", c, code, body)
	}
	if c, _, body := emu.call(authtest.Unsigned(is.Claims("kioku", "ann"))); c != nil || !strings.Contains(body, "alg none") {
		t.Errorf("an unsigned token of an oidc provider in emulator mode: %+v, %s", c, body)
	}
	real := newTokenGuard(t, loadProviders(t, path, "", nil), nil)
	if c, _, body := real.call(firebase); c != nil || !strings.Contains(body, "the token is not signed (alg none)") {
		t.Errorf("an emulator token without emulator mode: %+v, %s", c, body)
	}
}

// TestIdentityFileIsChecked: a bad identity file is refused naming the
// entry and field.
func TestIdentityFileIsChecked(t *testing.T) {
	for _, c := range []struct {
		entry map[string]any
		want  string
	}{
		{map[string]any{"type": "oidc", "issuer": "http://issuer.example", "audience": "k", "app": "a"}, "an issuer must be https (http only on loopback"},
		{map[string]any{"type": "oidc", "issuer": "https://issuer.example", "app": "a"}, "providers[0].audience is required"},
		{map[string]any{"type": "saml", "app": "a"}, `providers[0].type "saml"`},
		{map[string]any{"type": "firebase", "project": "p", "app": "a/b"}, "providers[0].app"},
		{map[string]any{"type": "firebase", "app": "a"}, "providers[0].project"},
	} {
		_, err := auth.LoadProviders(authtest.WriteIdentityFile(t, c.entry), auth.ProvidersOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v; want an error with %q", c.entry, err, c.want)
		}
	}
	for _, issuer := range []string{"https://issuer.example", "http://127.0.0.1:5556", "http://localhost:5556/realms/x"} {
		if _, err := auth.LoadProviders(authtest.WriteIdentityFile(t, map[string]any{"type": "oidc", "issuer": issuer, "audience": "k", "app": "a"}), auth.ProvidersOptions{}); err != nil {
			t.Errorf("issuer %s: %v", issuer, err)
		}
	}
}

// TestMintedTokens: a minted token stands for its user until it expires;
// a server with the same key file accepts it, and after a rotation both
// the old key's tokens and the new one's pass; tampered tokens and tokens
// of another key do not.
func TestMintedTokens(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "signing.pem")
	if err := auth.NewSigningKeyFile(path); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the key file: %v, %v; want mode 0600", fi, err)
	}
	load := func(path string) *auth.SigningKeys {
		k, err := auth.LoadSigningKeys(path)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	minter, second := load(path), load(path)
	tok, exp, err := minter.Mint("web", "ann", 2*time.Minute, time.Now())
	if err != nil || time.Until(exp) > 2*time.Minute || time.Until(exp) < time.Minute {
		t.Fatalf("Mint: %v, expires %v", err, exp)
	}
	g := newTokenGuard(t, nil, second)
	if c, code, body := g.call(tok); c == nil || c.App != "web" || c.User != "ann" {
		t.Fatalf("a minted token on another server with the key: %+v, %d %s", c, code, body)
	}
	g.advance(3*time.Minute + auth.ClockSkew)
	if c, _, body := g.call(tok); c != nil || !strings.Contains(body, "the token expired at") {
		t.Errorf("an expired minted token: %+v, %s", c, body)
	}

	// Another key file's tokens are refused; so is a tampered token.
	otherPath := filepath.Join(dir, "other.pem")
	if err := auth.NewSigningKeyFile(otherPath); err != nil {
		t.Fatal(err)
	}
	foreign, _, _ := load(otherPath).Mint("web", "ann", time.Hour, time.Now())
	tok2, _, _ := minter.Mint("web", "ann", time.Hour, time.Now())
	parts := strings.Split(tok2, ".")
	bob, _, _ := minter.Mint("web", "bob", time.Hour, time.Now())
	g = newTokenGuard(t, nil, second)
	for _, c := range []struct{ name, token, want string }{
		{"another key's", foreign, "is not one this server accepts"},
		{"bob's claims under ann's signature", parts[0] + "." + strings.Split(bob, ".")[1] + "." + parts[2], "signature does not verify"},
	} {
		if caller, _, body := g.call(c.token); caller != nil || !strings.Contains(body, c.want) {
			t.Errorf("%s token: %+v, %s; want %q", c.name, caller, body, c.want)
		}
	}

	// Rotation: the new key signs; the old one's tokens still pass.
	if err := auth.NewSigningKeyFile(path); err != nil {
		t.Fatal(err)
	}
	if err := second.Reload(); err != nil {
		t.Fatal(err)
	}
	newTok, _, _ := load(path).Mint("web", "carol", time.Hour, time.Now())
	for _, tk := range []string{tok2, newTok} {
		if c, code, body := g.call(tk); c == nil {
			t.Errorf("after a rotation: %d %s", code, body)
		}
	}
	for _, ttl := range []time.Duration{25 * time.Hour, time.Millisecond} {
		if _, _, err := minter.Mint("web", "ann", ttl, time.Now()); err == nil || !strings.Contains(err.Error(), "ttl") {
			t.Errorf("Mint with ttl %v: %v; want an error naming ttl", ttl, err)
		}
	}
}
