package sqlite_test

import (
	"testing"

	"github.com/kioku-ai/kioku/internal/memorystore/sqlite"
	"github.com/kioku-ai/kioku/internal/sqlitetest"
	"github.com/kioku-ai/kioku/jobs/jobstest"
	"github.com/kioku-ai/kioku/memorybank/memorydriver/memorydrivertest"
)

func TestConformance(t *testing.T) {
	memorydrivertest.Run(t, newStore)
}

// TestConformanceEncrypted runs the suite on an encrypted database.
func TestConformanceEncrypted(t *testing.T) {
	memorydrivertest.Run(t, func(t *testing.T) *sqlite.Store { return sqlitetest.Memories(t, sqlitetest.OpenEncrypted(t)) })
}

// newStore returns a store on a file of the test's own.
func newStore(t *testing.T) *sqlite.Store { return sqlitetest.Memories(t, sqlitetest.Open(t)) }

// TestJobsConformance runs the jobs engine's suite on the store's
// operations.
func TestJobsConformance(t *testing.T) {
	jobstest.Run(t, newStore)
}
