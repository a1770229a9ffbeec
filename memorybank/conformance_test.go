package memorybank_test

import (
	"testing"

	"github.com/kioku-ai/kioku/internal/memorystore/sqlite"
	"github.com/kioku-ai/kioku/internal/sqlitetest"
	"github.com/kioku-ai/kioku/memorybank/memorydriver/memorydrivertest"
)

// TestConformance runs the conformance suite here, on the embedded SQLite
// store (a file per case in the test's temporary directory), so that the
// memory bank's own tests cover every rule of its Service and Store
// without an emulator; the backends run it too, the Firestore one on the
// emulator.
func TestConformance(t *testing.T) {
	memorydrivertest.Run(t, func(t *testing.T) *sqlite.Store { return sqlitetest.Memories(t, sqlitetest.Open(t)) })
}
