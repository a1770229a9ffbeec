// Package sqlitetest opens kioku's embedded stores for tests: a SQLite file
// of the test's own, closed when the test ends, with the sessions' and the
// memory bank's stores on it, as kioku serve opens them, encrypted or not.
package sqlitetest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
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

// LeavesNoTrace runs write on a plain database and on an encrypted one, each
// in a directory of its own, and then checks those directories for word,
// while the database is open and after it closed: no file of an encrypted
// database, its log or its shared memory may hold it, and a plain database
// must (else the check sees nothing). what says what word stands in, for
// the messages.
func LeavesNoTrace(t *testing.T, word, what string, write func(t *testing.T, db *sqlitedb.DB)) {
	for _, encrypted := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "encrypted"}[encrypted], func(t *testing.T) {
			dir := t.TempDir()
			db, err := sqlitedb.Open(filepath.Join(dir, "kioku.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if encrypted {
				Encrypt(t, db, NewKey(t))
			}
			write(t, db)
			check := func(when string) {
				t.Helper()
				found := Holding(t, dir, word)
				if encrypted && len(found) > 0 {
					t.Errorf("%s, %v hold the canary of %s", when, found, what)
				}
				if !encrypted && !slices.Contains(found, "kioku.db") && !slices.Contains(found, "kioku.db-wal") {
					t.Errorf("%s, no file of a plain database holds the canary of %s: the check sees nothing", when, what)
				}
			}
			check("while open")
			db.Close()
			check("after closing")
		})
	}
}

// Holding returns the names of the files of dir whose bytes hold word.
func Holding(t testing.TB, dir, word string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(word)) {
			out = append(out, e.Name())
		}
	}
	return out
}
