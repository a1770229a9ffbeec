package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/internal/seal"
)

func localKey(t *testing.T, dir, name string) *seal.LocalKey {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := seal.GenerateKeyFile(p); err != nil {
		t.Fatal(err)
	}
	k, err := seal.LoadKeyFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func openWith(t *testing.T, path string, w seal.KeyWrapper) (*DB, error) {
	t.Helper()
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.UseEncryption(context.Background(), w); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func TestEncryptionChecksTheKey(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "kioku.db")
	key, wrong, next := localKey(t, dir, "key"), localKey(t, dir, "wrong"), localKey(t, dir, "next")

	db, err := openWith(t, path, key)
	if err != nil {
		t.Fatal(err)
	}
	// A value sealed with a new app's key: the key is written by the same
	// commit.
	sealed, err := db.Keyring().Seal("app1", seal.At("t.v", "app1", "1"), []byte("CANARY"))
	if err != nil {
		t.Fatal(err)
	}
	err = db.Write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.Exec(`CREATE TABLE t (v BLOB)`); err != nil {
			return err
		}
		_, err := tx.Exec(`INSERT INTO t (v) VALUES (?)`, sealed)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(db.Keyring().Pending()) != 0 {
		t.Fatal("the data key is still pending after a commit")
	}
	db.Close()

	if _, err := openWith(t, path, nil); err == nil || !strings.Contains(err.Error(), "is encrypted") {
		t.Fatalf("opening without a key: %v", err)
	}
	if _, err := openWith(t, path, wrong); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("opening with a wrong key: %v", err)
	}

	// Rotation: afterwards only the new key opens the database, and it
	// reads the value sealed before.
	db, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := RotateKey(ctx, db, key, next); err != nil || n != 1 {
		t.Fatalf("RotateKey = %d, %v", n, err)
	}
	if n, err := RotateKey(ctx, db, key, next); err != nil || n != 0 {
		t.Fatalf("RotateKey again = %d, %v", n, err)
	}
	db.Close()
	if _, err := openWith(t, path, key); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("the old key after rotation: %v", err)
	}
	db, err = openWith(t, path, next)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v []byte
	if err := db.Read().QueryRow(`SELECT v FROM t`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	if got, err := db.Keyring().Open("app1", seal.At("t.v", "app1", "1"), v); err != nil || string(got) != "CANARY" {
		t.Fatalf("after rotation: %q, %v", got, err)
	}
}

func TestEncryptionRefusesPlainData(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kioku.db")
	db, err := openWith(t, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Write(context.Background(), func(tx *sql.Tx) error {
		_, err := tx.Exec(`CREATE TABLE events (v TEXT); INSERT INTO events VALUES ('plain')`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := openWith(t, path, localKey(t, dir, "key")); err == nil || !strings.Contains(err.Error(), "unencrypted data (table events)") {
		t.Fatalf("opening plain data with a key: %v", err)
	}
}

// TestRotationWhileServing: a database in use is rotated by another
// handle (kioku encryption rotate) and its key file replaced; the user
// of the database keeps reading and writing, a new app's data key
// included, and the new key alone opens the database afterwards.
func TestRotationWhileServing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "kioku.db")
	keyFile := filepath.Join(dir, "key")
	if err := seal.GenerateKeyFile(keyFile); err != nil {
		t.Fatal(err)
	}
	key, err := seal.LoadKeyFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	next := localKey(t, dir, "next")
	db, err := openWith(t, path, key)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	put := func(app string) {
		t.Helper()
		v, err := db.Keyring().Seal(app, seal.At("t.v", app), []byte("value of "+app))
		if err != nil {
			t.Fatal(err)
		}
		err = db.Write(ctx, func(tx *sql.Tx) error {
			_, err := tx.Exec(`CREATE TABLE IF NOT EXISTS t (app TEXT PRIMARY KEY, v BLOB); INSERT INTO t (app, v) VALUES (?, ?)`, app, v)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	put("app1")

	other, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := RotateKey(ctx, other, key, next); err != nil {
		t.Fatal(err)
	}
	other.Close()
	if err := os.Rename(filepath.Join(dir, "next"), keyFile); err != nil {
		t.Fatal(err)
	}
	put("app2") // a new data key, wrapped under the key the file now holds

	db2, err := openWith(t, path, next)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	for _, app := range []string{"app1", "app2"} {
		var v []byte
		if err := db2.Read().QueryRow(`SELECT v FROM t WHERE app = ?`, app).Scan(&v); err != nil {
			t.Fatal(err)
		}
		if got, err := db2.Keyring().Open(app, seal.At("t.v", app), v); err != nil || string(got) != "value of "+app {
			t.Fatalf("%s under the new key: %q, %v", app, got, err)
		}
	}
}
