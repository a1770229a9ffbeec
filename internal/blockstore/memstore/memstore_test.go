package memstore_test

import (
	"testing"

	"github.com/kioku-ai/kioku/blocks/blockstest"
	"github.com/kioku-ai/kioku/internal/blockstore/memstore"
)

// TestConformance runs the block store conformance suite on the in-memory
// store.
func TestConformance(t *testing.T) {
	blockstest.Run(t, func(*testing.T) *memstore.Store { return memstore.New() })
}
