package memstore_test

import (
	"testing"

	"github.com/kioku-ai/kioku/internal/sessionstore/memstore"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiondriver/sessiondrivertest"
)

// TestConformance runs the session store conformance suite on the
// in-memory store.
func TestConformance(t *testing.T) {
	sessiondrivertest.Run(t, func(*testing.T) *memstore.Store { return memstore.New() })
}

// coreOnly is a store of the required methods only: the in-memory store
// with its optional parts hidden.
type coreOnly struct{ sessiondriver.Store }

// TestConformanceCoreOnly runs the suite on a store without the optional
// parts: it checks the required methods, and that the service answers
// Unimplemented where a missing part is needed.
func TestConformanceCoreOnly(t *testing.T) {
	sessiondrivertest.Run(t, func(*testing.T) coreOnly { return coreOnly{memstore.New()} })
}
