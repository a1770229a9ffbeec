package memoryfilestest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/memoryfiles"
)

// stored measures what a user's files hold in the store, reading every
// file (deleted ones too) and every revision: the content of the files
// not deleted, and the history (the content of the deleted files and of
// every revision).
func (h *Harness) stored(user string) (live, history int64) {
	h.T.Helper()
	q := memoryfiles.ListQuery{App: "app1", User: user, Dir: memoryfiles.Root, ShowDeleted: true, Limit: 100}
	for {
		page, err := h.Store.ListFiles(h.Ctx, q)
		if err != nil {
			h.T.Fatal(err)
		}
		for _, f := range page {
			if f.Deleted {
				history += f.Size
			} else {
				live += f.Size
			}
			revs, err := h.Store.ListRevisions(h.Ctx, "app1", user, f.ID, 0, 1000)
			if err != nil {
				h.T.Fatal(err)
			}
			for _, r := range revs {
				history += int64(len(r.Content))
			}
		}
		if len(page) < q.Limit {
			return live, history
		}
		q.AfterPath, q.AfterID = page[len(page)-1].Path, page[len(page)-1].ID
	}
}

// checkStored checks that the usage counts what the store holds, and
// that the history is within MaxHistoryBytes.
func (h *Harness) checkStored(when string) memoryfiles.Usage {
	h.T.Helper()
	live, history := h.stored("ann")
	u := h.Usage("ann")
	if u.Bytes != live || u.History != history {
		h.T.Errorf("%s: usage counts %d bytes and %d of history; the store holds %d and %d", when, u.Bytes, u.History, live, history)
	}
	if history > memoryfiles.MaxHistoryBytes {
		h.T.Errorf("%s: the store holds %d bytes of history, over the %d of MaxHistoryBytes", when, history, memoryfiles.MaxHistoryBytes)
	}
	return u
}

// big returns MaxFileBytes of text starting with first.
func big(first string) string {
	return first + strings.Repeat(".", memoryfiles.MaxFileBytes-len(first))
}

// testHistoryBounded reproduces issue 36's finding: files created, edited
// and deleted, which leave no live bytes, grew the store without bound
// through their revisions and the deleted files kept. The history now
// stays within MaxHistoryBytes, the oldest going first, and no command
// is refused for it.
func testHistoryBounded(t *testing.T, h *Harness) {
	const cycles = 12 // 12 × 5 × 100 KiB written: 6 MB, past the 4 MiB
	var ids []string
	for i := range cycles {
		p := fmt.Sprintf("/memories/churn%02d.txt", i)
		h.Create(p, big("A"))
		ids = append(ids, h.fileID(p))
		for _, c := range []string{"B", "C", "D"} {
			h.OK(map[string]any{"command": "str_replace", "path": p, "old_str": string(rune(c[0] - 1)), "new_str": c})
		}
		h.OK(map[string]any{"command": "delete", "path": p})
		h.checkStored(fmt.Sprintf("after cycle %d", i))
	}
	if u := h.Usage("ann"); u.Bytes != 0 || u.Files != 0 || u.History < memoryfiles.MaxHistoryBytes-5*memoryfiles.MaxFileBytes {
		t.Errorf("usage after the churn = %+v; want no live bytes and a history near the limit", u)
	}
	// The earliest deleted files went first, whole; the latest are kept.
	first, err := h.Store.GetFile(h.Ctx, "app1", "ann", ids[0])
	if err == nil {
		t.Errorf("the first deleted file is still kept: %+v", first)
	}
	if revs := h.revisions(ids[cycles-1]); len(revs) != 5 {
		t.Errorf("the last deleted file keeps %d revisions, want 5", len(revs))
	}

	// History of files that stay: a file edited often, then shrunk, then
	// others written; their older revisions go, each file keeping its
	// newest, and every command applies.
	for _, p := range []string{"/memories/a.txt", "/memories/b.txt"} {
		letter := func(i int) string { return string(rune('A' + i)) }
		h.Create(p, big(letter(0)))
		for i := 1; i < memoryfiles.MaxRevisions; i++ {
			h.OK(map[string]any{"command": "str_replace", "path": p, "old_str": letter(i - 1), "new_str": letter(i)})
		}
		h.OK(map[string]any{"command": "str_replace", "path": p, "old_str": big(letter(memoryfiles.MaxRevisions - 1)), "new_str": "short"})
		h.checkStored("after editing " + p)
	}
	for i := range 10 {
		h.Create(fmt.Sprintf("/memories/new%d.txt", i), big(fmt.Sprint(i)))
	}
	u := h.checkStored("after writing new files")
	if u.Deleted != 0 || u.Files != 12 {
		t.Errorf("usage = %+v; want the deleted files purged first, and 12 files", u)
	}
	// Every file keeps its newest revision.
	for _, p := range h.Paths("ann") {
		if revs := h.revisions(h.fileID(p)); len(revs) == 0 {
			t.Errorf("%s keeps no revision", p)
		}
	}
}
