package memstore_test

import (
	"testing"

	"github.com/kioku-ai/kioku/internal/sessionstore/memstore"
	"github.com/kioku-ai/kioku/sessions/sessiondriver/sessiondrivertest"
)

// TestConformance runs the session store conformance suite on the
// in-memory store.
func TestConformance(t *testing.T) {
	sessiondrivertest.Run(t, func(*testing.T) *memstore.Store { return memstore.New() })
}
