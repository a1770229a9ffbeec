package memoryfilestest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/memoryfiles"
)

func testImport(t *testing.T, h *Harness) {
	at := time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC)
	f := &memoryfiles.File{App: "app1", User: "ann", ID: "imported", Path: "/memories/notes.md", Content: "v2\n", Size: 3, Revision: 2, CreateTime: at, UpdateTime: at.Add(time.Hour)}
	revs := []*memoryfiles.Revision{
		{App: "app1", User: "ann", FileID: "imported", Number: 2, Action: memoryfiles.Edited, Path: "/memories/notes.md", Content: "v2\n", Size: 3, CreateTime: at.Add(time.Hour)},
		{App: "app1", User: "ann", FileID: "imported", Number: 1, Action: memoryfiles.Created, Path: "/memories/notes.md", Content: "v1\n", Size: 3, CreateTime: at},
	}
	wrote, n, err := h.Store.ImportFile(h.Ctx, f, revs)
	if err != nil || !wrote || n != 2 {
		t.Fatalf("ImportFile = %v, %d, %v", wrote, n, err)
	}
	got, err := h.Svc.GetFile(h.Ctx, "app1", "ann", "imported")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(f, got); diff != "" {
		t.Errorf("imported file (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(revs, h.revisions("imported")); diff != "" {
		t.Errorf("imported revisions (-want +got):\n%s", diff)
	}
	if u := h.Usage("ann"); u.Files != 1 || u.Bytes != 3 || u.Version == 0 {
		t.Errorf("usage after the import = %+v", u)
	}
	// Again: nothing to write.
	if wrote, n, err := h.Store.ImportFile(h.Ctx, f, revs); err != nil || wrote || n != 0 {
		t.Errorf("second ImportFile = %v, %d, %v", wrote, n, err)
	}
	// The tool works on it, and goes on with its revisions.
	h.OK(map[string]any{"command": "str_replace", "path": "/memories/notes.md", "old_str": "v2", "new_str": "v3"})
	if got := h.revisions("imported"); len(got) != 3 || got[0].Number != 3 {
		t.Errorf("revisions after an edit of the imported file: %v", summaries(got))
	}
	// An archive behind the store is refused.
	if _, _, err := h.Store.ImportFile(h.Ctx, f, revs); !fault.Is(err, fault.FailedPrecondition) {
		t.Errorf("ImportFile of an older state: %v, want FailedPrecondition", err)
	}
	// Another file with that id, or another file at the path, conflicts.
	other := *f
	other.CreateTime = at.Add(time.Minute)
	if _, _, err := h.Store.ImportFile(h.Ctx, &other, nil); !fault.Is(err, fault.AlreadyExists) {
		t.Errorf("ImportFile of another file with the id: %v, want AlreadyExists", err)
	}
	clash := *f
	clash.ID = "clash"
	if _, _, err := h.Store.ImportFile(h.Ctx, &clash, nil); !fault.Is(err, fault.AlreadyExists) {
		t.Errorf("ImportFile of another file at the path: %v, want AlreadyExists", err)
	}
	// A deleted file comes in as deleted, with only the revisions a file
	// keeps.
	gone := &memoryfiles.File{App: "app1", User: "ann", ID: "gone", Path: "/memories/notes.md", Size: 1, Content: "x", Revision: memoryfiles.MaxRevisions + 2, CreateTime: at, UpdateTime: at, Deleted: true}
	var old []*memoryfiles.Revision
	for i := gone.Revision; i >= 1; i-- {
		old = append(old, &memoryfiles.Revision{App: "app1", User: "ann", FileID: "gone", Number: i, Action: memoryfiles.Edited, Path: gone.Path, Content: "x", Size: 1, CreateTime: at})
	}
	if wrote, n, err := h.Store.ImportFile(h.Ctx, gone, old); err != nil || !wrote || n != memoryfiles.MaxRevisions {
		t.Errorf("ImportFile of a deleted file = %v, %d, %v; want %d revisions", wrote, n, err, memoryfiles.MaxRevisions)
	}
	if u := h.Usage("ann"); u.Files != 1 || u.Deleted != 1 || u.Bytes != 3 {
		t.Errorf("usage after importing a deleted file = %+v", u)
	}
}

func testEraseUser(t *testing.T, h *Harness) {
	h.Create("/memories/a.txt", "a")
	h.Create("/memories/dir/b.txt", "b")
	h.OK(map[string]any{"command": "delete", "path": "/memories/dir"})
	h.OK(map[string]any{"_user": "bob", "command": "create", "path": "/memories/bob.txt", "file_text": "bob"})
	idA := h.fileID("/memories/a.txt")
	n, err := h.Svc.EraseUser(h.Ctx, "app1", "ann")
	if err != nil || n != 2 {
		t.Fatalf("EraseUser = %d, %v; want 2 files", n, err)
	}
	if u := h.Usage("ann"); u != (memoryfiles.Usage{}) {
		t.Errorf("ann's usage after the erasure = %+v", u)
	}
	if _, err := h.Store.GetFile(h.Ctx, "app1", "ann", idA); !fault.Is(err, fault.NotFound) {
		t.Errorf("ann's file after the erasure: %v", err)
	}
	if revs, err := h.Store.ListRevisions(h.Ctx, "app1", "ann", idA, 0, 10); err != nil || len(revs) != 0 {
		t.Errorf("ann's revisions after the erasure: %d, %v", len(revs), err)
	}
	if len(h.Paths("ann")) != 0 {
		t.Errorf("ann's files after the erasure: %v", h.Paths("ann"))
	}
	if got, _ := h.Content("bob", "/memories/bob.txt"); got != "bob" {
		t.Errorf("bob's file after ann's erasure = %q", got)
	}
	if n, err := h.Svc.EraseUser(h.Ctx, "app1", "ann"); err != nil || n != 0 {
		t.Errorf("second EraseUser = %d, %v", n, err)
	}
	// Ann starts afresh.
	h.Create("/memories/a.txt", "new")
	if u := h.Usage("ann"); u.Files != 1 || u.Version != 1 {
		t.Errorf("usage of a new start = %+v", u)
	}
}

func testAppsAndUsers(t *testing.T, h *Harness) {
	for _, x := range []struct{ app, user string }{{"app2", "zoe"}, {"app1", "bob"}, {"app1", "ann"}, {"app3", "ann"}} {
		if _, err := h.Svc.Execute(h.Ctx, x.app, x.user, map[string]any{"command": "create", "path": "/memories/x", "file_text": "x"}); err != nil {
			t.Fatal(err)
		}
	}
	apps, err := h.Store.Apps(h.Ctx, "", 2)
	if err != nil || !cmp.Equal(apps, []string{"app1", "app2"}) {
		t.Errorf("Apps = %v, %v", apps, err)
	}
	if apps, err = h.Store.Apps(h.Ctx, "app2", 10); err != nil || !cmp.Equal(apps, []string{"app3"}) {
		t.Errorf("Apps after app2 = %v, %v", apps, err)
	}
	users, err := h.Store.Users(h.Ctx, "app1", "", 10)
	if err != nil || !cmp.Equal(users, []string{"ann", "bob"}) {
		t.Errorf("Users = %v, %v", users, err)
	}
	if users, err = h.Store.Users(h.Ctx, "app1", "ann", 10); err != nil || !cmp.Equal(users, []string{"bob"}) {
		t.Errorf("Users after ann = %v, %v", users, err)
	}
}
