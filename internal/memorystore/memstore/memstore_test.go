package memstore_test

import (
	"testing"

	"github.com/kioku-ai/kioku/internal/memorystore/memstore"
	"github.com/kioku-ai/kioku/jobs/jobstest"
	"github.com/kioku-ai/kioku/memorybank/memorydriver/memorydrivertest"
)

// TestConformance runs the memory bank's conformance suite on the
// in-memory store: the cases of the required methods, and a left-out case
// for each optional part (it implements none).
func TestConformance(t *testing.T) {
	memorydrivertest.Run(t, func(*testing.T) *memstore.Store { return memstore.New() })
}

// TestJobsConformance runs the jobs engine's suite on the store's
// operations.
func TestJobsConformance(t *testing.T) {
	jobstest.Run(t, func(*testing.T) *memstore.Store { return memstore.New() })
}
