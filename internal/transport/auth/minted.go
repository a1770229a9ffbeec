package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/kioku-ai/kioku/resource"
)

// MintedIssuer is the iss (and aud) of the tokens a server mints.
const MintedIssuer = "kioku"

// The bounds of a minted token's life.
const (
	DefaultTokenTTL = time.Hour
	MaxTokenTTL     = 24 * time.Hour
)

// SigningKeys sign the user tokens a server mints (MintUserToken, kioku
// token) and verify them. They are read from a PEM file: the first block
// is the Ed25519 private key that signs (PKCS#8, "PRIVATE KEY"), the
// blocks after it the public keys (PKIX, "PUBLIC KEY") of earlier signing
// keys, whose tokens are still accepted until they expire. Every server
// with the same file accepts the tokens of every other.
type SigningKeys struct {
	path  string
	state atomic.Pointer[signingSet]
}

type signingSet struct {
	signer jose.Signer
	kid    string
	public map[string]ed25519.PublicKey // by kid, the signing key's included
	cache  *tokenCache
}

// mintedClaims are a minted token's claims beside the registered ones.
type mintedClaims struct {
	App string `json:"kioku_app"`
}

// LoadSigningKeys reads a signing key file.
func LoadSigningKeys(path string) (*SigningKeys, error) {
	s, err := readSigningKeys(path)
	if err != nil {
		return nil, err
	}
	k := &SigningKeys{path: path}
	k.state.Store(s)
	return k, nil
}

// Reload reads the signing key file again and, when it is valid, signs
// and verifies with its keys from then on; when it is not, the keys in
// force stay and the error says why.
func (k *SigningKeys) Reload() error {
	s, err := readSigningKeys(k.path)
	if err != nil {
		return err
	}
	k.state.Store(s)
	return nil
}

// keyID names a public key in the tokens it signs: the hex of the first 8
// bytes of its SHA-256.
func keyID(pub ed25519.PublicKey) string {
	d := sha256.Sum256(pub)
	return hex.EncodeToString(d[:8])
}

func readSigningKeys(path string) (*signingSet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the token signing key file: %w", err)
	}
	priv, public, err := parseSigningKeys(data)
	if err != nil {
		return nil, fmt.Errorf("token signing key file %s: %w", path, err)
	}
	s := &signingSet{kid: keyID(priv.Public().(ed25519.PublicKey)), public: map[string]ed25519.PublicKey{}, cache: newTokenCache()}
	for _, p := range public {
		s.public[keyID(p)] = p
	}
	opts := (&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), s.kid)
	if s.signer, err = jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: priv}, opts); err != nil {
		return nil, fmt.Errorf("token signing key file %s: %w", path, err)
	}
	return s, nil
}

// parseSigningKeys reads the PEM blocks of a signing key file: the
// private key, and every public key accepted (the private key's first).
func parseSigningKeys(data []byte) (ed25519.PrivateKey, []ed25519.PublicKey, error) {
	block, rest := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, nil, errors.New("the first PEM block must be an Ed25519 PRIVATE KEY (kioku token --new-key FILE writes one)")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	priv, ok := k.(ed25519.PrivateKey)
	if err != nil || !ok {
		return nil, nil, errors.New("the PRIVATE KEY is not a PKCS#8 Ed25519 key")
	}
	public := []ed25519.PublicKey{priv.Public().(ed25519.PublicKey)}
	for i := 1; ; i++ {
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		pub, ok := k.(ed25519.PublicKey)
		if block.Type != "PUBLIC KEY" || err != nil || !ok {
			return nil, nil, fmt.Errorf("PEM block %d: want the Ed25519 PUBLIC KEY of an earlier signing key", i+1)
		}
		public = append(public, pub)
	}
	return priv, public, nil
}

// NewSigningKeyFile writes a new signing key to path (mode 0600). When
// path holds a signing key file already, its keys' public halves follow
// the new key, so that the tokens they signed stay valid (a rotation);
// keep at most the keys of the last MaxTokenTTL, then drop the rest by
// hand.
func NewSigningKeyFile(path string) error {
	var earlier []ed25519.PublicKey
	if data, err := os.ReadFile(path); err == nil {
		if _, earlier, err = parseSigningKeys(data); err != nil {
			return fmt.Errorf("%s: %w (not rotated)", path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return err
	}
	out := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	for _, p := range earlier {
		der, err := x509.MarshalPKIXPublicKey(p)
		if err != nil {
			return err
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})...)
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, out, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Mint returns a token standing for one user of an app until now+ttl, and
// when it expires. The app and user must be valid ids; ttl 0 is
// DefaultTokenTTL, and more than MaxTokenTTL is refused.
func (k *SigningKeys) Mint(app, user string, ttl time.Duration, now time.Time) (string, time.Time, error) {
	if err := resource.ValidateID("app", app, resource.AppIDChars); err != nil {
		return "", time.Time{}, err
	}
	if err := resource.ValidateID("user", user, resource.UserIDChars); err != nil {
		return "", time.Time{}, err
	}
	switch {
	case ttl == 0:
		ttl = DefaultTokenTTL
	case ttl < time.Second || ttl > MaxTokenTTL:
		return "", time.Time{}, fmt.Errorf("ttl %v: want between 1s and %v", ttl, MaxTokenTTL)
	}
	now = now.Truncate(time.Second)
	exp := now.Add(ttl)
	claims := jwt.Claims{Issuer: MintedIssuer, Audience: jwt.Audience{MintedIssuer}, Subject: user, IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(exp)}
	tok, err := jwt.Signed(k.state.Load().signer).Claims(claims).Claims(mintedClaims{App: app}).Serialize()
	if err != nil {
		return "", time.Time{}, err
	}
	return tok, exp, nil
}

// authenticate returns the user a minted token stands for.
func (k *SigningKeys) authenticate(raw string, digest [sha256.Size]byte, now time.Time) (Caller, *rejection) {
	s := k.state.Load()
	tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		return Caller{}, &rejection{"bad_token", "the minted token is malformed or not signed with EdDSA"}
	}
	kid := tok.Headers[0].KeyID
	pub, ok := s.public[kid]
	if !ok {
		return Caller{}, &rejection{"bad_token", fmt.Sprintf("the minted token's signing key (kid %q) is not one this server accepts (rotated out of its --token-signing-key-file?)", kid)}
	}
	var claims jwt.Claims
	var extra mintedClaims
	if err := tok.Claims(pub, &claims, &extra); err != nil {
		return Caller{}, &rejection{"bad_token", "the minted token's signature does not verify (tampered with?)"}
	}
	if !claims.Audience.Contains(MintedIssuer) {
		return Caller{}, &rejection{"wrong_audience", fmt.Sprintf("the minted token's audience %q is not %q", claims.Audience, MintedIssuer)}
	}
	var times jwtTimes
	if claims.Expiry != nil {
		times.Exp = new(float64(*claims.Expiry))
	}
	if claims.IssuedAt != nil {
		times.Iat = new(float64(*claims.IssuedAt))
	}
	if rej := times.check(now); rej != nil {
		return Caller{}, rej
	}
	if resource.ValidateID("app", extra.App, resource.AppIDChars) != nil || resource.ValidateID("user", claims.Subject, resource.UserIDChars) != nil {
		return Caller{}, &rejection{"bad_user_claim", "the minted token's kioku_app or sub is not a kioku id"}
	}
	c := tokenCaller(MintedIssuer, extra.App, claims.Subject, times.expiry())
	s.cache.put(digest, c)
	return c, nil
}
