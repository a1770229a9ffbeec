package firestore_test

import (
	"testing"

	gfirestore "cloud.google.com/go/firestore"

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

// TestUsageCountsHistoryOfBefore: a usage document written before the
// history field was kept reads with the history its documents hold, and
// the next write stores it.
func TestUsageCountsHistoryOfBefore(t *testing.T) {
	c, _ := firestoretest.NewClient(t)
	st := firestore.New(c, firestore.Options{})
	h := memoryfilestest.NewHarness(t, st)
	h.Create("/memories/a.txt", "one\n")
	h.OK(map[string]any{"command": "str_replace", "path": "/memories/a.txt", "old_str": "one", "new_str": "three"})
	h.OK(map[string]any{"command": "rename", "old_path": "/memories/a.txt", "new_path": "/memories/b.txt"})
	h.Create("/memories/gone.txt", "12345")
	h.OK(map[string]any{"command": "delete", "path": "/memories/gone.txt"})
	want := h.Usage("ann")
	if want.History != 4+6+5+5 {
		t.Fatalf("usage = %+v, want a history of %d bytes", want, 4+6+5+5)
	}
	ref := c.Collection("kioku_apps").Doc("app1").Collection("kioku_memory_file_users").Doc("ann")
	if _, err := ref.Update(t.Context(), []gfirestore.Update{{Path: "history", Value: gfirestore.Delete}}); err != nil {
		t.Fatal(err)
	}
	if got := h.Usage("ann"); got != want {
		t.Errorf("usage of a document without history = %+v, want %+v", got, want)
	}
	h.Create("/memories/c.txt", "c")
	snap, err := ref.Get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if v, err := snap.DataAt("history"); err != nil || v != int64(want.History+1) {
		t.Errorf("history stored by the next write = %v, %v; want %d", v, err, want.History+1)
	}
}
