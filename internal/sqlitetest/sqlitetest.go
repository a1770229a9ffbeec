// Package sqlitetest opens kioku's embedded stores for tests: a SQLite file
// of the test's own, closed when the test ends, with the sessions' and the
// memory bank's stores on it, as kioku serve opens them, encrypted or not.
package sqlitetest

import (
	"context"
	"path/filepath"
	"testing"

	memorysqlite "github.com/kioku-ai/kioku/internal/memorystore/sqlite"
	"github.com/kioku-ai/kioku/internal/seal"
	sessionsqlite "github.com/kioku-ai/kioku/internal/sessionstore/sqlite"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
)

// Open opens a new database file in the test's temporary directory.
func Open(t testing.TB) *sqlitedb.DB {
	t.Helper()
	db, err := sqlitedb.Open(filepath.Join(t.TempDir(), "kioku.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Sessions returns the sessions' store on db.
func Sessions(t testing.TB, db *sqlitedb.DB) *sessionsqlite.Store {
	t.Helper()
	s, err := sessionsqlite.New(db)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Memories returns the memory bank's store (with its operations) on db.
func Memories(t testing.TB, db *sqlitedb.DB) *memorysqlite.Store {
	t.Helper()
	s, err := memorysqlite.New(db, memorysqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// OpenEncrypted opens a new database file like Open, encrypted (package
// seal) under a new master key of the test's own.
func OpenEncrypted(t testing.TB) *sqlitedb.DB {
	t.Helper()
	db := Open(t)
	Encrypt(t, db, NewKey(t))
	return db
}

// NewKey returns a new master key, in a key file of the test's own.
func NewKey(t testing.TB) *seal.LocalKey {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kioku.key")
	if err := seal.GenerateKeyFile(path); err != nil {
		t.Fatal(err)
	}
	key, err := seal.LoadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// Encrypt makes db encrypted under key (a new or empty database), or
// checks that it is, as kioku serve does before it opens the stores.
func Encrypt(t testing.TB, db *sqlitedb.DB, key seal.KeyWrapper) {
	t.Helper()
	if err := db.UseEncryption(context.Background(), key); err != nil {
		t.Fatal(err)
	}
}
