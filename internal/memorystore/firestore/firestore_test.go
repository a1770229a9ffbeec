package firestore_test

import (
	"testing"

	"github.com/kioku-ai/kioku/internal/firestoretest"
	"github.com/kioku-ai/kioku/internal/memorystore/firestore"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/jobs/jobstest"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/memorybanktest"
)

func TestConformance(t *testing.T) {
	memorybanktest.Run(t, func(t *testing.T) memorybank.Store {
		c, _ := firestoretest.NewClient(t)
		return firestore.New(c, firestore.Options{})
	})
}

// TestJobsConformance runs the jobs engine's suite on the store's
// operations.
func TestJobsConformance(t *testing.T) {
	jobstest.Run(t, func(t *testing.T) jobs.Store {
		c, _ := firestoretest.NewClient(t)
		return firestore.New(c, firestore.Options{})
	})
}
