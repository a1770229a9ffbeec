package jobs_test

import (
	"path/filepath"
	"testing"

	"github.com/kioku-ai/kioku/internal/jobs"
	"github.com/kioku-ai/kioku/internal/jobs/jobstest"
	memorysqlite "github.com/kioku-ai/kioku/internal/memorystore/sqlite"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
)

// TestConformance runs the engine's conformance suite here, on the
// embedded SQLite store that keeps kioku's operations (a file per case in
// the test's temporary directory); the stores run it too, the Firestore
// one on the emulator.
func TestConformance(t *testing.T) {
	jobstest.Run(t, func(t *testing.T) jobs.Store {
		db, err := sqlitedb.Open(filepath.Join(t.TempDir(), "kioku.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		s, err := memorysqlite.New(db, memorysqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
