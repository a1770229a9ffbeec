package memorybank_test

import (
	"testing"

	"github.com/kioku-ai/kioku/internal/memorystore/memstore"
	"github.com/kioku-ai/kioku/memorybank/memorydriver/memorydrivertest"
)

// TestConformance runs the conformance suite here, on the in-memory store
// (the required methods only, each optional part checked left out), so
// that the memory bank's own tests cover the rules of its Service and
// Store without files or an emulator; the backends run it too, the SQLite
// one with every part, the Firestore one on the emulator.
func TestConformance(t *testing.T) {
	memorydrivertest.Run(t, func(*testing.T) *memstore.Store { return memstore.New() })
}
