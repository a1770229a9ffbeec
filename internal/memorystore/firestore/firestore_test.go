package firestore_test

import (
	"testing"

	"github.com/kioku-ai/kioku/internal/firestoretest"
	"github.com/kioku-ai/kioku/internal/memorystore/firestore"
	"github.com/kioku-ai/kioku/jobs/jobstest"
	"github.com/kioku-ai/kioku/memorybank/memorydriver/memorydrivertest"
)

// newStore opens a store on a Firestore project of the test's own.
func newStore(t *testing.T) *firestore.Store {
	c, _ := firestoretest.NewClient(t)
	return firestore.New(c, firestore.Options{})
}

func TestConformance(t *testing.T) { memorydrivertest.Run(t, newStore) }

// TestJobsConformance runs the jobs engine's suite on the store's
// operations.
func TestJobsConformance(t *testing.T) { jobstest.Run(t, newStore) }
