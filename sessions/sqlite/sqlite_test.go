package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessionstest"
	"github.com/kioku-ai/kioku/sessions/sqlite"
)

func newStore(t *testing.T) sessions.Store {
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
	sessionstest.Run(t, newStore)
}
