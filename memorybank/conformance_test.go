package memorybank_test

import (
	"path/filepath"
	"testing"

	memorysqlite "github.com/kioku-ai/kioku/internal/memorystore/sqlite"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/memorybanktest"
)

// TestConformance runs the conformance suite here, on the embedded SQLite
// store (a file per case in the test's temporary directory), so that the
// memory bank's own tests cover every rule of its Service and Store
// without an emulator; the backends run it too, the Firestore one on the
// emulator.
func TestConformance(t *testing.T) {
	memorybanktest.Run(t, func(t *testing.T) memorybank.Store {
		db, err := sqlitedb.Open(filepath.Join(t.TempDir(), "kioku.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		s, err := memorysqlite.New(db, memorysqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
