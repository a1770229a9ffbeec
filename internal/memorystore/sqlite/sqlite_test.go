package sqlite_test

import (
	"testing"

	"github.com/kioku-ai/kioku/internal/memorystore/sqlite"
	"github.com/kioku-ai/kioku/internal/sqlitetest"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/jobs/jobstest"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorydriver/memorydrivertest"
)

func TestConformance(t *testing.T) {
	memorydrivertest.Run(t, newStore)
}

// TestConformanceEncrypted runs the suite on an encrypted database.
func TestConformanceEncrypted(t *testing.T) {
	memorydrivertest.Run(t, func(t *testing.T) *sqlite.Store { return sqlitetest.Memories(t, sqlitetest.OpenEncrypted(t)) })
}

// TestConformanceRequiredOnly runs the suite on the store with its
// optional parts hidden: the cases of the required methods must pass on
// them alone, and for each part left out the service must answer without
// it (Unimplemented, or the feature off).
func TestConformanceRequiredOnly(t *testing.T) {
	memorydrivertest.Run(t, func(t *testing.T) requiredOnly {
		st := newStore(t)
		return requiredOnly{Store: st, jobsStore: st}
	})
}

// requiredOnly is a memory store of the required methods only (and the
// jobs store it shares its database with).
type requiredOnly struct {
	memorydriver.Store
	jobsStore
}

type jobsStore = jobs.Store

// newStore returns a store on a file of the test's own.
func newStore(t *testing.T) *sqlite.Store { return sqlitetest.Memories(t, sqlitetest.Open(t)) }

// TestJobsConformance runs the jobs engine's suite on the store's
// operations.
func TestJobsConformance(t *testing.T) {
	jobstest.Run(t, newStore)
}
