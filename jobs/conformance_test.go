package jobs_test

import (
	"testing"

	"github.com/kioku-ai/kioku/internal/jobstore/memstore"
	"github.com/kioku-ai/kioku/jobs/jobstest"
)

// TestConformance runs the engine's conformance suite here, on the
// in-memory store; the durable stores run it too (the SQLite one on a
// file, the Firestore one on the emulator).
func TestConformance(t *testing.T) {
	jobstest.Run(t, func(*testing.T) *memstore.Store { return memstore.New() })
}
