package sessions_test

import (
	"path/filepath"
	"testing"

	"github.com/kioku-ai/kioku/internal/sessionstore/sqlite"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessionstest"
)

// TestConformance runs the conformance suite of sessions.Store (package
// sessionstest) here, on the embedded SQLite store, so that go test
// ./sessions/ checks the whole contract a caller of the Service sees, in
// seconds and without the Firestore emulator or Java. Each backend runs the
// suite too, in its own package (internal/sessionstore/sqlite, and
// internal/sessionstore/firestore on the emulator).
func TestConformance(t *testing.T) {
	sessionstest.Run(t, newSQLiteStore)
}

// newSQLiteStore opens an empty SQLite store in the test's temporary
// directory, closed after the test.
func newSQLiteStore(t *testing.T) sessions.Store {
	t.Helper()
	db, err := sqlitedb.Open(filepath.Join(t.TempDir(), "kioku.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store, err := sqlite.New(db)
	if err != nil {
		t.Fatal(err)
	}
	return store
}
