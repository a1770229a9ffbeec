package firestore_test

import (
	"testing"

	"github.com/kioku-ai/kioku/blocks"
	"github.com/kioku-ai/kioku/blocks/blockstest"
	"github.com/kioku-ai/kioku/internal/blockstore/firestore"
	"github.com/kioku-ai/kioku/internal/firestoretest"
)

func TestConformance(t *testing.T) {
	blockstest.Run(t, func(t *testing.T) blocks.Store {
		c, _ := firestoretest.NewClient(t)
		return firestore.New(c, firestore.Options{})
	})
}
