package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kioku-ai/kioku/resource"
)

// Keys are the API keys a server accepts, loaded from a key file. The
// server keeps only the keys' SHA-256 digests. Keys can be replaced while
// the server runs (Reload): a unary call is checked against the keys in
// force when it arrives, and a stream is checked again at intervals (see
// Options.KeyCheckInterval).
type Keys struct {
	path  string
	state atomic.Pointer[keyFile]
}

// keyFile is a loaded, checked key file.
type keyFile struct {
	byDigest map[[sha256.Size]byte]loadedKey
	// appRates are the per-app rate limits of the file's rate_limits.
	appRates map[string]RateLimit
}

// loadedKey is a key-file entry with its expiry parsed.
type loadedKey struct {
	Key
	expires time.Time // zero: never
}

// Key is one entry of a key file.
type Key struct {
	// Name says whose key it is, for logs.
	Name string `json:"name"`
	// App is the app the key may reach, or "*" for every app.
	App string `json:"app"`
	// User, when set, confines the key to this user of App.
	User string `json:"user,omitempty"`
	// SHA256 is the hex SHA-256 digest of the key.
	SHA256 string `json:"sha256"`
	// ExpireTime, when set, is when the key stops working (RFC 3339).
	ExpireTime string `json:"expire_time,omitempty"`
	// RateLimit, when set, replaces the app's and the server's default
	// rate limit for this key.
	RateLimit *RateLimit `json:"rate_limit,omitempty"`
}

// RateLimit is a token bucket: a key may make Burst calls at once, and
// PerSecond calls a second on average. PerSecond 0 means no limit.
type RateLimit struct {
	PerSecond float64 `json:"per_second"`
	Burst     int     `json:"burst"`
}

// AllApps is the App of a key that may reach every app.
const AllApps = "*"

// LoadKeys reads a key file:
//
//	{"keys": [{"name", "app", "user", "sha256", "expire_time", "rate_limit"}],
//	 "rate_limits": {"APP": {"per_second", "burst"}}}
//
// user, expire_time, rate_limit and rate_limits being optional.
func LoadKeys(path string) (*Keys, error) {
	f, err := readKeys(path)
	if err != nil {
		return nil, err
	}
	k := &Keys{path: path}
	k.state.Store(f)
	return k, nil
}

// Reload reads the key file again and, if it is valid, puts its keys in
// force at once: new keys work and removed ones stop working for every
// later call (and for open streams at their next check). If it is not
// valid the keys in force stay, and the error says why. It returns the
// number of keys now in force.
func (k *Keys) Reload() (int, error) {
	f, err := readKeys(k.path)
	if err != nil {
		if old := k.state.Load(); old != nil {
			return len(old.byDigest), err
		}
		return 0, err
	}
	k.state.Store(f)
	return len(f.byDigest), nil
}

// readKeys reads and checks a key file.
func readKeys(path string) (*keyFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the key file: %w", err)
	}
	var f struct {
		Keys       []Key                `json:"keys"`
		RateLimits map[string]RateLimit `json:"rate_limits"`
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("key file %s: %w (want {\"keys\": [{\"name\", \"app\", \"sha256\"}]})", path, err)
	}
	out := &keyFile{byDigest: map[[sha256.Size]byte]loadedKey{}, appRates: f.RateLimits}
	for app, r := range f.RateLimits {
		if app != AllApps {
			if err := resource.ValidateID("rate_limits key", app, resource.AppIDChars); err != nil {
				return nil, fmt.Errorf("key file %s: %v (or \"*\" for every app)", path, err)
			}
		}
		if err := r.check(); err != nil {
			return nil, fmt.Errorf("key file %s: rate_limits[%q]: %v", path, app, err)
		}
	}
	for i, key := range f.Keys {
		d, err := hex.DecodeString(key.SHA256)
		if err != nil || len(d) != sha256.Size {
			return nil, fmt.Errorf("key file %s: keys[%d].sha256 must be 64 hex digits (the SHA-256 of the key; kioku key prints it)", path, i)
		}
		if key.App != AllApps {
			if err := resource.ValidateID(fmt.Sprintf("keys[%d].app", i), key.App, resource.AppIDChars); err != nil {
				return nil, fmt.Errorf("key file %s: %v (or \"*\" for every app)", path, err)
			}
		}
		if key.User != "" {
			if key.App == AllApps {
				return nil, fmt.Errorf("key file %s: keys[%d] has a user but app \"*\"; a user key needs its app", path, i)
			}
			if err := resource.ValidateID(fmt.Sprintf("keys[%d].user", i), key.User, resource.UserIDChars); err != nil {
				return nil, fmt.Errorf("key file %s: %v", path, err)
			}
		}
		var expires time.Time
		if key.ExpireTime != "" {
			if expires, err = time.Parse(time.RFC3339, key.ExpireTime); err != nil {
				return nil, fmt.Errorf("key file %s: keys[%d].expire_time %q is not an RFC 3339 time (like 2027-01-31T00:00:00Z)", path, i, key.ExpireTime)
			}
		}
		if key.RateLimit != nil {
			if err := key.RateLimit.check(); err != nil {
				return nil, fmt.Errorf("key file %s: keys[%d].rate_limit: %v", path, i, err)
			}
		}
		var digest [sha256.Size]byte
		copy(digest[:], d)
		if _, dup := out.byDigest[digest]; dup {
			return nil, fmt.Errorf("key file %s: keys[%d] repeats the digest of an earlier key", path, i)
		}
		out.byDigest[digest] = loadedKey{Key: key, expires: expires}
	}
	if len(out.byDigest) == 0 {
		return nil, fmt.Errorf("key file %s has no keys", path)
	}
	return out, nil
}

func (r RateLimit) check() error {
	switch {
	case r.PerSecond < 0 || r.PerSecond != r.PerSecond:
		return fmt.Errorf("per_second must be a number of calls a second, 0 for no limit")
	case r.PerSecond > 0 && r.Burst < 1:
		return fmt.Errorf("burst must be at least 1 (the calls a key may make at once)")
	}
	return nil
}

// NewKey returns a new random key and its key-file entry; user may be
// empty.
func NewKey(name, app, user string) (string, Key) {
	var b [32]byte
	rand.Read(b[:])
	key := "kioku_" + base64.RawURLEncoding.EncodeToString(b[:])
	d := sha256.Sum256([]byte(key))
	return key, Key{Name: name, App: app, User: user, SHA256: hex.EncodeToString(d[:])}
}

// Caller is the authenticated caller of a call: the key-file entry of the
// key it presented, or the user a token stands for.
type Caller struct {
	// Name is the key's name (or the token's issuer), for logs.
	Name string
	// App is the app the key may reach, or AllApps.
	App string
	// User, when set, confines the caller to this user of App.
	User string
	// Expires, for a caller authenticated by a token, is the token's exp:
	// a stream opened with it ends then. Zero for an API key.
	Expires time.Time

	digest [sha256.Size]byte
	token  bool
}

// KeyID returns an identifier of the caller's key, the same for every
// call made with it and different for every other key (a digest of it,
// never the key), for bounds kept per key. Every token of one user of an
// app from one issuer has the same KeyID.
func (c Caller) KeyID() string { return hex.EncodeToString(c.digest[:16]) }

type callerKey struct{}

// WithCaller returns a context carrying the caller (the Guard sets it).
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller of a call, if the server checks keys.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// rejection is why a key or token was refused; its reason labels the
// metric.
type rejection struct {
	// no_key, unknown_key, expired_key; for tokens bad_token,
	// expired_token, unknown_issuer, wrong_audience, bad_user_claim and
	// issuer_unavailable (UNAVAILABLE, where the others are
	// UNAUTHENTICATED)
	reason string
	msg    string
}

func (r *rejection) Error() string { return r.msg }

// authenticate returns the caller a presented key stands for, given the
// key's SHA-256.
func (k *Keys) authenticate(digest [sha256.Size]byte, now time.Time) (Caller, *rejection) {
	e, r := k.lookup(digest, now)
	if r != nil {
		return Caller{}, r
	}
	return Caller{Name: e.Name, App: e.App, User: e.User, digest: digest}, nil
}

// lookup returns the entry of a key digest that is in force at now.
func (k *Keys) lookup(digest [sha256.Size]byte, now time.Time) (loadedKey, *rejection) {
	f := k.state.Load()
	if f == nil { // a zero Keys holds no key: every call is refused
		return loadedKey{}, &rejection{"unknown_key", "unknown API key"}
	}
	e, ok := f.byDigest[digest]
	if !ok {
		return loadedKey{}, &rejection{"unknown_key", "unknown API key"}
	}
	if !e.expires.IsZero() && !now.Before(e.expires) {
		return loadedKey{}, &rejection{"expired_key", fmt.Sprintf("this API key expired at %s; ask for a new one", e.ExpireTime)}
	}
	return e, nil
}

// stillValid returns nil while the caller's key is in force (not removed,
// not expired), else why not.
func (k *Keys) stillValid(c Caller, now time.Time) *rejection {
	e, r := k.lookup(c.digest, now)
	if r != nil {
		if r.reason == "unknown_key" {
			r.msg = "this API key was revoked"
		}
		return r
	}
	if e.App != c.App || e.User != c.User {
		return &rejection{"unknown_key", "this API key's reach changed; call again"}
	}
	return nil
}

// rateFor returns the rate limit of a caller's key: its own, else its
// app's in the key file, else the file's "*" entry, else def.
func (k *Keys) rateFor(c Caller, def RateLimit) RateLimit {
	f := k.state.Load()
	if f == nil {
		return def
	}
	if e, ok := f.byDigest[c.digest]; ok && e.RateLimit != nil {
		return *e.RateLimit
	}
	if r, ok := f.appRates[c.App]; ok {
		return r
	}
	if r, ok := f.appRates[AllApps]; ok {
		return r
	}
	return def
}
