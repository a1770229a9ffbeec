package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/kioku-ai/kioku/internal/memorystore/sqlite"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/memorybanktest"
)

func TestConformance(t *testing.T) {
	memorybanktest.Run(t, func(t *testing.T) memorybank.Store {
		db, err := sqlitedb.Open(filepath.Join(t.TempDir(), "kioku.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		s, err := sqlite.New(db, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
