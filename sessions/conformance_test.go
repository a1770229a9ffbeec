package sessions_test

import (
	"testing"

	"github.com/kioku-ai/kioku/internal/sessionstore/memstore"
	"github.com/kioku-ai/kioku/sessions/sessiondriver/sessiondrivertest"
)

// TestConformance runs the conformance suite of the session store
// contract (package sessiondrivertest) here, on the in-memory store, so
// that go test ./sessions/ checks the whole contract a caller of the
// Service sees, in about a second, with no file, no Firestore emulator
// and none of the server's packages. Each backend runs the suite too, in
// its own package (internal/sessionstore/memstore and
// internal/sessionstore/sqlite, and internal/sessionstore/firestore on the
// emulator).
func TestConformance(t *testing.T) {
	sessiondrivertest.Run(t, func(*testing.T) *memstore.Store { return memstore.New() })
}
