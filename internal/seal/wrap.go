package seal

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// A KeyWrapper wraps and unwraps data keys under a master key it holds.
// LocalKey is the one kioku ships (the master key read from a file);
// another, such as one calling Cloud KMS's Encrypt and Decrypt with a key
// ring's key name as its ID, plugs in the same way: kioku never needs the
// master key itself, only these three methods.
type KeyWrapper interface {
	// ID names the master key, never revealing it: it is stored beside
	// every key the wrapper wrapped, so that a data key wrapped under
	// another master key (before a rotation) is told apart.
	ID() string
	// Wrap encrypts a data key, bound to aad (Unwrap needs the same).
	Wrap(ctx context.Context, dataKey, aad []byte) ([]byte, error)
	// Unwrap decrypts what Wrap returned; it fails, rather than returning
	// other bytes, under another master key or another aad.
	Unwrap(ctx context.Context, wrapped, aad []byte) ([]byte, error)
}

// KeySize is the size of master and data keys: AES-256.
const KeySize = 32

// LocalKey is a master key held in memory, read from a key file: it wraps
// data keys with AES-256-GCM.
type LocalKey struct {
	path string
	aead cipher.AEAD
	id   string
}

var _ KeyWrapper = (*LocalKey)(nil)

// LoadKeyFile reads a master key file: the base64 of 32 random bytes, as
// `openssl rand -base64 32` prints it (surrounding white space ignored).
// Its errors name the file.
func LoadKeyFile(path string) (*LocalKey, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("encryption key file %s: %w", path, err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil {
		return nil, fmt.Errorf("encryption key file %s: not base64 (make one with `openssl rand -base64 32`): %w", path, err)
	}
	if len(key) != KeySize {
		return nil, fmt.Errorf("encryption key file %s: holds %d bytes, want %d (make one with `openssl rand -base64 32`)", path, len(key), KeySize)
	}
	k, err := NewLocalKey(key)
	if err != nil {
		return nil, err
	}
	k.path = path
	return k, nil
}

// NewLocalKey returns a LocalKey of a 32-byte master key.
func NewLocalKey(key []byte) (*LocalKey, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("a master key has %d bytes, not %d", KeySize, len(key))
	}
	aead, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("kioku seal: master key id"))
	return &LocalKey{aead: aead, id: "local:" + hex.EncodeToString(mac.Sum(nil)[:8])}, nil
}

// Path is the file the key was read from ("" for NewLocalKey's).
func (k *LocalKey) Path() string { return k.path }

// GenerateLocalKey returns a LocalKey of a new random master key, held in
// memory only (benchmarks use it).
func GenerateLocalKey() *LocalKey {
	key := make([]byte, KeySize)
	rand.Read(key)
	k, _ := NewLocalKey(key) // fails only on a key of the wrong size
	return k
}

// Reload implements Reloader: the key its file holds now.
func (k *LocalKey) Reload() (KeyWrapper, error) {
	if k.path == "" {
		return nil, errors.New("the key was not read from a file")
	}
	return LoadKeyFile(k.path)
}

// ID implements KeyWrapper: "local:" and 16 hex digits of a keyed hash.
func (k *LocalKey) ID() string { return k.id }

// Wrap implements KeyWrapper.
func (k *LocalKey) Wrap(_ context.Context, dataKey, aad []byte) ([]byte, error) {
	return encrypt(k.aead, dataKey, aad), nil
}

// Unwrap implements KeyWrapper.
func (k *LocalKey) Unwrap(_ context.Context, wrapped, aad []byte) ([]byte, error) {
	return decrypt(k.aead, wrapped, aad)
}

// GenerateKeyFile writes a new random master key to path, which must not
// exist, readable by its owner only.
func GenerateKeyFile(path string) error {
	key := make([]byte, KeySize)
	rand.Read(key)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(base64.StdEncoding.EncodeToString(key) + "\n")
	return errors.Join(err, f.Sync(), f.Close())
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// encrypt returns a random nonce followed by the sealed plaintext.
func encrypt(aead cipher.AEAD, plaintext, aad []byte) []byte {
	out := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	rand.Read(out)
	return aead.Seal(out, out, plaintext, aad)
}

// errAuth is the error of a value that does not open: another key, another
// place, or altered bytes.
var errAuth = errors.New("authentication failed")

func decrypt(aead cipher.AEAD, sealed, aad []byte) ([]byte, error) {
	n := aead.NonceSize()
	if len(sealed) < n+aead.Overhead() {
		return nil, errAuth
	}
	out, err := aead.Open(nil, sealed[:n], sealed[n:], aad)
	if err != nil {
		return nil, errAuth
	}
	return out, nil
}
