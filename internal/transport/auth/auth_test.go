package auth_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
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

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"

	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/internal/transport/auth/authtest"
)

func writeKeys(t *testing.T, file map[string]any) *auth.Keys {
	t.Helper()
	b, _ := json.Marshal(file)
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

// countingBody records whether anything read the request body.
type countingBody struct{ read atomic.Bool }

func (b *countingBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return 0, io.EOF
}

const proc = "/test.v1.Service/Call"

// TestGuardRefusesBeforeTheBody: calls without a key in force are answered
// UNAUTHENTICATED in the caller's protocol without their body being read,
// and reported with a reason; a good key reaches the handler with its
// caller.
func TestGuardRefusesBeforeTheBody(t *testing.T) {
	good, goodEntry := auth.NewKey("good", "a", "ann")
	old, oldEntry := auth.NewKey("old", "a", "")
	oldEntry.ExpireTime = "2020-01-01T00:00:00Z"
	keys := writeKeys(t, map[string]any{"keys": []auth.Key{goodEntry, oldEntry}})
	var reasons []string
	g := auth.NewGuard(auth.Options{
		Keys:     keys,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Rejected: func(p, reason string) { reasons = append(reasons, p+" "+reason) },
	}, auth.Policy{proc: {Access: auth.Read}})
	var reached *auth.Caller
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := auth.CallerFrom(r.Context())
		reached = &c
	}))

	for _, c := range []struct {
		header, value, ctype string
		status               int
		want                 string
	}{
		{"", "", "application/json", 401, `"code":"unauthenticated","message":"this server needs an API key`},
		{"Authorization", "Bearer kioku_nope", "application/json", 401, "unknown API key"},
		{"Authorization", "Bearer " + old, "application/proto", 401, "this API key expired at 2020-01-01T00:00:00Z"},
		{"Authorization", "Basic " + good, "application/json", 401, "needs an API key"},
		{"", "", "application/grpc", 200, "grpc-status=16"},
	} {
		body := &countingBody{}
		req := httptest.NewRequest("POST", proc, body)
		req.Header.Set("Content-Type", c.ctype)
		req.Header.Set("Content-Encoding", "gzip")
		if c.header != "" {
			req.Header.Set(c.header, c.value)
		}
		rec := httptest.NewRecorder()
		reached = nil
		h.ServeHTTP(rec, req)
		got := rec.Body.String()
		if c.ctype == "application/grpc" {
			got = "grpc-status=" + rec.Header().Get("Grpc-Status")
		}
		if rec.Code != c.status || !strings.Contains(got, c.want) || reached != nil || body.read.Load() {
			t.Errorf("%s %.20q: %d %s (handler reached %v, body read %v); want %d with %q, nothing read", c.header, c.value, rec.Code, got, reached != nil, body.read.Load(), c.status, c.want)
		}
	}
	want := []string{proc + " no_key", proc + " unknown_key", proc + " expired_key", proc + " no_key", proc + " no_key"}
	if strings.Join(reasons, ",") != strings.Join(want, ",") {
		t.Errorf("reported %v, want %v", reasons, want)
	}

	for _, header := range []string{"Authorization", "X-Goog-Api-Key"} {
		req := httptest.NewRequest("POST", proc, strings.NewReader("{}"))
		value := good
		if header == "Authorization" {
			value = "Bearer " + good
		}
		req.Header.Set(header, value)
		reached = nil
		h.ServeHTTP(httptest.NewRecorder(), req)
		if reached == nil || reached.App != "a" || reached.User != "ann" || reached.Name != "good" {
			t.Errorf("%s: the handler got caller %+v", header, reached)
		}
	}

	// Paths outside the policies pass without a key.
	req := httptest.NewRequest("GET", "/metrics", nil)
	reached = nil
	h.ServeHTTP(httptest.NewRecorder(), req)
	if reached == nil {
		t.Error("a path outside the policy did not reach the handler")
	}
}

// caller returns a function that calls proc with a key through g, to a
// handler that does nothing, and returns the answer.
func caller(g *auth.Guard) func(key string) *httptest.ResponseRecorder {
	h := g.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	return func(key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", proc, strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
}

// TestRateLimits: a key's bucket allows its burst, then refuses with
// RESOURCE_EXHAUSTED and a RetryInfo, and refills at its rate; the key's
// own limit beats its app's, which beats "*" and the server's default.
func TestRateLimits(t *testing.T) {
	k1, e1 := auth.NewKey("own limit", "a", "")
	e1.RateLimit = &auth.RateLimit{PerSecond: 1, Burst: 2}
	k2, e2 := auth.NewKey("app a", "a", "ann")
	k3, e3 := auth.NewKey("app b", "b", "")
	k4, e4 := auth.NewKey("unlimited", "c", "")
	e4.RateLimit = &auth.RateLimit{}
	keys := writeKeys(t, map[string]any{
		"keys":        []auth.Key{e1, e2, e3, e4},
		"rate_limits": map[string]auth.RateLimit{"a": {PerSecond: 10, Burst: 3}, "*": {PerSecond: 100, Burst: 4}},
	})
	now := time.Unix(1_800_000_000, 0)
	var limited atomic.Int32
	g := auth.NewGuard(auth.Options{
		Keys:        keys,
		DefaultRate: auth.RateLimit{PerSecond: 1, Burst: 1},
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Rejected:    func(_, reason string) { limited.Add(1) },
		Now:         func() time.Time { return now },
	}, auth.Policy{proc: {Access: auth.Read}})
	call := caller(g)
	burst := func(key string) int {
		n := 0
		for call(key).Code == 200 {
			n++
			if n > 1000 {
				break
			}
		}
		return n
	}
	for key, want := range map[string]int{k1: 2, k2: 3, k3: 4} {
		if got := burst(key); got != want {
			t.Errorf("burst of %s... = %d, want %d", key[:10], got, want)
		}
	}
	if got := burst(k4); got != 1001 {
		t.Errorf("a key with rate_limit per_second 0 was limited after %d calls", got)
	}

	rec := call(k1)
	var body struct {
		Code, Message string
		Details       []struct{ Type, Value string }
	}
	json.Unmarshal(rec.Body.Bytes(), &body)
	if rec.Code != 429 || body.Code != "resource_exhausted" || !strings.Contains(body.Message, "1 calls a second (bursts of 2); retry in") || len(body.Details) != 1 || body.Details[0].Type != "google.rpc.RetryInfo" {
		t.Fatalf("over the limit: %d %s", rec.Code, rec.Body)
	}
	var info errdetails.RetryInfo
	b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(body.Details[0].Value, "="))
	if err != nil || proto.Unmarshal(b, &info) != nil || info.GetRetryDelay().AsDuration() <= 0 || info.GetRetryDelay().AsDuration() > time.Second+time.Millisecond {
		t.Fatalf("RetryInfo %v (%v), want a delay within a second", &info, err)
	}

	// The bucket refills: after the delay a call passes again.
	now = now.Add(info.GetRetryDelay().AsDuration())
	if rec := call(k1); rec.Code != 200 {
		t.Errorf("after the retry delay: %d %s", rec.Code, rec.Body)
	}
	if limited.Load() != 4 {
		t.Errorf("%d refusals reported, want 4", limited.Load())
	}
}

// share is a settable auth.ShareSource.
type share struct {
	fraction float64
	servers  int
}

func (s *share) Share() (float64, int) { return s.fraction, s.servers }

// TestRateLimitShare: a server granting a share of the limits fills a
// key's bucket at that share of its rate, with that share of its burst
// (at least one call), says in the refusal that the limit is the
// servers', keeps the bucket's tokens when the share changes, and with
// no share refuses every limited call with a RetryInfo of a second.
func TestRateLimitShare(t *testing.T) {
	k, e := auth.NewKey("shared", "a", "")
	e.RateLimit = &auth.RateLimit{PerSecond: 30, Burst: 6}
	free, fe := auth.NewKey("unlimited", "a", "")
	fe.RateLimit = &auth.RateLimit{}
	keys := writeKeys(t, map[string]any{"keys": []auth.Key{e, fe}})
	now := time.Unix(1_800_000_000, 0)
	sh := &share{fraction: 1.0 / 3, servers: 3}
	g := auth.NewGuard(auth.Options{
		Keys:   keys,
		Share:  sh,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:    func() time.Time { return now },
	}, auth.Policy{proc: {Access: auth.Read}})
	call := caller(g)
	burst := func() int {
		n := 0
		for call(k).Code == 200 && n < 100 {
			n++
		}
		return n
	}
	if got := burst(); got != 2 {
		t.Errorf("a third of a burst of 6: %d calls passed; want 2", got)
	}
	if rec := call(k); rec.Code != 429 || !strings.Contains(rec.Body.String(), "30 calls a second (bursts of 6) for the 3 servers together; retry in") {
		t.Errorf("over the share: %d %s", rec.Code, rec.Body)
	}
	// A third of 30 a second: one call every 100 ms.
	now = now.Add(100 * time.Millisecond)
	if got := burst(); got != 1 {
		t.Errorf("100 ms later, %d calls passed; want 1", got)
	}
	// The whole limit: the bucket keeps what it gathered at a third (its
	// burst then, 2), then fills at 30 a second up to 6.
	now = now.Add(time.Second)
	sh.fraction, sh.servers = 1, 1
	if got := burst(); got != 2 {
		t.Errorf("with the whole limit at once: %d calls passed; want the 2 gathered", got)
	}
	now = now.Add(time.Second)
	if got := burst(); got != 6 {
		t.Errorf("with the whole limit, a second later: %d calls passed; want 6", got)
	}
	// No share: refused, with a RetryInfo of a second; keys without a
	// limit pass.
	sh.fraction = 0
	now = now.Add(time.Second)
	rec := call(k)
	if rec.Code != 429 || !strings.Contains(rec.Body.String(), "retry in 1s") {
		t.Errorf("with no share: %d %s", rec.Code, rec.Body)
	}
	if rec := call(free); rec.Code != 200 {
		t.Errorf("a key without a limit, with no share: %d %s", rec.Code, rec.Body)
	}
}

// BenchmarkAuthenticate is the Guard's check of one call (docs/benchmarks.md):
// with an API key, with an ID token and a minted token (verified once,
// then remembered until they expire), and with a new ID token each call
// (the signature checked every time, keys cached).
func BenchmarkAuthenticate(b *testing.B) {
	is := authtest.NewIssuer(b)
	key, entry := auth.NewKey("ann", "web", "ann")
	keysPath := filepath.Join(b.TempDir(), "keys.json")
	data, _ := json.Marshal(map[string]any{"keys": []auth.Key{entry}})
	if err := os.WriteFile(keysPath, data, 0o600); err != nil {
		b.Fatal(err)
	}
	keys, err := auth.LoadKeys(keysPath)
	if err != nil {
		b.Fatal(err)
	}
	providers, err := auth.LoadProviders(authtest.WriteIdentityFile(b, map[string]any{"type": "oidc", "issuer": is.URL, "audience": "kioku", "app": "web"}), auth.ProvidersOptions{})
	if err != nil {
		b.Fatal(err)
	}
	signingPath := filepath.Join(b.TempDir(), "signing.pem")
	if err := auth.NewSigningKeyFile(signingPath); err != nil {
		b.Fatal(err)
	}
	signing, err := auth.LoadSigningKeys(signingPath)
	if err != nil {
		b.Fatal(err)
	}
	g := auth.NewGuard(auth.Options{Keys: keys, Providers: providers, SigningKeys: signing, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, auth.Policy{proc: {Access: auth.Read}})
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := auth.CallerFrom(r.Context()); !ok {
			b.Fatal("no caller")
		}
	}))
	minted, _, err := signing.Mint("web", "ann", time.Hour, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	fresh := make([]string, 2000)
	for i := range fresh {
		fresh[i] = is.Sign(b, is.Claims("kioku", fmt.Sprint("user", i)))
	}
	for i := range fresh {
		fresh[i] = "Bearer " + fresh[i]
	}
	key, minted = "Bearer "+key, "Bearer "+minted
	// run calls with the Authorization header token(i) gives.
	run := func(b *testing.B, token func(i int) string) {
		req := httptest.NewRequest("POST", proc, nil)
		rec := httptest.NewRecorder()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			req.Header["Authorization"] = []string{token(i)}
			h.ServeHTTP(rec, req)
			i++
		}
		if rec.Code != http.StatusOK {
			b.Fatalf("refused: %d %s", rec.Code, rec.Body)
		}
	}
	idToken := "Bearer " + is.Sign(b, is.Claims("kioku", "ann"))
	b.Run("key", func(b *testing.B) { run(b, func(int) string { return key }) })
	b.Run("id-token-cached", func(b *testing.B) { run(b, func(int) string { return idToken }) })
	b.Run("minted-token-cached", func(b *testing.B) { run(b, func(int) string { return minted }) })
	// Each token once; when all were used, the cache is emptied (a reload
	// of the identity file, which keeps the issuer's keys) off the clock.
	b.Run("id-token-first-use", func(b *testing.B) {
		run(b, func(i int) string {
			if i%len(fresh) == 0 && i > 0 {
				b.StopTimer()
				if _, err := providers.Reload(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			return fresh[i%len(fresh)]
		})
	})
}
