package auth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"

	"github.com/kioku-ai/kioku/resource"
)

// Provider is one entry of an identity file: an OpenID Connect issuer (or
// a Firebase project) whose ID tokens stand for users of one app.
type Provider struct {
	// Type is "oidc" or "firebase".
	Type string `json:"type"`
	// Issuer is an oidc provider's issuer URL: https, or http on loopback.
	Issuer string `json:"issuer,omitempty"`
	// Audience is the aud an oidc provider's tokens must have (the client
	// id kioku is known by at the issuer).
	Audience string `json:"audience,omitempty"`
	// Project is a firebase provider's Firebase project id.
	Project string `json:"project,omitempty"`
	// App is the app the provider's users are users of.
	App string `json:"app"`
	// UserClaim is the claim naming the user; empty: "sub" (for Firebase,
	// the uid).
	UserClaim string `json:"user_claim,omitempty"`
}

// The Firebase Authentication issuer and key set of a project's ID tokens.
const (
	firebaseIssuerPrefix = "https://securetoken.google.com/"
	firebaseJWKSURL      = "https://www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com"
)

// ClockSkew is the leeway given to a token's exp, nbf and iat, for clocks
// that disagree a little.
const ClockSkew = time.Minute

// signingAlgs are the algorithms an ID token may be signed with: public-key
// ones only (never none, never a MAC that a public key could forge).
var signingAlgs = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512, jose.ES256, jose.ES384, jose.ES512, jose.EdDSA}

// Providers are the identity providers whose ID tokens a server accepts,
// loaded from an identity file; Reload replaces them while the server runs.
type Providers struct {
	path     string
	emulator string
	client   *http.Client
	now      func() time.Time
	state    atomic.Pointer[providerSet]

	// mu serializes reads of the file; keys are the key caches of the
	// issuers it names, kept across reloads.
	mu   sync.Mutex
	keys map[string]*remoteKeys
}

// providerSet is a loaded identity file.
type providerSet struct {
	byIssuer map[string][]*provider
	issuers  []string
	cache    *tokenCache
}

// provider is a Provider with its verifier and key cache.
type provider struct {
	Provider
	issuer   string
	audience string
	emulated bool // a firebase provider that takes the Auth emulator's unsigned tokens
	keys     *remoteKeys
	verifier *oidc.IDTokenVerifier
}

// ProvidersOptions configure LoadProviders.
type ProvidersOptions struct {
	// FirebaseAuthEmulator is FIREBASE_AUTH_EMULATOR_HOST: when set, the
	// unsigned tokens of the Firebase Auth emulator are accepted for
	// firebase providers (and for them only), as Firebase's Admin SDKs do.
	// Never set it on a server that real users reach.
	FirebaseAuthEmulator string
	// HTTPClient fetches discovery documents and key sets. Nil: a client
	// with a 10 s timeout.
	HTTPClient *http.Client
	// Now is the clock. Nil: time.Now.
	Now func() time.Time
}

// LoadProviders reads an identity file:
//
//	{"providers": [
//	  {"type": "firebase", "project": "PROJECT", "app": "APP"},
//	  {"type": "oidc", "issuer": "https://...", "audience": "AUD", "app": "APP", "user_claim": "sub"}]}
//
// Keys are fetched when the first token of an issuer comes.
func LoadProviders(path string, opts ProvidersOptions) (*Providers, error) {
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: fetchTimeout}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	p := &Providers{path: path, emulator: opts.FirebaseAuthEmulator, client: opts.HTTPClient, now: opts.Now, keys: map[string]*remoteKeys{}}
	s, err := p.read()
	if err != nil {
		return nil, err
	}
	p.state.Store(s)
	return p, nil
}

// Reload reads the identity file again and, when it is valid, puts it in
// force for later calls (the key caches of issuers it still names are
// kept); when it is not, the providers in force stay and the error says
// why. It returns the number of providers in force.
func (p *Providers) Reload() (int, error) {
	s, err := p.read()
	if err != nil {
		return p.state.Load().count(), err
	}
	p.state.Store(s)
	return s.count(), nil
}

func (s *providerSet) count() int {
	n := 0
	for _, ps := range s.byIssuer {
		n += len(ps)
	}
	return n
}

// Issuers returns the issuers of the providers in force, for OAuth
// protected-resource metadata.
func (p *Providers) Issuers() []string { return slices.Clone(p.state.Load().issuers) }

// EmulatorMode reports whether the Firebase Auth emulator's unsigned
// tokens are accepted, and the emulator's host.
func (p *Providers) EmulatorMode() (string, bool) { return p.emulator, p.emulator != "" }

// read reads and checks the identity file.
func (p *Providers) read() (*providerSet, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	data, err := os.ReadFile(p.path)
	if err != nil {
		return nil, fmt.Errorf("reading the identity file: %w", err)
	}
	var f struct {
		Providers []Provider `json:"providers"`
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("identity file %s: %w (want {\"providers\": [{\"type\", \"app\", ...}]})", p.path, err)
	}
	if len(f.Providers) == 0 {
		return nil, fmt.Errorf("identity file %s has no providers", p.path)
	}
	s := &providerSet{byIssuer: map[string][]*provider{}, cache: newTokenCache()}
	keysOf := map[string]*remoteKeys{}
	for i, e := range f.Providers {
		pr, err := p.provider(i, e, keysOf)
		if err != nil {
			return nil, fmt.Errorf("identity file %s: %w", p.path, err)
		}
		for _, o := range s.byIssuer[pr.issuer] {
			if o.audience == pr.audience {
				return nil, fmt.Errorf("identity file %s: providers[%d] repeats the issuer and audience of an earlier provider", p.path, i)
			}
		}
		if len(s.byIssuer[pr.issuer]) == 0 {
			s.issuers = append(s.issuers, pr.issuer)
		}
		s.byIssuer[pr.issuer] = append(s.byIssuer[pr.issuer], pr)
	}
	p.keys = keysOf
	return s, nil
}

// provider checks one entry of the file and builds its verifier; the
// providers of one issuer share its key cache.
func (p *Providers) provider(i int, e Provider, keysOf map[string]*remoteKeys) (*provider, error) {
	if err := resource.ValidateID(fmt.Sprintf("providers[%d].app", i), e.App, resource.AppIDChars); err != nil {
		return nil, err
	}
	pr := &provider{Provider: e}
	if pr.UserClaim == "" {
		pr.UserClaim = "sub"
	}
	var jwksURL string
	switch e.Type {
	case "firebase":
		if err := resource.ValidateID(fmt.Sprintf("providers[%d].project", i), e.Project, resource.AppIDChars); err != nil {
			return nil, err
		}
		if e.Issuer != "" || e.Audience != "" {
			return nil, fmt.Errorf("providers[%d]: a firebase provider takes a project, not an issuer or audience (they follow from the project)", i)
		}
		pr.issuer, pr.audience, jwksURL = firebaseIssuerPrefix+e.Project, e.Project, firebaseJWKSURL
		pr.emulated = p.emulator != ""
	case "oidc":
		if err := checkIssuer(e.Issuer); err != nil {
			return nil, fmt.Errorf("providers[%d].issuer: %w", i, err)
		}
		if e.Audience == "" {
			return nil, fmt.Errorf("providers[%d].audience is required (the client id kioku's tokens are issued for)", i)
		}
		if e.Project != "" {
			return nil, fmt.Errorf("providers[%d]: project is for firebase providers", i)
		}
		pr.issuer, pr.audience = e.Issuer, e.Audience
	default:
		return nil, fmt.Errorf("providers[%d].type %q: want \"oidc\" or \"firebase\"", i, e.Type)
	}
	keys := keysOf[pr.issuer]
	if keys == nil {
		keys = p.keys[pr.issuer] // the cache of the file read before
	}
	if keys == nil {
		keys = &remoteKeys{issuer: pr.issuer, client: p.client, now: p.now, algs: signingAlgs, jwksURL: jwksURL, discover: jwksURL == ""}
	}
	keysOf[pr.issuer] = keys
	pr.keys = keys
	pr.verifier = oidc.NewVerifier(pr.issuer, keys, &oidc.Config{
		ClientID:             pr.audience,
		SupportedSigningAlgs: algNames(signingAlgs),
		// exp, nbf and iat are checked with ClockSkew by checkTimes.
		SkipExpiryCheck: true,
		Now:             p.now,
	})
	return pr, nil
}

// checkIssuer accepts an https URL, or http on loopback (for tests and
// development).
func checkIssuer(issuer string) error {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q is not an issuer URL (want https://issuer.example)", issuer)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
			return nil
		}
	}
	return fmt.Errorf("%q: an issuer must be https (http only on loopback: http://127.0.0.1:PORT, http://localhost:PORT)", issuer)
}

func algNames(algs []jose.SignatureAlgorithm) []string {
	out := make([]string, len(algs))
	for i, a := range algs {
		out[i] = string(a)
	}
	return out
}

// authenticate returns the user an ID token of one of the providers
// stands for.
func (p *Providers) authenticate(ctx context.Context, raw string, digest [sha256.Size]byte, t unverified, now time.Time) (Caller, *rejection) {
	s := p.state.Load()
	ps := s.byIssuer[t.claims.Issuer]
	if len(ps) == 0 {
		return Caller{}, &rejection{"unknown_issuer", fmt.Sprintf("tokens of issuer %q are not accepted here (the server's identity file does not name it)", t.claims.Issuer)}
	}
	i := slices.IndexFunc(ps, func(pr *provider) bool { return slices.Contains(t.claims.Audience, pr.audience) })
	if i < 0 {
		var want []string
		for _, pr := range ps {
			want = append(want, pr.audience)
		}
		return Caller{}, &rejection{"wrong_audience", fmt.Sprintf("the token's audience %q is not one of %q, which this server accepts from issuer %s", t.claims.Audience, want, t.claims.Issuer)}
	}
	pr := ps[i]
	payload, rej := pr.verify(ctx, raw, t)
	if rej != nil {
		return Caller{}, rej
	}
	c, rej := pr.caller(payload, now)
	if rej != nil {
		return Caller{}, rej
	}
	s.cache.put(digest, c)
	return c, nil
}

// verify checks a token's signature, issuer and audience (go-oidc), and
// returns its claims.
func (pr *provider) verify(ctx context.Context, raw string, t unverified) ([]byte, *rejection) {
	if t.alg == "none" {
		if !pr.emulated {
			return nil, &rejection{"bad_token", "the token is not signed (alg none): only the Firebase Auth emulator's tokens may be, on a server started with FIREBASE_AUTH_EMULATOR_HOST"}
		}
		return t.payload, nil
	}
	if !slices.Contains(signingAlgs, jose.SignatureAlgorithm(t.alg)) {
		return nil, &rejection{"bad_token", fmt.Sprintf("the token's algorithm %q is not accepted (want one of %s)", t.alg, strings.Join(algNames(signingAlgs), ", "))}
	}
	if err := pr.keys.ready(ctx); err != nil {
		return nil, &rejection{"issuer_unavailable", err.Error()}
	}
	tok, err := pr.verifier.Verify(ctx, raw)
	if err != nil {
		return nil, &rejection{"bad_token", "the ID token was refused: " + strings.TrimPrefix(err.Error(), "failed to verify signature: ")}
	}
	var all json.RawMessage
	if err := tok.Claims(&all); err != nil {
		return nil, &rejection{"bad_token", "the ID token's claims: " + err.Error()}
	}
	return all, nil
}

// caller checks a verified token's times and user claim.
func (pr *provider) caller(payload []byte, now time.Time) (Caller, *rejection) {
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		return Caller{}, &rejection{"bad_token", "the token's claims are not a JSON object"}
	}
	var times jwtTimes
	if err := json.Unmarshal(payload, &times); err != nil {
		return Caller{}, &rejection{"bad_token", "the token's exp, nbf or iat is not a number of seconds"}
	}
	if rej := times.check(now); rej != nil {
		return Caller{}, rej
	}
	user, _ := claims[pr.UserClaim].(string)
	// An address the issuer has not verified names whoever signed up with
	// it, not its owner: as a user id it would let anyone become the user
	// of an address they typed.
	if pr.UserClaim == "email" && claims["email_verified"] != true {
		return Caller{}, &rejection{"bad_user_claim", "the token's claim email is not verified (email_verified is not true): it cannot name a kioku user"}
	}
	if err := resource.ValidateID("the token's claim "+pr.UserClaim, user, resource.UserIDChars); err != nil {
		return Caller{}, &rejection{"bad_user_claim", fmt.Sprintf("%v: it is not a kioku user id (the identity file's user_claim chooses the claim)", err)}
	}
	return tokenCaller(pr.issuer, pr.App, user, times.expiry()), nil
}

// unverified is what a JWT says of itself before it is verified: enough
// to choose the provider that verifies it.
type unverified struct {
	alg, kid string
	claims   struct {
		Issuer   string   `json:"iss"`
		Audience audience `json:"aud"`
	}
	payload []byte
}

// audience is a JWT's aud: one string or a list.
type audience []string

func (a *audience) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*a = audience{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("aud is neither a string nor a list of strings")
	}
	*a = many
	return nil
}
