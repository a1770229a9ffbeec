package blockstest

import (
	"slices"
	"testing"

	"github.com/kioku-ai/kioku/blocks"
	"github.com/kioku-ai/kioku/fault"
)

// testImport: a block imported with its revisions reads back as it was
// written; importing it again writes nothing; a block that moved on, or
// another block of the label, is refused; an owner's MaxBlocks holds.
func testImport(t *testing.T, h *Harness) {
	// The archive's side: a block of three revisions, read from a store.
	h.Put(annHuman, "one", 50)
	if _, err := h.Svc.Append(h.Ctx, annHuman, "two"); err != nil {
		t.Fatal(err)
	}
	b, err := h.Svc.Get(h.Ctx, annHuman)
	if err != nil {
		t.Fatal(err)
	}
	revs, err := h.Store.ListRevisions(h.Ctx, annHuman, 0, blocks.MaxRevisions)
	if err != nil {
		t.Fatal(err)
	}
	// Moved to bob, as another installation would hold it.
	moved, movedRevs := movedTo(bobHuman, b, revs)
	wrote, n, err := h.Store.Import(h.Ctx, &moved, movedRevs)
	if err != nil || !wrote || n != 2 {
		t.Fatalf("importing: %v, %d, %v; want the block and 2 revisions", wrote, n, err)
	}
	got, err := h.Svc.Get(h.Ctx, bobHuman)
	if err != nil || *got != moved {
		t.Fatalf("imported %+v, %v; want %+v", got, err, moved)
	}
	gotRevs, err := h.Store.ListRevisions(h.Ctx, bobHuman, 0, 10)
	if err != nil || len(gotRevs) != 2 || gotRevs[0].Value != "one\ntwo" || gotRevs[1].Action != blocks.Updated || !gotRevs[1].CreateTime.Equal(revs[1].CreateTime) {
		t.Fatalf("imported revisions %+v, %v", gotRevs, err)
	}
	if wrote, n, err = h.Store.Import(h.Ctx, &moved, movedRevs); err != nil || wrote || n != 0 {
		t.Errorf("importing again: %v, %d, %v; want nothing written", wrote, n, err)
	}
	// The block moves on; the archive's older state is refused.
	if _, err := h.Svc.Append(h.Ctx, bobHuman, "three"); err != nil {
		t.Fatal(err)
	}
	_, _, err = h.Store.Import(h.Ctx, &moved, movedRevs)
	wantErr(t, "importing a block that moved on", err, fault.FailedPrecondition, "moved on")
	other := moved
	other.CreateTime = other.CreateTime.Add(1)
	_, _, err = h.Store.Import(h.Ctx, &other, nil)
	wantErr(t, "importing another block of the label", err, fault.AlreadyExists, bobHuman.Name())
	// An import over MaxBlocks is refused.
	for i := range blocks.MaxBlocks {
		h.Put(blocks.Key{App: "app2", Label: "b" + string(rune('a'+i))}, "x", 0)
	}
	extra := moved
	extra.Key = blocks.Key{App: "app2", Label: "zz"}
	_, _, err = h.Store.Import(h.Ctx, &extra, nil)
	wantErr(t, "importing one block too many", err, fault.ResourceExhausted, "20 blocks")
}

// testAppsAndUsers: the apps with blocks (a user's or shared) and the
// users of an app with blocks, in order, by pages; an erased user is
// gone from them.
func testAppsAndUsers(t *testing.T, h *Harness) {
	h.Put(blocks.Key{App: "b-app", User: "u2", Label: "human"}, "x", 0)
	h.Put(blocks.Key{App: "b-app", User: "u1", Label: "human"}, "x", 0)
	h.Put(blocks.Key{App: "b-app", User: "u1", Label: "goals"}, "x", 0)
	h.Put(blocks.Key{App: "a-app", Label: "persona"}, "x", 0)
	h.Put(blocks.Key{App: "c-app", User: "u9", Label: "human"}, "x", 0)
	var apps []string
	for after := ""; ; {
		page, err := h.Store.Apps(h.Ctx, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		apps = append(apps, page...)
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1]
	}
	if want := []string{"a-app", "b-app", "c-app"}; !slices.Equal(apps, want) {
		t.Errorf("apps %q, want %q", apps, want)
	}
	users, err := h.Store.Users(h.Ctx, "b-app", "", 10)
	if err != nil || !slices.Equal(users, []string{"u1", "u2"}) {
		t.Errorf("users of b-app: %q, %v", users, err)
	}
	if users, err = h.Store.Users(h.Ctx, "b-app", "u1", 10); err != nil || !slices.Equal(users, []string{"u2"}) {
		t.Errorf("users of b-app after u1: %q, %v", users, err)
	}
	if users, err = h.Store.Users(h.Ctx, "a-app", "", 10); err != nil || len(users) != 0 {
		t.Errorf("users of an app with shared blocks only: %q, %v", users, err)
	}
	if _, err := h.Svc.EraseUser(h.Ctx, "b-app", "u1"); err != nil {
		t.Fatal(err)
	}
	if users, err = h.Store.Users(h.Ctx, "b-app", "", 10); err != nil || !slices.Equal(users, []string{"u2"}) {
		t.Errorf("users of b-app after u1's erasure: %q, %v", users, err)
	}
}

// movedTo returns copies of b and its revisions under the key k, as
// another installation would hold them.
func movedTo(k blocks.Key, b *blocks.Block, revs []*blocks.Revision) (blocks.Block, []*blocks.Revision) {
	moved := *b
	moved.Key = k
	var movedRevs []*blocks.Revision
	for _, r := range revs {
		c := *r
		c.Key = k
		movedRevs = append(movedRevs, &c)
	}
	return moved, movedRevs
}
