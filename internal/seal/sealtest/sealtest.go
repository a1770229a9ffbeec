// Package sealtest helps tests run stores on encrypted databases: a master
// key file of their own, and a database encrypted with it.
package sealtest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/kioku-ai/kioku/internal/seal"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
)

// Key writes a new master key file in a temporary directory of t and
// returns it loaded.
func Key(t testing.TB) *seal.LocalKey {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kioku.key")
	if err := seal.GenerateKeyFile(path); err != nil {
		t.Fatal(err)
	}
	k, err := seal.LoadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Encrypt makes db, a new database, encrypted under a new key (Key).
func Encrypt(t testing.TB, db *sqlitedb.DB) {
	t.Helper()
	if err := db.UseEncryption(context.Background(), Key(t)); err != nil {
		t.Fatal(err)
	}
}
