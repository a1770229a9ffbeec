package auth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"
)

// Bearer tokens that are not API keys are JWTs (three base64url parts;
// an API key has no dot): an ID token of an identity provider (Providers)
// or a token minted by a server (SigningKeys). Each stands for one user of
// one app, with a user key's rights, until its exp.

// parseUnverified reads a JWT's header and claims, unverified, to choose
// who verifies it.
func parseUnverified(raw string) (unverified, *rejection) {
	var t unverified
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return t, &rejection{"bad_token", "the bearer token is not a JWT (header.payload.signature)"}
	}
	header, err := base64.RawURLEncoding.DecodeString(parts[0])
	var h struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if err != nil || json.Unmarshal(header, &h) != nil {
		return t, &rejection{"bad_token", "the bearer token's JWT header is not base64url JSON"}
	}
	t.alg, t.kid = h.Alg, h.Kid
	if t.payload, err = base64.RawURLEncoding.DecodeString(parts[1]); err != nil {
		return t, &rejection{"bad_token", "the bearer token's JWT payload is not base64url"}
	}
	if err := json.Unmarshal(t.payload, &t.claims); err != nil {
		return t, &rejection{"bad_token", fmt.Sprintf("the bearer token's JWT claims: %v", err)}
	}
	if t.claims.Issuer == "" {
		return t, &rejection{"bad_token", "the bearer token has no iss claim"}
	}
	return t, nil
}

// jwtTimes are a token's time claims, in seconds since 1970.
type jwtTimes struct {
	Exp *float64 `json:"exp"`
	Nbf *float64 `json:"nbf"`
	Iat *float64 `json:"iat"`
}

func unixTime(s float64) time.Time {
	sec, frac := math.Modf(s)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC()
}

func (t jwtTimes) expiry() time.Time { return unixTime(*t.Exp) }

// check refuses a token that has no exp, has expired, is not valid yet or
// was issued in the future, each with ClockSkew of leeway.
func (t jwtTimes) check(now time.Time) *rejection {
	switch {
	case t.Exp == nil:
		return &rejection{"bad_token", "the token has no exp claim"}
	case !now.Before(t.expiry().Add(ClockSkew)):
		return &rejection{"expired_token", fmt.Sprintf("the token expired at %s (exp); get a new one", t.expiry().Format(time.RFC3339))}
	case t.Nbf != nil && now.Add(ClockSkew).Before(unixTime(*t.Nbf)):
		return &rejection{"bad_token", fmt.Sprintf("the token is not valid before %s (nbf)", unixTime(*t.Nbf).Format(time.RFC3339))}
	case t.Iat != nil && now.Add(ClockSkew).Before(unixTime(*t.Iat)):
		return &rejection{"bad_token", fmt.Sprintf("the token was issued in the future, at %s (iat)", unixTime(*t.Iat).Format(time.RFC3339))}
	}
	return nil
}

// tokenCaller is the caller a verified token stands for. Its KeyID is the
// same for every token of one user of one app from one issuer, so that
// rate limits and stream bounds apply per user, not per token.
func tokenCaller(issuer, app, user string, expires time.Time) Caller {
	return Caller{
		Name: "token of " + issuer, App: app, User: user, Expires: expires, token: true,
		digest: sha256.Sum256([]byte("token\x00" + issuer + "\x00" + app + "\x00" + user)),
	}
}

// maxCachedTokens bounds a tokenCache.
const maxCachedTokens = 10000

// tokenCache remembers the callers of tokens verified already, by the
// tokens' SHA-256, until they expire: a token used again costs a hash and
// a map lookup, as an API key does, instead of a signature check. It is
// dropped with the identity file or signing keys it was filled under.
type tokenCache struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]Caller
}

func newTokenCache() *tokenCache { return &tokenCache{m: map[[sha256.Size]byte]Caller{}} }

func (c *tokenCache) get(d [sha256.Size]byte, now time.Time) (Caller, bool) {
	c.mu.Lock()
	e, ok := c.m[d]
	c.mu.Unlock()
	return e, ok && now.Before(e.Expires.Add(ClockSkew))
}

func (c *tokenCache) put(d [sha256.Size]byte, e Caller) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxCachedTokens {
		clear(c.m) // rare: refilled by the next calls
	}
	c.m[d] = e
}

// authenticateToken returns the caller a JWT stands for: a token minted
// with the signing keys, or an ID token of a provider. A token verified
// before costs its hash and a lookup.
func authenticateToken(ctx context.Context, providers *Providers, signing *SigningKeys, raw string, d [sha256.Size]byte, now time.Time) (Caller, *rejection) {
	if signing != nil {
		if c, ok := signing.state.Load().cache.get(d, now); ok {
			return c, nil
		}
	}
	if providers != nil {
		if c, ok := providers.state.Load().cache.get(d, now); ok {
			return c, nil
		}
	}
	t, rej := parseUnverified(raw)
	if rej != nil {
		return Caller{}, rej
	}
	if t.claims.Issuer == MintedIssuer {
		if signing == nil {
			return Caller{}, &rejection{"unknown_issuer", "this server accepts no minted tokens (it has no --token-signing-key-file)"}
		}
		return signing.authenticate(raw, d, now)
	}
	if providers == nil {
		return Caller{}, &rejection{"unknown_issuer", fmt.Sprintf("this server accepts no ID tokens (it has no --identity file); issuer %q", t.claims.Issuer)}
	}
	return providers.authenticate(ctx, raw, d, t, now)
}
