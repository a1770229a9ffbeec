package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
)

// The key cache of an issuer (remoteKeys) keeps the JSON Web Key Set it
// fetched for the time the issuer's Cache-Control max-age allows (at least
// minKeysAge, at most maxKeysAge; defaultKeysAge without one), then fetches
// it again; while the issuer cannot be reached the keys it had stay in
// force for staleKeysGrace past their fetch, so that an issuer down for a
// while changes nothing for tokens signed with them (keys past their
// max-age serve while the set is fetched again in the background, so a
// slow issuer holds up no call either). A token whose kid is
// not among the keys fetches the set again, at most once every
// minRefetch per issuer, so that tokens with made-up kids cannot make
// kioku hammer the issuer.
const (
	minKeysAge     = 5 * time.Minute
	defaultKeysAge = time.Hour
	maxKeysAge     = 24 * time.Hour
	staleKeysGrace = 24 * time.Hour
	minRefetch     = 10 * time.Second
	fetchTimeout   = 10 * time.Second
	maxKeySetBytes = 1 << 20
)

// remoteKeys is the signing keys of one issuer, fetched from its JWKS URL
// (found by OpenID discovery when not given) and cached. It implements
// go-oidc's KeySet.
type remoteKeys struct {
	issuer   string
	client   *http.Client
	now      func() time.Time
	algs     []jose.SignatureAlgorithm
	discover bool // find jwksURL from the issuer's openid-configuration

	mu        sync.Mutex
	jwksURL   string
	keys      []jose.JSONWebKey
	fetched   time.Time // when keys were fetched; zero: never
	fresh     time.Time // until when keys need no refetch
	lastTry   time.Time // the last fetch tried, for minRefetch
	lastError error     // why the last fetch failed
	// refreshing is set while a background fetch runs.
	refreshing bool
}

// unavailableError says an issuer's keys cannot be had: none were ever
// fetched, or the last ones are too old.
type unavailableError struct{ msg string }

func (e *unavailableError) Error() string { return e.msg }

// ready returns nil when the issuer has keys in force, fetching them when
// needed; else an *unavailableError naming the issuer.
func (r *remoteKeys) ready(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if !r.fetched.IsZero() && now.Before(r.fresh) {
		return nil
	}
	if !r.fetched.IsZero() && now.Before(r.fetched.Add(maxKeysAge+staleKeysGrace)) {
		// Stale keys serve while a fetch runs in the background, so that
		// an issuer that is slow or hangs holds up no call.
		if !r.refreshing && now.Sub(r.lastTry) >= minRefetch {
			r.refreshing, r.lastTry = true, now
			go r.refreshInBackground(context.WithoutCancel(ctx))
		}
		return nil
	}
	r.refetchLocked(ctx, now)
	if r.fetched.IsZero() || !now.Before(r.fetched.Add(maxKeysAge+staleKeysGrace)) {
		return &unavailableError{fmt.Sprintf("the signing keys of issuer %s cannot be fetched (%v); try again later", r.issuer, r.lastError)}
	}
	return nil
}

// refetchLocked fetches the key set when the last try is at least
// minRefetch ago; a failure keeps the keys there are.
func (r *remoteKeys) refetchLocked(ctx context.Context, now time.Time) {
	if !r.lastTry.IsZero() && now.Sub(r.lastTry) < minRefetch {
		return
	}
	r.lastTry = now
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
	defer cancel()
	keys, age, err := r.fetch(ctx)
	if err != nil {
		r.lastError = err
		return
	}
	r.keys, r.fetched, r.fresh, r.lastError = keys, now, now.Add(age), nil
}

// refreshInBackground fetches the key set (its URL is known by now) and
// puts it in force; a failure keeps the keys there are.
func (r *remoteKeys) refreshInBackground(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	keys, age, err := r.fetch(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refreshing = false
	if err != nil {
		r.lastError = err
		return
	}
	now := r.now()
	r.keys, r.fetched, r.fresh, r.lastError = keys, now, now.Add(age), nil
}

// fetch discovers the JWKS URL when needed and reads the key set, with
// how long it may be cached.
func (r *remoteKeys) fetch(ctx context.Context) ([]jose.JSONWebKey, time.Duration, error) {
	if r.jwksURL == "" && r.discover {
		p, err := oidc.NewProvider(oidc.ClientContext(ctx, r.client), r.issuer)
		if err != nil {
			return nil, 0, fmt.Errorf("OpenID discovery: %w", err)
		}
		var meta struct {
			JWKSURL string `json:"jwks_uri"`
		}
		if err := p.Claims(&meta); err != nil || meta.JWKSURL == "" {
			return nil, 0, fmt.Errorf("OpenID discovery: %s/.well-known/openid-configuration names no jwks_uri", r.issuer)
		}
		r.jwksURL = meta.JWKSURL
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.jwksURL, nil)
	if err != nil {
		return nil, 0, err
	}
	res, err := r.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("GET %s: %s", r.jwksURL, res.Status)
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, maxKeySetBytes))
	if err != nil {
		return nil, 0, fmt.Errorf("GET %s: %w", r.jwksURL, err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, 0, fmt.Errorf("GET %s: not a JSON Web Key Set: %w", r.jwksURL, err)
	}
	return set.Keys, cacheAge(res.Header.Get("Cache-Control")), nil
}

// cacheAge is how long a key set may be used before it is fetched again:
// its max-age, within [minKeysAge, maxKeysAge].
func cacheAge(cacheControl string) time.Duration {
	for d := range strings.SplitSeq(cacheControl, ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(d), "max-age="); ok {
			if s, err := strconv.Atoi(v); err == nil {
				return min(max(time.Duration(s)*time.Second, minKeysAge), maxKeysAge)
			}
		}
	}
	return defaultKeysAge
}

// VerifySignature checks a JWS against the issuer's key of its kid,
// fetching the set again (at most once every minRefetch) when the kid is
// not among the cached keys; it returns the payload.
func (r *remoteKeys) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSigned(raw, r.algs)
	if err != nil {
		return nil, err
	}
	kid := jws.Signatures[0].Header.KeyID
	r.mu.Lock()
	key, ok := r.keyLocked(kid)
	if !ok {
		r.refetchLocked(ctx, r.now())
		key, ok = r.keyLocked(kid)
	}
	fetched := r.fetched
	r.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("the token's signing key (kid %q) is not among the keys of issuer %s (fetched %s)", kid, r.issuer, fetched.UTC().Format(time.RFC3339))
	}
	payload, err := jws.Verify(key)
	if err != nil {
		return nil, fmt.Errorf("the token's signature does not match issuer %s's key %q (tampered with?)", r.issuer, kid)
	}
	return payload, nil
}

// keyLocked returns the cached key of a kid (any key when the token names
// none and the set has exactly one).
func (r *remoteKeys) keyLocked(kid string) (jose.JSONWebKey, bool) {
	if kid == "" && len(r.keys) == 1 {
		return r.keys[0], true
	}
	for _, k := range r.keys {
		if k.KeyID == kid && kid != "" && (k.Use == "" || k.Use == "sig") {
			return k, true
		}
	}
	return jose.JSONWebKey{}, false
}
