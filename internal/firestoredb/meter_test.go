package firestoredb_test

import (
	"context"
	"testing"

	"cloud.google.com/go/firestore"

	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/internal/firestoretest"
)

// TestMeterCountsBilledDocuments drives a client on the emulator through
// each kind of call the stores make and checks the counts against
// Firestore's billing rules.
func TestMeterCountsBilledDocuments(t *testing.T) {
	project := firestoretest.Project(t)
	m := &firestoredb.Meter{}
	opts, err := m.ClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	c, err := firestore.NewClientWithDatabase(ctx, project, firestore.DefaultDatabaseID, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	col := c.Collection("things")
	step := func(what string, want firestoredb.Usage, f func() error) {
		t.Helper()
		before := m.Usage()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := m.Usage().Sub(before); got != want {
			t.Errorf("%s: counted %+v, want %+v", what, got, want)
		}
	}
	step("two sets in a batch", firestoredb.Usage{Writes: 2}, func() error {
		b := c.Batch()
		b.Set(col.Doc("a"), map[string]any{"n": 1})
		b.Set(col.Doc("b"), map[string]any{"n": 2})
		_, err := b.Commit(ctx)
		return err
	})
	step("a lookup", firestoredb.Usage{Reads: 1}, func() error {
		_, err := col.Doc("a").Get(ctx)
		return err
	})
	step("a lookup of a missing document", firestoredb.Usage{Reads: 1}, func() error {
		if _, err := col.Doc("nope").Get(ctx); !firestoredb.IsNotFound(err) {
			return err
		}
		return nil
	})
	step("a query of two documents", firestoredb.Usage{Reads: 2}, func() error {
		_, err := col.Where("n", ">", 0).Documents(ctx).GetAll()
		return err
	})
	step("a query of none", firestoredb.Usage{Reads: 1}, func() error {
		_, err := col.Where("n", ">", 5).Documents(ctx).GetAll()
		return err
	})
	step("a transaction reading one and writing one", firestoredb.Usage{Reads: 1, Writes: 1}, func() error {
		return c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			if _, err := tx.Get(col.Doc("a")); err != nil {
				return err
			}
			return tx.Set(col.Doc("c"), map[string]any{"n": 3})
		})
	})
	step("a delete", firestoredb.Usage{Deletes: 1}, func() error {
		_, err := col.Doc("c").Delete(ctx)
		return err
	})
}
