package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/kioku-ai/kioku/internal/memoryfilestore/sqlite"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/memoryfiles"
	"github.com/kioku-ai/kioku/memoryfiles/memoryfilestest"
)

// open returns a store on a fresh database file.
func open(t *testing.T) memoryfiles.Store {
	db, err := sqlitedb.Open(filepath.Join(t.TempDir(), "kioku.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := sqlite.New(db)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	memoryfilestest.Run(t, open)
}
