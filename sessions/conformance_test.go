package sessions_test

import (
	"testing"

	"github.com/kioku-ai/kioku/internal/node"
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
// directory as kioku serve opens its stores (internal/node), closed after
// the test.
func newSQLiteStore(t *testing.T) sessions.Store {
	stores, err := node.OpenStores(t.Context(), node.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stores.Close() })
	return stores.Sessions
}
