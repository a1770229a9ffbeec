package sqlite_test

import (
	"testing"

	"github.com/kioku-ai/kioku/internal/memoryfilestore/sqlite"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/internal/sqlitetest"
	"github.com/kioku-ai/kioku/memoryfiles"
	"github.com/kioku-ai/kioku/memoryfiles/memoryfilestest"
)

// open returns a store on a fresh database file.
func open(t *testing.T) memoryfiles.Store { return on(t, sqlitetest.Open(t)) }

// on returns a store on db.
func on(t *testing.T, db *sqlitedb.DB) memoryfiles.Store {
	s, err := sqlite.New(db)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	memoryfilestest.Run(t, open)
}

// TestConformanceEncrypted runs the suite on an encrypted database.
func TestConformanceEncrypted(t *testing.T) {
	memoryfilestest.Run(t, func(t *testing.T) memoryfiles.Store { return on(t, sqlitetest.OpenEncrypted(t)) })
}
