package blockstest

import (
	"reflect"
	"testing"

	"github.com/kioku-ai/kioku/blocks"
	"github.com/kioku-ai/kioku/fault"
)

// testRewrite: the background rewrite replaces a block's value as a
// revision of its own (REWRITTEN) that keeps its sources; it refuses a
// read-only block, a value past the limit and a block that moved on past
// the revision it was written from, writing nothing; the sources travel
// through an import.
func testRewrite(t *testing.T, h *Harness) {
	b := h.Put(annHuman, "Ann likes tea.", 40)
	src := []blocks.Source{
		{Session: "apps/app1/users/ann/sessions/s1", EventIDs: []string{"e1", "e3"}},
		{Session: "apps/app1/users/ann/sessions/s2"},
	}
	got, err := h.Svc.Rewrite(h.Ctx, blocks.RewriteRequest{Key: annHuman, Value: "Ann likes tea. Ann has a cat.", Revision: b.Revision, Sources: src})
	if err != nil || got.Value != "Ann likes tea. Ann has a cat." || got.Revision != 2 || got.Limit != 40 {
		t.Fatalf("rewrite: %+v, %v", got, err)
	}
	revs, err := h.Store.ListRevisions(h.Ctx, annHuman, 0, 10)
	if err != nil || len(revs) != 2 {
		t.Fatalf("revisions %+v, %v", revs, err)
	}
	if revs[0].Action != blocks.Rewritten || revs[0].Value != got.Value || !reflect.DeepEqual(revs[0].Sources, src) {
		t.Errorf("the rewrite's revision %+v; want REWRITTEN with sources %+v", revs[0], src)
	}
	if revs[1].Sources != nil {
		t.Errorf("the update's revision has sources %+v", revs[1].Sources)
	}

	// Refused, writing nothing: past the limit, a block that moved on, a
	// read-only block, a block that does not exist.
	_, err = h.Svc.Rewrite(h.Ctx, blocks.RewriteRequest{Key: annHuman, Value: "Ann likes tea. Ann has a cat. Ann lives in Osaka.", Revision: 2, Sources: src})
	wantErr(t, "a rewrite past the limit", err, fault.FailedPrecondition, "limit of 40")
	_, err = h.Svc.Rewrite(h.Ctx, blocks.RewriteRequest{Key: annHuman, Value: "stale", Revision: 1, Sources: src})
	wantErr(t, "a rewrite of an older revision", err, fault.FailedPrecondition, "revision 2")
	if v := h.Value(annHuman); v != got.Value {
		t.Errorf("after the refusals the value is %q", v)
	}
	ro, err := h.Svc.Update(h.Ctx, blocks.UpdateRequest{Key: bobHuman, Value: "fixed", ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Svc.Rewrite(h.Ctx, blocks.RewriteRequest{Key: bobHuman, Value: "changed", Revision: ro.Revision})
	wantErr(t, "a rewrite of a read-only block", err, fault.FailedPrecondition, "read-only")
	_, err = h.Svc.Rewrite(h.Ctx, blocks.RewriteRequest{Key: otherHuman, Value: "x", Revision: 0})
	wantErr(t, "a rewrite without a revision", err, fault.Invalid, "revision")

	// An import brings the sources along.
	cur, err := h.Svc.Get(h.Ctx, annHuman)
	if err != nil {
		t.Fatal(err)
	}
	moved, movedRevs := movedTo(otherHuman, cur, revs)
	if _, _, err := h.Store.Import(h.Ctx, &moved, movedRevs); err != nil {
		t.Fatal(err)
	}
	imported, err := h.Store.ListRevisions(h.Ctx, otherHuman, 0, 10)
	if err != nil || len(imported) != 2 || !reflect.DeepEqual(imported[0].Sources, src) || imported[0].Action != blocks.Rewritten {
		t.Fatalf("imported revisions %+v, %v; want the rewrite's sources %+v", imported, err, src)
	}
}
