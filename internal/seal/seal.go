// Package seal encrypts the values kioku stores, so that a copy of its
// database file discloses no conversation, state or memory.
//
// It is envelope encryption: each app has a data key of its own (AES-256,
// random), which seals that app's values with AES-256-GCM; the data key is
// stored wrapped (encrypted) by a master key that is never stored with
// the data. A KeyWrapper holds the master key: LocalKey, read from a key
// file, or one backed by a key management service. Rotating the master
// key re-wraps the data keys (Rewrap) and leaves every sealed value as it
// is.
//
// A sealed value is bound to where it is stored (Where: the column and the
// ids of its row, the app included) as GCM's additional data, so a value
// copied to another row, another column or another app does not open.
// Search terms are stored as keyed hashes (Keyring.TermHasher, HMAC-SHA256
// under a key derived from the app's data key): equal terms of one app
// hash alike, so an index still matches them, and without the key a hash
// says nothing of its term. Keyring.Hash is the same for a value that is
// looked up by equality (a memory file's path), bound to its place like a
// sealed value, under a key of its own.
//
// A nil *Keyring seals nothing: its Seal returns the plaintext and its
// Open refuses sealed values, so the stores call it unconditionally and an
// unencrypted database is unchanged.
package seal

import (
	"bytes"
	"context"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"sync"
)

// magic starts every sealed value; stored plaintext (JSON) never does.
var magic = []byte{0, 'k', 's', 1}

// IsSealed reports whether a stored value is sealed.
func IsSealed(v []byte) bool { return bytes.HasPrefix(v, magic) }

// Where is the additional data binding a value to its place: a column and
// the ids of its row, the app first. Build it with At.
type Where []byte

// At returns the place of a value: column (such as "events.body") and the
// ids of its row, app first.
func At(column string, ids ...string) Where {
	n := len("kioku seal v1") + 1 + len(column)
	for _, id := range ids {
		n += 5 + len(id)
	}
	b := make([]byte, 0, n)
	b = append(b, "kioku seal v1\x00"...)
	b = append(b, column...)
	for _, id := range ids {
		// Length-prefixed, so that no two lists of ids join alike.
		b = append(b, 0, byte(len(id)>>24), byte(len(id)>>16), byte(len(id)>>8), byte(len(id)))
		b = append(b, id...)
	}
	return b
}

// WrappedKey is an app's data key as stored: wrapped by the master key
// named WrapperID.
type WrappedKey struct {
	App       string
	WrapperID string
	Wrapped   []byte
}

// A KeyStore holds a Keyring's wrapped data keys.
type KeyStore interface {
	// LoadKey returns the app's wrapped data key, false when it has none.
	LoadKey(ctx context.Context, app string) (WrappedKey, bool, error)
}

// Keyring seals and opens the values of every app under a master key. It
// is safe for concurrent use.
type Keyring struct {
	wrapper KeyWrapper
	store   KeyStore

	mu      sync.RWMutex
	apps    map[string]*appKey
	pending map[string]WrappedKey // made, not stored yet
}

// appKey is an app's unwrapped data key, ready to use.
type appKey struct {
	aead    cipher.AEAD
	termKey []byte
	hashKey []byte
}

// NewKeyring returns a Keyring wrapping data keys with w and finding them
// in store. New apps' data keys are made on first use and wait in Pending
// until the caller stores them (Stored).
func NewKeyring(w KeyWrapper, store KeyStore) *Keyring {
	return &Keyring{wrapper: w, store: store, apps: map[string]*appKey{}, pending: map[string]WrappedKey{}}
}

// Wrapper returns the keyring's master key wrapper.
func (k *Keyring) Wrapper() KeyWrapper { return k.wrapper }

// dataKeyAAD binds a wrapped data key to its app.
func dataKeyAAD(app string) []byte { return At("data key", app) }

// key returns the app's data key: from memory, from the store, or, with
// create, made (a value to open has a key already: none is made for it).
func (k *Keyring) key(app string, create bool) (*appKey, error) {
	k.mu.RLock()
	ak := k.apps[app]
	k.mu.RUnlock()
	if ak != nil {
		return ak, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if ak := k.apps[app]; ak != nil {
		return ak, nil
	}
	ctx := context.Background()
	wk, ok, err := k.store.LoadKey(ctx, app)
	if err != nil {
		return nil, fmt.Errorf("loading the data key of app %s: %w", app, err)
	}
	var dk []byte
	if ok {
		if err := k.followLocked(wk.WrapperID); err != nil {
			return nil, fmt.Errorf("the data key of app %s: %w", app, err)
		}
		if dk, err = k.wrapper.Unwrap(ctx, wk.Wrapped, dataKeyAAD(app)); err != nil {
			return nil, fmt.Errorf("unwrapping the data key of app %s: %w", app, err)
		}
	} else if !create {
		return nil, fmt.Errorf("app %s has no data key in this database", app)
	} else {
		dk = make([]byte, KeySize)
		rand.Read(dk)
		wrapped, err := k.wrapper.Wrap(ctx, dk, dataKeyAAD(app))
		if err != nil {
			return nil, fmt.Errorf("wrapping a data key for app %s: %w", app, err)
		}
		k.pending[app] = WrappedKey{App: app, WrapperID: k.wrapper.ID(), Wrapped: wrapped}
	}
	aead, err := newAEAD(dk)
	if err != nil {
		return nil, err
	}
	termKey, err := hkdf.Key(sha256.New, dk, nil, "kioku seal: search terms", 32)
	if err != nil {
		return nil, err
	}
	hashKey, err := hkdf.Key(sha256.New, dk, nil, "kioku seal: keyed hashes", 32)
	if err != nil {
		return nil, err
	}
	ak = &appKey{aead: aead, termKey: termKey, hashKey: hashKey}
	k.apps[app] = ak
	return ak, nil
}

// Pending returns the data keys made since they were last Stored. A value
// sealed with one of them must not become durable before the key does:
// the store writes them in the transaction of the values (or before).
func (k *Keyring) Pending() []WrappedKey {
	if k == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]WrappedKey, 0, len(k.pending))
	for _, wk := range k.pending {
		out = append(out, wk)
	}
	return out
}

// Stored marks keys (from Pending) as durable.
func (k *Keyring) Stored(keys []WrappedKey) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, wk := range keys {
		delete(k.pending, wk.App)
	}
}

// Seal encrypts a value of app for the place w. A nil Keyring returns
// plaintext as it is.
func (k *Keyring) Seal(app string, w Where, plaintext []byte) ([]byte, error) {
	if k == nil {
		return plaintext, nil
	}
	ak, err := k.key(app, true)
	if err != nil {
		return nil, err
	}
	n := ak.aead.NonceSize()
	out := make([]byte, len(magic)+n, len(magic)+n+len(plaintext)+ak.aead.Overhead())
	copy(out, magic)
	rand.Read(out[len(magic):])
	return ak.aead.Seal(out, out[len(magic):], plaintext, w), nil
}

// SealString is Seal of a string.
func (k *Keyring) SealString(app string, w Where, plaintext string) ([]byte, error) {
	return k.Seal(app, w, []byte(plaintext))
}

// ErrSealed is the error of opening a sealed value without a key.
var ErrSealed = errors.New("the value is encrypted and kioku has no encryption key (--encryption-key-file)")

// Open decrypts a value Seal stored at w. A nil Keyring returns stored as
// it is unless it is sealed (ErrSealed); a Keyring refuses a value that is
// not sealed, or does not open under the app's key at w, rather than
// return bytes it cannot vouch for.
func (k *Keyring) Open(app string, w Where, stored []byte) ([]byte, error) {
	if k == nil {
		if IsSealed(stored) {
			return nil, ErrSealed
		}
		return stored, nil
	}
	if !IsSealed(stored) {
		return nil, fmt.Errorf("a stored value of app %s is not encrypted in an encrypted database", app)
	}
	ak, err := k.key(app, false)
	if err != nil {
		return nil, err
	}
	v, err := decrypt(ak.aead, stored[len(magic):], w)
	if err != nil {
		return nil, fmt.Errorf("a stored value of app %s does not decrypt (%w): altered, or moved from another place", app, err)
	}
	return v, nil
}

// OpenString is Open returning a string.
func (k *Keyring) OpenString(app string, w Where, stored []byte) (string, error) {
	v, err := k.Open(app, w, stored)
	return string(v), err
}

// TermHasher returns a function mapping the app's search terms to their
// keyed hashes (24 hex digits of HMAC-SHA256); a nil Keyring's returns
// terms as they are. The function is not safe for concurrent use.
func (k *Keyring) TermHasher(app string) (func(string) string, error) {
	if k == nil {
		return func(t string) string { return t }, nil
	}
	ak, err := k.key(app, true)
	if err != nil {
		return nil, err
	}
	var mac hash.Hash = hmac.New(sha256.New, ak.termKey)
	var sum [sha256.Size]byte
	return func(t string) string {
		mac.Reset()
		mac.Write([]byte(t))
		return hex.EncodeToString(mac.Sum(sum[:0])[:12])
	}, nil
}

// Hash returns the keyed hash of a value of app stored at w, for a column
// that is looked up by equality but need not be read (its value is sealed
// elsewhere): 32 hex digits (128 bits) of HMAC-SHA256 over w and the value,
// under a key derived from the app's data key. Equal values at one place
// hash alike, so a unique index or a lookup still matches them; at
// another place (another user, say) they do not, and without the key a
// hash says nothing of its value. A nil Keyring returns value as it is.
func (k *Keyring) Hash(app string, w Where, value string) (string, error) {
	if k == nil {
		return value, nil
	}
	ak, err := k.key(app, true)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, ak.hashKey)
	// The place's length first, so that no place and value join alike.
	mac.Write([]byte{byte(len(w) >> 24), byte(len(w) >> 16), byte(len(w) >> 8), byte(len(w))})
	mac.Write(w)
	mac.Write([]byte(value))
	return hex.EncodeToString(mac.Sum(nil)[:16]), nil
}

// checkAAD binds a key check value to its use.
var checkAAD = At("key check")

// NewCheck returns a key check value of w: a random secret wrapped by it,
// which only the same master key unwraps (VerifyCheck).
func NewCheck(ctx context.Context, w KeyWrapper) ([]byte, error) {
	secret := make([]byte, KeySize)
	rand.Read(secret)
	return w.Wrap(ctx, secret, checkAAD)
}

// VerifyCheck reports whether w is the master key that made check.
func VerifyCheck(ctx context.Context, w KeyWrapper, check []byte) bool {
	_, err := w.Unwrap(ctx, check, checkAAD)
	return err == nil
}

// Rewrap re-wraps a data key from master key from to master key to; the
// data key, and so every value it sealed, stays the same.
func Rewrap(ctx context.Context, wk WrappedKey, from, to KeyWrapper) (WrappedKey, error) {
	if wk.WrapperID == to.ID() {
		return wk, nil
	}
	if wk.WrapperID != from.ID() {
		return WrappedKey{}, fmt.Errorf("the data key of app %s is wrapped by master key %s, neither the current (%s) nor the new one", wk.App, wk.WrapperID, from.ID())
	}
	dk, err := from.Unwrap(ctx, wk.Wrapped, dataKeyAAD(wk.App))
	if err != nil {
		return WrappedKey{}, fmt.Errorf("unwrapping the data key of app %s: %w", wk.App, err)
	}
	wrapped, err := to.Wrap(ctx, dk, dataKeyAAD(wk.App))
	if err != nil {
		return WrappedKey{}, fmt.Errorf("wrapping the data key of app %s: %w", wk.App, err)
	}
	return WrappedKey{App: wk.App, WrapperID: to.ID(), Wrapped: wrapped}, nil
}

// A Reloader is a KeyWrapper that can read its master key again (LocalKey
// reads its file), so that a server follows a rotation made while it runs.
type Reloader interface {
	Reload() (KeyWrapper, error)
}

// Follow switches the keyring to the master key named id, which a rotation
// made the database's while the keyring was in use: it reloads its
// wrapper (a Reloader) and re-wraps the data keys waiting in Pending
// under it. It returns the pending keys, re-wrapped.
func (k *Keyring) Follow(id string) ([]WrappedKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.followLocked(id); err != nil {
		return nil, err
	}
	out := make([]WrappedKey, 0, len(k.pending))
	for _, wk := range k.pending {
		out = append(out, wk)
	}
	return out, nil
}

func (k *Keyring) followLocked(id string) error {
	if id == k.wrapper.ID() {
		return nil
	}
	stale := fmt.Errorf("the database's master key is now %s, not this one (%s): it was rotated; give kioku the new key", id, k.wrapper.ID())
	r, ok := k.wrapper.(Reloader)
	if !ok {
		return stale
	}
	w, err := r.Reload()
	if err != nil {
		return fmt.Errorf("%w (reloading: %w)", stale, err)
	}
	if w.ID() != id {
		return stale
	}
	ctx := context.Background()
	for app, wk := range k.pending {
		nk, err := Rewrap(ctx, wk, k.wrapper, w)
		if err != nil {
			return err
		}
		k.pending[app] = nk
	}
	k.wrapper = w
	return nil
}
