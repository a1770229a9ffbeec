package jobs_test

import (
	"testing"

	"github.com/kioku-ai/kioku/internal/memorystore/sqlite"
	"github.com/kioku-ai/kioku/internal/sqlitetest"
	"github.com/kioku-ai/kioku/jobs/jobstest"
)

// TestConformance runs the engine's conformance suite here, on the
// embedded SQLite store that keeps kioku's operations (a file per case in
// the test's temporary directory); the stores run it too, the Firestore
// one on the emulator.
func TestConformance(t *testing.T) {
	jobstest.Run(t, func(t *testing.T) *sqlite.Store { return sqlitetest.Memories(t, sqlitetest.Open(t)) })
}
