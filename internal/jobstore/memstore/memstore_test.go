package memstore_test

import (
	"testing"

	"github.com/kioku-ai/kioku/internal/jobstore/memstore"
	"github.com/kioku-ai/kioku/jobs/jobstest"
)

// TestConformance runs the jobs conformance suite on the in-memory store.
func TestConformance(t *testing.T) {
	jobstest.Run(t, func(*testing.T) *memstore.Store { return memstore.New() })
}
