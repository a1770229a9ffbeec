package firestore_test

import (
	"testing"
	"time"

	"github.com/kioku-ai/kioku/internal/firestoretest"
	"github.com/kioku-ai/kioku/internal/memorystore/firestore"
	"github.com/kioku-ai/kioku/jobs"
)

// TestKeyDocuments: a claim points its key's document at the operation
// it claims first, and deleting that operation (a user's erasure) deletes
// the document too, while a key's document naming another operation stays.
func TestKeyDocuments(t *testing.T) {
	c, _ := firestoretest.NewClient(t)
	s := firestore.New(c, firestore.Options{})
	ctx := t.Context()
	now := time.Unix(1_800_000_000, 0)
	keys := c.Collection("kioku_apps").Doc("app1").Collection("kioku_keys")
	claim := func(id, key string) {
		t.Helper()
		op := &jobs.Operation{App: "app1", ID: id, Kind: "K", State: jobs.Pending, Key: key, CreateTime: now}
		if err := s.CreateOperation(ctx, op); err != nil {
			t.Fatal(err)
		}
		cl := op.Clone()
		cl.State, cl.Attempt, cl.LeaseOwner, cl.LeaseExpiry = jobs.Running, 1, "w1", now.Add(time.Minute)
		if err := s.UpdateOperations(ctx, now, []jobs.Update{{Op: cl, ExpectState: jobs.Pending, ClaimKey: true}}); err != nil {
			t.Fatal(err)
		}
	}
	holders := func() map[string]bool {
		t.Helper()
		snaps, err := keys.Documents(ctx).GetAll()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, snap := range snaps {
			op, _ := snap.DataAt("op")
			out[op.(string)] = true
		}
		return out
	}
	claim("a", "user_id=ann")
	claim("b", "user_id=bo")
	if got := holders(); len(got) != 2 || !got["a"] || !got["b"] {
		t.Fatalf("key documents after two claims name %v, want a and b", got)
	}
	if err := s.DeleteOperations(ctx, "app1", []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if got := holders(); len(got) != 1 || !got["b"] {
		t.Fatalf("key documents after deleting a name %v, want b alone", got)
	}
}
