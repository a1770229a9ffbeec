package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/kioku-ai/kioku/internal/memorystore/sqlite"
	"github.com/kioku-ai/kioku/internal/seal/sealtest"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/memorybanktest"
)

func TestConformance(t *testing.T) {
	memorybanktest.Run(t, func(t *testing.T) memorybank.Store { return openStore(t, false) })
}

// TestConformanceEncrypted runs the suite on an encrypted database.
func TestConformanceEncrypted(t *testing.T) {
	memorybanktest.Run(t, func(t *testing.T) memorybank.Store { return openStore(t, true) })
}

// openStore opens a store in a new database, encrypted or not.
func openStore(t *testing.T, encrypted bool) *sqlite.Store {
	db, err := sqlitedb.Open(filepath.Join(t.TempDir(), "kioku.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if encrypted {
		sealtest.Encrypt(t, db)
	}
	s, err := sqlite.New(db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
