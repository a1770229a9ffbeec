package auth_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/internal/transport/auth/authtest"
)

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
