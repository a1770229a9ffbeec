package blockstest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kioku-ai/kioku/blocks"
	"github.com/kioku-ai/kioku/fault"
)

// testConcurrentEdits: appends racing on one block each land once.
func testConcurrentEdits(t *testing.T, h *Harness) {
	const n = 8
	h.Put(annHuman, "", 500)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			_, err := h.Svc.Append(h.Ctx, annHuman, fmt.Sprintf("fact %d", i))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	b, err := h.Svc.Get(h.Ctx, annHuman)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.Value, "\n")
	slices.Sort(lines)
	if len(lines) != n || b.Revision != n+1 {
		t.Fatalf("after %d racing appends: revision %d, value %q", n, b.Revision, b.Value)
	}
	for i, l := range lines {
		if l != fmt.Sprintf("fact %d", i) {
			t.Errorf("line %d is %q", i, l)
		}
	}
}

// testConcurrentExpected: of updates racing from the same revision, one
// wins and the others are FailedPrecondition.
func testConcurrentExpected(t *testing.T, h *Harness) {
	const n = 6
	h.Put(annHuman, "start", 0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	won, lost := 0, 0
	for i := range n {
		wg.Go(func() {
			at := int64(1)
			_, err := h.Svc.Update(h.Ctx, blocks.UpdateRequest{Key: annHuman, Value: fmt.Sprint("writer ", i), ExpectedRevision: &at})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case fault.Is(err, fault.FailedPrecondition):
				lost++
			default:
				t.Errorf("a racing update: %v", err)
			}
		})
	}
	wg.Wait()
	if won != 1 || lost != n-1 {
		t.Errorf("%d won and %d lost of %d updates expecting revision 1", won, lost, n)
	}
	if b, err := h.Svc.Get(h.Ctx, annHuman); err != nil || b.Revision != 2 || !strings.HasPrefix(b.Value, "writer ") {
		t.Errorf("after the race: %+v, %v", b, err)
	}
}

// testRevisions: every change is a revision, the block as the change
// left it, newest first, by pages.
func testRevisions(t *testing.T, h *Harness) {
	h.Put(annHuman, "Likes tea.", 100)
	if _, err := h.Svc.Append(h.Ctx, annHuman, "Has a cat."); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Svc.Replace(h.Ctx, annHuman, "tea", "coffee"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Svc.Update(h.Ctx, blocks.UpdateRequest{Key: annHuman, Value: "Reset.", Description: "d", ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	var got []*blocks.Revision
	token := ""
	for {
		page, next, err := h.Svc.ListRevisions(h.Ctx, annHuman, 3, token)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page...)
		if token = next; token == "" {
			break
		}
	}
	want := []struct {
		n      int64
		action blocks.Action
		value  string
	}{{4, blocks.Updated, "Reset."}, {3, blocks.Replaced, "Likes coffee.\nHas a cat."}, {2, blocks.Appended, "Likes tea.\nHas a cat."}, {1, blocks.Updated, "Likes tea."}}
	if len(got) != len(want) {
		t.Fatalf("%d revisions, want %d", len(got), len(want))
	}
	for i, w := range want {
		r := got[i]
		if r.Number != w.n || r.Action != w.action || r.Value != w.value || r.Limit != 100 || r.Key != annHuman || r.CreateTime.IsZero() {
			t.Errorf("revision %d: %+v; want %+v", i, r, w)
		}
	}
	if !got[0].ReadOnly || got[0].Description != "d" || got[1].ReadOnly {
		t.Errorf("the revisions' flags: %+v, %+v", got[0], got[1])
	}
	if got[0].Name() != annHuman.Name()+"/revisions/4" {
		t.Errorf("revision name %s", got[0].Name())
	}
	_, _, err := h.Svc.ListRevisions(h.Ctx, bobHuman, 0, "")
	wantErr(t, "revisions of a missing block", err, fault.NotFound, bobHuman.Name())
}

// testRevisionsBounded: a block keeps its latest MaxRevisions.
func testRevisionsBounded(t *testing.T, h *Harness) {
	const writes = blocks.MaxRevisions + 5
	for i := 1; i <= writes; i++ {
		h.Put(annHuman, fmt.Sprint("v", i), 0)
	}
	revs, _, err := h.Svc.ListRevisions(h.Ctx, annHuman, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(revs) != blocks.MaxRevisions || revs[0].Number != writes || revs[len(revs)-1].Number != writes-blocks.MaxRevisions+1 {
		t.Fatalf("%d revisions kept, from %d to %d", len(revs), revs[len(revs)-1].Number, revs[0].Number)
	}
}

// testDelete: a deleted block is gone with its revisions; a new one of
// the same label starts again at revision 1.
func testDelete(t *testing.T, h *Harness) {
	h.Put(annHuman, "one", 0)
	h.Put(annHuman, "two", 0)
	h.Put(bobHuman, "bob's", 0)
	if err := h.Svc.Delete(h.Ctx, annHuman); err != nil {
		t.Fatal(err)
	}
	_, err := h.Svc.Get(h.Ctx, annHuman)
	wantErr(t, "reading a deleted block", err, fault.NotFound)
	wantErr(t, "deleting it again", h.Svc.Delete(h.Ctx, annHuman), fault.NotFound, annHuman.Name())
	if b := h.Put(annHuman, "new", 0); b.Revision != 1 {
		t.Errorf("a block made again starts at revision %d", b.Revision)
	}
	revs, _, err := h.Svc.ListRevisions(h.Ctx, annHuman, 0, "")
	if err != nil || len(revs) != 1 || revs[0].Value != "new" {
		t.Errorf("revisions of the block made again: %+v, %v", revs, err)
	}
	if got := h.Value(bobHuman); got != "bob's" {
		t.Errorf("bob's block: %q", got)
	}
}

// testEraseUser: erasing a user removes their blocks with the revisions,
// and leaves other users', the app's shared blocks and other apps'.
func testEraseUser(t *testing.T, h *Harness) {
	h.Put(annHuman, "one", 0)
	h.Put(annHuman, "two", 0)
	h.Put(blocks.Key{App: "app1", User: "ann", Label: "goals"}, "x", 0)
	for _, k := range []blocks.Key{bobHuman, persona, otherHuman} {
		h.Put(k, "stays", 0)
	}
	n, err := h.Svc.EraseUser(h.Ctx, "app1", "ann")
	if err != nil || n != 2 {
		t.Fatalf("erasing ann: %d, %v; want 2 blocks", n, err)
	}
	if list, _, err := h.Svc.List(h.Ctx, "app1", "ann", 0, ""); err != nil || len(list) != 0 {
		t.Errorf("ann's blocks after the erasure: %+v, %v", list, err)
	}
	if revs, err := h.Store.ListRevisions(h.Ctx, annHuman, 0, 10); err != nil || len(revs) != 0 {
		t.Errorf("revisions of ann's block after the erasure: %+v, %v", revs, err)
	}
	for _, k := range []blocks.Key{bobHuman, persona, otherHuman} {
		if got := h.Value(k); got != "stays" {
			t.Errorf("%s after ann's erasure: %q", k.Name(), got)
		}
	}
	if n, err = h.Svc.EraseUser(h.Ctx, "app1", "ann"); err != nil || n != 0 {
		t.Errorf("erasing again: %d, %v", n, err)
	}
	if _, err := h.Svc.EraseUser(h.Ctx, "app1", ""); !fault.Is(err, fault.Invalid) {
		t.Errorf("erasing no user: %v", err)
	}
}
