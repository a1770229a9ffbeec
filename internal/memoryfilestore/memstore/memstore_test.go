package memstore_test

import (
	"testing"

	"github.com/kioku-ai/kioku/internal/memoryfilestore/memstore"
	"github.com/kioku-ai/kioku/memoryfiles/memoryfilestest"
)

// TestConformance runs the memory files conformance suite on the
// in-memory store.
func TestConformance(t *testing.T) {
	memoryfilestest.Run(t, func(*testing.T) *memstore.Store { return memstore.New() })
}
