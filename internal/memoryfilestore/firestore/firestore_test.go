package firestore_test

import (
	"testing"

	"github.com/kioku-ai/kioku/internal/firestoretest"
	"github.com/kioku-ai/kioku/internal/memoryfilestore/firestore"
	"github.com/kioku-ai/kioku/memoryfiles"
	"github.com/kioku-ai/kioku/memoryfiles/memoryfilestest"
)

func TestConformance(t *testing.T) {
	memoryfilestest.Run(t, func(t *testing.T) memoryfiles.Store {
		c, _ := firestoretest.NewClient(t)
		return firestore.New(c, firestore.Options{})
	})
}
