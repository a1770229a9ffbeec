package firestore_test

import (
	"testing"

	"github.com/kioku-ai/kioku/internal/firestoretest"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/firestore"
	"github.com/kioku-ai/kioku/sessions/sessionstest"
)

func TestConformance(t *testing.T) {
	sessionstest.Run(t, func(t *testing.T) sessions.Store {
		c, _ := firestoretest.NewClient(t)
		return firestore.New(c, firestore.Options{})
	})
}
