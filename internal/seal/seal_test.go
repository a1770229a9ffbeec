package seal

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// memStore is a KeyStore in memory.
type memStore map[string]WrappedKey

func (m memStore) LoadKey(_ context.Context, app string) (WrappedKey, bool, error) {
	wk, ok := m[app]
	return wk, ok, nil
}

func (m memStore) store(k *Keyring) {
	keys := k.Pending()
	for _, wk := range keys {
		m[wk.App] = wk
	}
	k.Stored(keys)
}

func testKey(t testing.TB) *LocalKey {
	t.Helper()
	path := filepath.Join(t.TempDir(), "key")
	if err := GenerateKeyFile(path); err != nil {
		t.Fatal(err)
	}
	k, err := LoadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpen(t *testing.T) {
	store := memStore{}
	k := NewKeyring(testKey(t), store)
	at := At("events.body", "app1", "s1", "e1")
	plain := []byte(`{"text":"CANARY"}`)
	sealed, err := k.Seal("app1", at, plain)
	if err != nil {
		t.Fatal(err)
	}
	if !IsSealed(sealed) || bytes.Contains(sealed, []byte("CANARY")) {
		t.Fatalf("sealed value %q holds its plaintext or no marker", sealed)
	}
	if got, err := k.Open("app1", at, sealed); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	// Another row, column or app: it does not open.
	for _, w := range []struct {
		app string
		at  Where
	}{
		{"app1", At("events.body", "app1", "s1", "e2")},
		{"app1", At("events.meta", "app1", "s1", "e1")},
		{"app1", At("events.body", "app1", "s1e", "1")},
		{"app2", At("events.body", "app2", "s1", "e1")},
	} {
		if _, err := k.Open(w.app, w.at, sealed); err == nil {
			t.Errorf("value of app1/s1/e1 opened at %s %q", w.app, w.at)
		}
	}
	tampered := bytes.Clone(sealed)
	tampered[len(tampered)-1] ^= 1
	if _, err := k.Open("app1", at, tampered); err == nil {
		t.Error("an altered value opened")
	}
	if _, err := k.Open("app1", at, plain); err == nil || !strings.Contains(err.Error(), "not encrypted") {
		t.Errorf("plaintext in an encrypted store: %v", err)
	}

	// The data keys persist: a keyring on the same store and master key
	// opens what the first sealed; another master key does not.
	// Opening makes no data key: only app1's is there to store.
	store.store(k)
	if len(store) != 1 {
		t.Fatalf("stored %d data keys, want 1 (app1's)", len(store))
	}
	again := NewKeyring(k.Wrapper(), store)
	if got, err := again.Open("app1", at, sealed); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open after reload = %q, %v", got, err)
	}
	other := NewKeyring(testKey(t), store)
	if _, err := other.Open("app1", at, sealed); err == nil {
		t.Fatal("another master key opened a value")
	}
}

func TestNilKeyring(t *testing.T) {
	var k *Keyring
	v, err := k.Seal("a", At("c"), []byte("x"))
	if err != nil || string(v) != "x" {
		t.Fatalf("nil Seal = %q, %v", v, err)
	}
	if v, err := k.Open("a", At("c"), []byte("x")); err != nil || string(v) != "x" {
		t.Fatalf("nil Open = %q, %v", v, err)
	}
	sealed, _ := NewKeyring(testKey(t), memStore{}).Seal("a", At("c"), []byte("x"))
	if _, err := k.Open("a", At("c"), sealed); err != ErrSealed {
		t.Fatalf("nil Open of a sealed value: %v, want ErrSealed", err)
	}
	h, _ := k.TermHasher("a")
	if h("word") != "word" {
		t.Fatal("a nil keyring hashes terms")
	}
	if v, err := k.Hash("a", At("c"), "/memories/x"); err != nil || v != "/memories/x" {
		t.Fatalf("nil Hash = %q, %v", v, err)
	}
}

func TestHash(t *testing.T) {
	store := memStore{}
	k := NewKeyring(testKey(t), store)
	at := At("memory_files.path", "app1", "ann")
	hash := func(k *Keyring, app string, at Where, v string) string {
		t.Helper()
		h, err := k.Hash(app, at, v)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	h := hash(k, "app1", at, "/memories/canary.md")
	if len(h) != 32 || strings.Contains(h, "canary") {
		t.Fatalf("hash %q", h)
	}
	if again := hash(k, "app1", at, "/memories/canary.md"); again != h {
		t.Fatalf("one value at one place hashes to %s and %s", h, again)
	}
	// Another value, place, app or key: another hash.
	for _, o := range []struct {
		app string
		at  Where
		v   string
	}{
		{"app1", at, "/memories/canari.md"},
		{"app1", At("memory_files.path", "app1", "bob"), "/memories/canary.md"},
		{"app1", At("memory_files.name", "app1", "ann"), "/memories/canary.md"},
		{"app2", At("memory_files.path", "app2", "ann"), "/memories/canary.md"},
	} {
		if got := hash(k, o.app, o.at, o.v); got == h {
			t.Errorf("%s %q %q hashes as app1 ann's /memories/canary.md", o.app, o.at, o.v)
		}
	}
	// The search terms' hash is not this one.
	terms, _ := k.TermHasher("app1")
	if th := terms("/memories/canary.md"); strings.HasPrefix(h, th) {
		t.Errorf("the path's hash %s extends its term hash %s", h, th)
	}
	// The data key persists, and so do the hashes: a keyring on the same
	// store finds the same one.
	store.store(k)
	if again := hash(NewKeyring(k.Wrapper(), store), "app1", at, "/memories/canary.md"); again != h {
		t.Fatalf("a new keyring hashes %s, the first %s", again, h)
	}
}

func TestTermHasher(t *testing.T) {
	k := NewKeyring(testKey(t), memStore{})
	h1, _ := k.TermHasher("app1")
	h1b, _ := k.TermHasher("app1")
	h2, _ := k.TermHasher("app2")
	if h1("canary") != h1b("canary") {
		t.Fatal("one app's hashes of a term differ")
	}
	if h1("canary") == h1("canari") || h1("canary") == h2("canary") {
		t.Fatal("hashes of different terms, or of two apps, are equal")
	}
	if got := h1("canary"); len(got) != 24 || strings.Contains(got, "canary") {
		t.Fatalf("hash %q", got)
	}
}

func TestRewrapAndCheck(t *testing.T) {
	ctx := context.Background()
	old, next := testKey(t), testKey(t)
	store := memStore{}
	k := NewKeyring(old, store)
	at := At("state", "app1", "ann")
	sealed, _ := k.Seal("app1", at, []byte("v"))
	store.store(k)
	check, err := NewCheck(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	if !VerifyCheck(ctx, old, check) || VerifyCheck(ctx, next, check) {
		t.Fatal("the key check does not tell the keys apart")
	}
	wk, err := Rewrap(ctx, store["app1"], old, next)
	if err != nil {
		t.Fatal(err)
	}
	store["app1"] = wk
	if got, err := NewKeyring(next, store).Open("app1", at, sealed); err != nil || string(got) != "v" {
		t.Fatalf("Open under the new key = %q, %v", got, err)
	}
	if _, err := NewKeyring(old, store).Open("app1", at, sealed); err == nil {
		t.Fatal("the old key still opens after the rotation")
	}
}

func TestFollowReloadsTheKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key")
	if err := GenerateKeyFile(path); err != nil {
		t.Fatal(err)
	}
	old, err := LoadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	store := memStore{}
	k := NewKeyring(old, store)
	k.Seal("app1", At("c"), []byte("v")) // app1's key waits in Pending
	if err := GenerateKeyFile(filepath.Join(dir, "new")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "new"), path); err != nil {
		t.Fatal(err)
	}
	next, _ := LoadKeyFile(path)
	pending, err := k.Follow(next.ID())
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0].WrapperID != next.ID() {
		t.Fatalf("pending after Follow = %+v", pending)
	}
	if _, err := k.Follow("local:0000000000000000"); err == nil {
		t.Fatal("Follow switched to a key its file does not hold")
	}
}

func TestLoadKeyFileErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"short": "c2hvcnQ=\n", "text": "not base64!\n"} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o600)
		if _, err := LoadKeyFile(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := LoadKeyFile(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing: %v", err)
	}
}

// BenchmarkSeal measures sealing and opening a 1 KiB value (an event's
// JSON is typically a few hundred bytes) and hashing one search term.
func BenchmarkSeal(b *testing.B) {
	k := NewKeyring(testKey(b), memStore{})
	value := bytes.Repeat([]byte("x"), 1024)
	at := At("events.body", "app", "session", "42")
	sealed, _ := k.Seal("app", at, value)
	b.Run("seal-1KiB", func(b *testing.B) {
		b.SetBytes(int64(len(value)))
		for b.Loop() {
			k.Seal("app", at, value)
		}
	})
	b.Run("open-1KiB", func(b *testing.B) {
		b.SetBytes(int64(len(value)))
		for b.Loop() {
			k.Open("app", at, sealed)
		}
	})
	b.Run("term", func(b *testing.B) {
		h, _ := k.TermHasher("app")
		for b.Loop() {
			h("biscuit")
		}
	})
}
