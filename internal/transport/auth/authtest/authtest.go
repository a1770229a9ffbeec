// Package authtest is an OpenID Connect issuer for tests: an HTTP server on
// loopback that serves discovery and a JSON Web Key Set and signs ID
// tokens, whose keys can be rotated and which can be taken down, so that
// kioku's verification of ID tokens runs against a real issuer over HTTP.
package authtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Issuer is an OpenID Connect issuer on loopback.
type Issuer struct {
	// URL is the issuer (http://127.0.0.1:PORT), its tokens' iss.
	URL string

	down    atomic.Bool
	fetches atomic.Int64

	mu   sync.Mutex
	keys []signingKey // keys[0] signs; all are published
	n    int
}

type signingKey struct {
	kid string
	alg jose.SignatureAlgorithm
	key crypto.Signer
}

// NewIssuer starts an issuer with an RS256 and an ES256 key; the server
// stops when the test ends.
func NewIssuer(t testing.TB) *Issuer {
	t.Helper()
	is := &Issuer{}
	is.addKey(t, jose.RS256)
	is.addKey(t, jose.ES256)
	srv := httptest.NewServer(http.HandlerFunc(is.serve))
	t.Cleanup(srv.Close)
	is.URL = srv.URL
	return is
}

func (is *Issuer) addKey(t testing.TB, alg jose.SignatureAlgorithm) string {
	t.Helper()
	var k crypto.Signer
	var err error
	if alg == jose.ES256 {
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	} else {
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	if err != nil {
		t.Fatal(err)
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	is.n++
	kid := fmt.Sprintf("key-%d", is.n)
	is.keys = append([]signingKey{{kid: kid, alg: alg, key: k}}, is.keys...)
	return kid
}

func (is *Issuer) serve(w http.ResponseWriter, r *http.Request) {
	if is.down.Load() {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/.well-known/openid-configuration":
		json.NewEncoder(w).Encode(map[string]any{
			"issuer": is.URL, "jwks_uri": is.URL + "/jwks",
			"authorization_endpoint": is.URL + "/authorize", "token_endpoint": is.URL + "/token",
			"id_token_signing_alg_values_supported": []string{"RS256", "ES256"},
		})
	case "/jwks":
		is.fetches.Add(1)
		is.mu.Lock()
		var set jose.JSONWebKeySet
		for _, k := range is.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.key.Public(), KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"})
		}
		is.mu.Unlock()
		w.Header().Set("Cache-Control", "public, max-age=3600")
		json.NewEncoder(w).Encode(set)
	default:
		http.NotFound(w, r)
	}
}

// Rotate adds a new RS256 key that signs from then on and drops the
// oldest one from the key set (kept: the one that signed until now, and
// the ES256 key). It returns the new key's kid.
func (is *Issuer) Rotate(t testing.TB) string {
	kid := is.addKey(t, jose.RS256)
	is.mu.Lock()
	defer is.mu.Unlock()
	if len(is.keys) > 3 {
		is.keys = is.keys[:3]
	}
	return kid
}

// SetDown makes every request to the issuer fail (503) until it is set
// back.
func (is *Issuer) SetDown(down bool) { is.down.Store(down) }

// KeySetFetches counts the requests for the key set.
func (is *Issuer) KeySetFetches() int64 { return is.fetches.Load() }

// Claims returns the claims of a valid token of the issuer for sub,
// audience aud, issued now and expiring in an hour; change them before
// signing.
func (is *Issuer) Claims(aud, sub string) map[string]any {
	now := time.Now()
	return map[string]any{"iss": is.URL, "aud": aud, "sub": sub, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
}

// Sign signs claims with the current RS256 key.
func (is *Issuer) Sign(t testing.TB, claims map[string]any) string {
	return is.SignWith(t, claims, jose.RS256, "")
}

// SignWith signs claims with the newest key of alg, under kid when it is
// not empty (a kid the key set may not have).
func (is *Issuer) SignWith(t testing.TB, claims map[string]any, alg jose.SignatureAlgorithm, kid string) string {
	t.Helper()
	is.mu.Lock()
	var key signingKey
	for _, k := range is.keys {
		if k.alg == alg {
			key = k
			break
		}
	}
	is.mu.Unlock()
	if key.key == nil {
		t.Fatalf("authtest: the issuer has no %s key", alg)
	}
	if kid == "" {
		kid = key.kid
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key.key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Unsigned returns claims as a JWT with alg none and no signature, as the
// Firebase Auth emulator issues them.
func Unsigned(claims map[string]any) string {
	enc := base64.RawURLEncoding
	header, _ := json.Marshal(map[string]string{"alg": "none", "typ": "JWT"})
	payload, _ := json.Marshal(claims)
	return enc.EncodeToString(header) + "." + enc.EncodeToString(payload) + "."
}

// WriteIdentityFile writes an identity file of providers to a file of
// the test's and returns its path.
func WriteIdentityFile(t testing.TB, providers ...map[string]any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"providers": providers})
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/identity.json"
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
