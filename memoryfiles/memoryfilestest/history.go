package memoryfilestest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/memoryfiles"
)

// revisionSummary is what the suite compares of a revision.
type revisionSummary struct {
	Number  int64
	Action  memoryfiles.Action
	Path    string
	Content string
	Size    int64
}

func summaries(revs []*memoryfiles.Revision) []revisionSummary {
	out := make([]revisionSummary, len(revs))
	for i, r := range revs {
		out[i] = revisionSummary{r.Number, r.Action, r.Path, r.Content, r.Size}
	}
	return out
}

// revisions returns every revision of a file of ann's, newest first, page
// by page (of two, to exercise paging).
func (h *Harness) revisions(id string) []*memoryfiles.Revision {
	h.T.Helper()
	var all []*memoryfiles.Revision
	token := ""
	for {
		page, next, err := h.Svc.ListRevisions(h.Ctx, "app1", "ann", id, 2, token)
		if err != nil {
			h.T.Fatal(err)
		}
		all = append(all, page...)
		if next == "" {
			return all
		}
		token = next
	}
}

func (h *Harness) fileID(path string) string {
	h.T.Helper()
	f, err := h.Store.FindFile(h.Ctx, "app1", "ann", path)
	if err != nil {
		h.T.Fatalf("FindFile(%s): %v", path, err)
	}
	return f.ID
}

func testRevisions(t *testing.T, h *Harness) {
	h.Create("/memories/a.txt", "one\n")
	id := h.fileID("/memories/a.txt")
	h.OK(map[string]any{"command": "str_replace", "path": "/memories/a.txt", "old_str": "one", "new_str": "two"})
	h.OK(map[string]any{"command": "insert", "path": "/memories/a.txt", "insert_line": 1.0, "insert_text": "three"})
	h.OK(map[string]any{"command": "rename", "old_path": "/memories/a.txt", "new_path": "/memories/dir/b.txt"})
	h.OK(map[string]any{"command": "rename", "old_path": "/memories/dir", "new_path": "/memories/other"})
	h.OK(map[string]any{"command": "delete", "path": "/memories/other"})
	want := []revisionSummary{
		{6, memoryfiles.Deleted, "/memories/other/b.txt", "", 10},
		{5, memoryfiles.Renamed, "/memories/other/b.txt", "", 10},
		{4, memoryfiles.Renamed, "/memories/dir/b.txt", "", 10},
		{3, memoryfiles.Edited, "/memories/a.txt", "two\nthree\n", 10},
		{2, memoryfiles.Edited, "/memories/a.txt", "two\n", 4},
		{1, memoryfiles.Created, "/memories/a.txt", "one\n", 4},
	}
	revs := h.revisions(id)
	if diff := cmp.Diff(want, summaries(revs)); diff != "" {
		t.Errorf("revisions (-want +got):\n%s", diff)
	}
	if revs[0].Name() != "apps/app1/users/ann/memoryFiles/"+id+"/revisions/6" || revs[0].CreateTime.IsZero() {
		t.Errorf("revision 6: name %s, time %v", revs[0].Name(), revs[0].CreateTime)
	}
	// The deleted file is still there by id, with its last content.
	f, err := h.Svc.GetFile(h.Ctx, "app1", "ann", id)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Deleted || f.Path != "/memories/other/b.txt" || f.Content != "two\nthree\n" || f.Revision != 6 || !f.CreateTime.Before(f.UpdateTime) {
		t.Errorf("deleted file = %+v", f)
	}
	if _, err := h.Svc.GetFile(h.Ctx, "app1", "ann", "nope"); !fault.Is(err, fault.NotFound) {
		t.Errorf("GetFile of a file that never was: %v", err)
	}
	if _, _, err := h.Svc.ListRevisions(h.Ctx, "app1", "ann", "nope", 0, ""); !fault.Is(err, fault.NotFound) {
		t.Errorf("ListRevisions of a file that never was: %v", err)
	}
}

func testRevisionsBounded(t *testing.T, h *Harness) {
	h.Create("/memories/n.txt", "0")
	id := h.fileID("/memories/n.txt")
	const edits = memoryfiles.MaxRevisions + 5
	for i := range edits {
		h.OK(map[string]any{"command": "str_replace", "path": "/memories/n.txt", "old_str": fmt.Sprint(i), "new_str": fmt.Sprint(i + 1)})
	}
	revs := h.revisions(id)
	if len(revs) != memoryfiles.MaxRevisions || revs[0].Number != edits+1 || revs[len(revs)-1].Number != edits+2-memoryfiles.MaxRevisions {
		t.Errorf("%d revisions kept, %d to %d; want the latest %d", len(revs), revs[len(revs)-1].Number, revs[0].Number, memoryfiles.MaxRevisions)
	}
}

func testDeletedBounded(t *testing.T, h *Harness) {
	var ids []string
	for i := range memoryfiles.MaxDeletedFiles + 3 {
		p := fmt.Sprintf("/memories/d%03d.txt", i)
		h.Create(p, "x")
		ids = append(ids, h.fileID(p))
		h.OK(map[string]any{"command": "delete", "path": p})
	}
	u := h.Usage("ann")
	if u.Deleted != memoryfiles.MaxDeletedFiles || u.Files != 0 {
		t.Errorf("usage = %+v, want %d deleted files", u, memoryfiles.MaxDeletedFiles)
	}
	// The three deleted first are gone for good, revisions and all; the
	// others stay.
	for i, id := range ids {
		_, err := h.Store.GetFile(h.Ctx, "app1", "ann", id)
		revs, rerr := h.Store.ListRevisions(h.Ctx, "app1", "ann", id, 0, 10)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if gone := i < 3; gone != fault.Is(err, fault.NotFound) || gone != (len(revs) == 0) {
			t.Errorf("deleted file %d: GetFile %v, %d revisions; want gone %v", i, err, len(revs), gone)
		}
	}
	deleted, err := h.Store.OldestDeleted(h.Ctx, "app1", "ann", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(deleted) != 2 || deleted[0].ID != ids[3] || deleted[1].ID != ids[4] || !deleted[0].Deleted {
		t.Errorf("OldestDeleted = %v, want %s and %s", deleted, ids[3], ids[4])
	}
}

func testListAndPage(t *testing.T, h *Harness) {
	for _, p := range []string{"/memories/b/2.txt", "/memories/a.txt", "/memories/b/1.txt", "/memories/b.txt", "/memories/c/d/e.txt", "/memories/bz.txt"} {
		h.Create(p, p)
	}
	h.OK(map[string]any{"command": "delete", "path": "/memories/bz.txt"})
	h.Create("/memories/bz.txt", "again")
	list := func(r memoryfiles.ListRequest) []string {
		t.Helper()
		r.App, r.User, r.PageSize = "app1", "ann", 2
		var out []string
		for {
			page, next, err := h.Svc.ListFiles(h.Ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range page {
				if f.Content != "" || f.Size == 0 {
					t.Errorf("listed file %s has content %q, size %d", f.Path, f.Content, f.Size)
				}
				s := f.Path
				if f.Deleted {
					s += " (deleted)"
				}
				out = append(out, s)
			}
			if next == "" {
				return out
			}
			r.PageToken = next
		}
	}
	if diff := cmp.Diff([]string{"/memories/a.txt", "/memories/b.txt", "/memories/b/1.txt", "/memories/b/2.txt", "/memories/bz.txt", "/memories/c/d/e.txt"}, list(memoryfiles.ListRequest{})); diff != "" {
		t.Errorf("all files (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/memories/b/1.txt", "/memories/b/2.txt"}, list(memoryfiles.ListRequest{Path: "/memories/b"})); diff != "" {
		t.Errorf("files of /memories/b (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/memories/b.txt"}, list(memoryfiles.ListRequest{Path: "/memories/b.txt"})); diff != "" {
		t.Errorf("files at /memories/b.txt (-want +got):\n%s", diff)
	}
	got := list(memoryfiles.ListRequest{ShowDeleted: true})
	want := []string{"/memories/a.txt", "/memories/b.txt", "/memories/b/1.txt", "/memories/b/2.txt", "/memories/bz.txt", "/memories/bz.txt (deleted)", "/memories/c/d/e.txt"}
	if !slices.Contains(got, "/memories/bz.txt (deleted)") || !cmp.Equal(want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })) {
		t.Errorf("files with the deleted ones = %v, want %v (the two bz.txt in id order)", got, want)
	}
	if _, _, err := h.Svc.ListFiles(h.Ctx, memoryfiles.ListRequest{App: "app1", User: "ann", Path: "/etc"}); !fault.Is(err, fault.Invalid) || fault.FieldOf(err) != "path" {
		t.Errorf("ListFiles of /etc: %v", err)
	}
	if _, _, err := h.Svc.ListFiles(h.Ctx, memoryfiles.ListRequest{App: "app1", User: "ann", PageToken: "bogus"}); !fault.Is(err, fault.Invalid) {
		t.Errorf("ListFiles with a bad token: %v", err)
	}
	// A page size over the maximum is coerced to it (AIP-158); a negative
	// one is refused by name.
	if page, _, err := h.Svc.ListFiles(h.Ctx, memoryfiles.ListRequest{App: "app1", User: "ann", PageSize: aip.MaxPageSize + 1}); err != nil || len(page) != 6 {
		t.Errorf("ListFiles with page_size %d: %d files, %v; want all 6", aip.MaxPageSize+1, len(page), err)
	}
	if _, _, err := h.Svc.ListFiles(h.Ctx, memoryfiles.ListRequest{App: "app1", User: "ann", PageSize: -1}); !fault.Is(err, fault.Invalid) || fault.FieldOf(err) != "page_size" {
		t.Errorf("ListFiles with page_size -1: %v", err)
	}
}
