package memoryfilestest

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/memoryfiles"
)

// BadPaths are paths the tool refuses, each with the reason its answer
// gives: the traversal forms of the tool's security guidance and more.
var BadPaths = map[string]string{
	"/memories/../etc/passwd":                     `has a ".." segment; paths are never resolved, name the file directly`,
	"/etc/passwd":                                 "is outside /memories: every path is /memories or starts with /memories/",
	"notes.txt":                                   "is outside /memories: every path is /memories or starts with /memories/",
	"memories/notes.txt":                          "is outside /memories: every path is /memories or starts with /memories/",
	"/memoriesX/notes.txt":                        "is outside /memories: every path is /memories or starts with /memories/",
	"/memories/%2e%2e/%2e%2e/etc/passwd":          "contains the percent-encoding %2e; write characters as they are",
	"/memories/%2E%2E%2Fetc":                      "contains the percent-encoding %2E; write characters as they are",
	"/memories/..%2fetc":                          "contains the percent-encoding %2f; write characters as they are",
	"/memories/..\\etc\\passwd":                   "contains a backslash; separate directories with /",
	"/memories/./notes.txt":                       `has a "." segment; paths are never resolved, name the file directly`,
	"/memories/a/..":                              `has a ".." segment; paths are never resolved, name the file directly`,
	"/memories//notes.txt":                        "has an empty segment (//)",
	"/memories/notes\x00.txt":                     "contains the control character U+0000",
	"/memories/notes\n.txt":                       "contains the control character U+000A",
	"/memories/\u0085x":                           "contains the control character U+0085",
	"/memories/\xc0\xae\xc0\xae/etc":              "is not valid UTF-8",
	"/memories/\uff0e\uff0e/etc":                  `has the segment "．．", which reads as ".."`,
	"/memories/a\uff0fb":                          "contains the character U+FF0F, which looks like a slash or a backslash; separate directories with /",
	"/memories/a\u2215b":                          "contains the character U+2215, which looks like a slash or a backslash; separate directories with /",
	"/memories/a\u2044b":                          "contains the character U+2044, which looks like a slash or a backslash; separate directories with /",
	"/memories/..\u200b/x":                        "contains the invisible format character U+200B; write the name without it",
	"/memories/gpj.\u202etxt":                     "contains the invisible format character U+202E; write the name without it",
	"/memories/notes\u200d":                       "contains the invisible format character U+200D; write the name without it",
	"/memories/a\u200db":                          "contains the invisible format character U+200D; write the name without it",
	"/memories/\ufeffnotes":                       "contains the invisible format character U+FEFF; write the name without it",
	"/memories/a\u2028b":                          "contains the line or paragraph separator U+2028; a name is one line",
	"/memories/a\u2029b":                          "contains the line or paragraph separator U+2029; a name is one line",
	"/memories/\u00a0/x":                          `has the segment "\u00a0", which is only spaces`,
	"/memories/\u3000\u00a0":                      `has the segment "\u3000\u00a0", which is only spaces`,
	"/memories/~":                                 `has the segment "~", a home directory alias`,
	"/memories/C:":                                `has the segment "C:", whose colon names a drive or stream on some file systems`,
	"/memories/notes.txt:hidden":                  `has the segment "notes.txt:hidden", whose colon names a drive or stream on some file systems`,
	"/memories/notes.":                            `has the segment "notes.", which ends with a dot or a space (dropped by some file systems)`,
	"/memories/...":                               `has the segment "...", which ends with a dot or a space (dropped by some file systems)`,
	"/memories/notes ":                            `has the segment "notes ", which ends with a dot or a space (dropped by some file systems)`,
	"/memories/" + strings.Repeat("a/", 16) + "b": "is 17 levels below /memories; the limit is 16",
	"/memories/" + strings.Repeat("x", 1020):      "is 1,030 bytes long; the limit is 1,024 bytes",
}

func testPathsRefused(t *testing.T, h *Harness) {
	h.Create("/memories/notes.txt", "keep\n")
	before := h.Usage("ann")
	for p, reason := range BadPaths {
		want := fmt.Sprintf("Error: The path %q is not allowed: it %s.", p, reason)
		if len(p) > 200 {
			want = fmt.Sprintf("Error: The path %q is not allowed: it %s.", p[:200]+"...", reason)
		}
		for _, in := range []map[string]any{
			{"command": "view", "path": p},
			{"command": "create", "path": p, "file_text": "pwned"},
			{"command": "str_replace", "path": p, "old_str": "root", "new_str": "x"},
			{"command": "insert", "path": p, "insert_line": 0.0, "insert_text": "x"},
			{"command": "delete", "path": p},
			{"command": "rename", "old_path": "/memories/notes.txt", "new_path": p},
			{"command": "rename", "old_path": p, "new_path": "/memories/stolen.txt"},
		} {
			h.Want(in, want, true)
		}
	}
	if after := h.Usage("ann"); after != before {
		t.Errorf("usage after the refused paths = %+v, want %+v: something was written", after, before)
	}
	if diff := cmp.Diff([]string{"/memories/notes.txt"}, h.Paths("ann")); diff != "" {
		t.Errorf("files after the refused paths (-want +got):\n%s", diff)
	}
	// Names that merely look odd are files like any other, emoji joined
	// into one by zero-width joiners too.
	for _, p := range []string{"/memories/..notes", "/memories/a..b/c", "/memories/100%/x", "/memories/メモ（１）.txt", "/memories/.env", "/memories/~ann",
		"/memories/a\u00a0b", "/memories/\U0001F468\u200d\U0001F469\u200d\U0001F467.md", "/memories/\u2764\ufe0f\u200d\U0001F525"} {
		h.Create(p, "ok")
		h.Want(view(p), "Here's the content of "+p+" with line numbers:\n     1\tok", false)
	}
}

// testPathsNormalised checks that paths are compared in Unicode normal
// form C: "café" with a precomposed é and with e and a combining acute
// accent name one file, stored in the composed form.
func testPathsNormalised(t *testing.T, h *Harness) {
	const nfc, nfd = "/memories/caf\u00e9/men\u00fa.md", "/memories/cafe\u0301/menu\u0301.md"
	h.Create(nfc, "soup\n")
	h.Want(map[string]any{"command": "create", "path": nfd, "file_text": "other"}, "Error: File "+nfd+" already exists", true)
	h.Want(view(nfd), "Here's the content of "+nfd+" with line numbers:\n     1\tsoup", false)
	h.OK(map[string]any{"command": "str_replace", "path": nfd, "old_str": "soup", "new_str": "stew"})
	if got, ok := h.Content("ann", nfc); !ok || got != "stew\n" {
		t.Errorf("content at the composed path = %q, %v", got, ok)
	}
	h.OK(map[string]any{"command": "rename", "old_path": "/memories/cafe\u0301", "new_path": "/memories/bistro\u0301"})
	if diff := cmp.Diff([]string{"/memories/bistr\u00f3/men\u00fa.md"}, h.Paths("ann")); diff != "" {
		t.Errorf("files after renaming by a decomposed path (-want +got):\n%s", diff)
	}
	if u := h.Usage("ann"); u.Files != 1 {
		t.Errorf("usage = %+v, want one file", u)
	}
}

func testIsolation(t *testing.T, h *Harness) {
	h.Create("/memories/secret.txt", "ann's")
	h.Want(map[string]any{"_user": "bob", "command": "view", "path": "/memories/secret.txt"},
		"The path /memories/secret.txt does not exist. Please provide a valid path.", true)
	h.Want(map[string]any{"_user": "bob", "command": "view", "path": "/memories"},
		"Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n0B\t/memories", false)
	h.Want(map[string]any{"_user": "bob", "command": "delete", "path": "/memories/secret.txt"}, "Error: The path /memories/secret.txt does not exist", true)
	h.Want(map[string]any{"_user": "bob", "command": "create", "path": "/memories/secret.txt", "file_text": "bob's"},
		"File created successfully at: /memories/secret.txt", false)
	res, err := h.Svc.Execute(h.Ctx, "app2", "ann", view("/memories/secret.txt"))
	if err != nil || !res.IsError {
		t.Errorf("ann of app2 viewing app1's file = %+v, %v", res, err)
	}
	if got, _ := h.Content("ann", "/memories/secret.txt"); got != "ann's" {
		t.Errorf("ann's file = %q", got)
	}
	if got, _ := h.Content("bob", "/memories/secret.txt"); got != "bob's" {
		t.Errorf("bob's file = %q", got)
	}
	f, err := h.Store.FindFile(h.Ctx, "app1", "ann", "/memories/secret.txt")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Svc.GetFile(h.Ctx, "app1", "bob", f.ID); !fault.Is(err, fault.NotFound) {
		t.Errorf("GetFile of ann's file as bob: %v, want NotFound", err)
	}
	if _, _, err := h.Svc.ListRevisions(h.Ctx, "app1", "bob", f.ID, 0, ""); !fault.Is(err, fault.NotFound) {
		t.Errorf("ListRevisions of ann's file as bob: %v, want NotFound", err)
	}
}

func testLimits(t *testing.T, h *Harness) {
	big := strings.Repeat("x", memoryfiles.MaxFileBytes)
	full := "A" + big[1:]
	h.Create("/memories/full.txt", full)
	h.Want(map[string]any{"command": "create", "path": "/memories/over.txt", "file_text": big + "x"},
		"Error: Parameter `file_text` is 102,401 bytes; the limit is 102,400 bytes (the size of a whole file)", true)
	h.Want(map[string]any{"command": "insert", "path": "/memories/full.txt", "insert_line": 0.0, "insert_text": "y"},
		"Error: File /memories/full.txt would be 102,402 bytes; the limit is 102,400 bytes per file. Keep it shorter, or split it into several files", true)
	h.Want(map[string]any{"command": "str_replace", "path": "/memories/full.txt", "old_str": "A", "new_str": "AB"},
		"Error: File /memories/full.txt would be 102,401 bytes; the limit is 102,400 bytes per file. Keep it shorter, or split it into several files", true)
	if got, _ := h.Content("ann", "/memories/full.txt"); got != full {
		t.Errorf("the full file changed: %d bytes", len(got))
	}
	// Forty files of 100 KiB fill the user's 4 MiB; the next byte does not
	// fit.
	for i := 2; i <= memoryfiles.MaxUserBytes/memoryfiles.MaxFileBytes; i++ {
		h.Create(fmt.Sprintf("/memories/full%d.txt", i), big)
	}
	h.Create("/memories/rest.txt", "R"+strings.Repeat("r", memoryfiles.MaxUserBytes-40*memoryfiles.MaxFileBytes-1))
	if u := h.Usage("ann"); u.Bytes != memoryfiles.MaxUserBytes {
		t.Fatalf("usage = %+v, want %d bytes", u, memoryfiles.MaxUserBytes)
	}
	h.Want(map[string]any{"command": "create", "path": "/memories/one.txt", "file_text": "1"},
		"Error: The memory files would hold 4,194,305 bytes in all; the limit is 4,194,304 bytes. Delete or shorten files first", true)
	h.Want(map[string]any{"command": "str_replace", "path": "/memories/rest.txt", "old_str": "R", "new_str": "RR"},
		"Error: The memory files would hold 4,194,305 bytes in all; the limit is 4,194,304 bytes. Delete or shorten files first", true)
	// Shortening and deleting make room.
	h.OK(map[string]any{"command": "str_replace", "path": "/memories/rest.txt", "old_str": "R", "new_str": ""})
	h.Create("/memories/one.txt", "1")
	h.OK(map[string]any{"command": "delete", "path": "/memories/full.txt"})
	h.Create("/memories/two.txt", "22")
	// Renaming a directory to paths over the limit is refused.
	deep := "/memories/" + strings.Repeat("d/", 14) + "f.txt"
	h.Create(deep, "deep")
	h.Want(map[string]any{"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e/e/e"},
		"Error: Cannot rename /memories/d to /memories/e/e/e: the path of "+deep+" would become \"/memories/e/e/e/"+strings.Repeat("d/", 13)+"f.txt\", which is 17 levels below /memories; the limit is 16", true)
}

func testMaxFiles(t *testing.T, h *Harness) {
	// The files are written in one Write, as a command does, with the
	// usage they make.
	w := &memoryfiles.Write{App: "app1", User: "ann", Now: h.Now()}
	for i := range memoryfiles.MaxFiles {
		f := &memoryfiles.File{App: "app1", User: "ann", ID: fmt.Sprintf("bulk%d", i), Path: fmt.Sprintf("/memories/n/%04d.txt", i), Content: "n", Size: 1, CreateTime: w.Now}
		w.Usage.Files++
		w.Usage.Bytes++
		addChange(w, f, memoryfiles.Created)
	}
	if err := h.Store.Write(h.Ctx, w); err != nil {
		t.Fatal(err)
	}
	h.Want(map[string]any{"command": "create", "path": "/memories/one-more.txt", "file_text": "x"},
		"Error: Cannot create /memories/one-more.txt: the memory directory holds 1,000 files, the limit. Delete files, or gather notes into fewer files, first", true)
	out := h.OK(view("/memories"))
	if !strings.HasPrefix(out, "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n1000B\t/memories\n1000B\t/memories/n/\n1B\t/memories/n/0000.txt\n") || strings.Count(out, "\n") != 1002 {
		t.Errorf("view of 1,000 files: %d lines, starting %.300q", strings.Count(out, "\n")+1, out)
	}
	// A directory of them all renames and deletes in one command.
	h.OK(map[string]any{"command": "rename", "old_path": "/memories/n", "new_path": "/memories/m"})
	if p := h.Paths("ann"); len(p) != memoryfiles.MaxFiles || p[0] != "/memories/m/0000.txt" {
		t.Errorf("after renaming: %d files, first %v", len(p), p[:1])
	}
	h.OK(map[string]any{"command": "delete", "path": "/memories/m"})
	if u := h.Usage("ann"); u.Files != 0 || u.Bytes != 0 || u.Deleted != memoryfiles.MaxDeletedFiles {
		t.Errorf("usage after deleting them = %+v", u)
	}
	h.Create("/memories/one-more.txt", "x")
}

// addChange adds a file's first revision (or the next) to a Write.
func addChange(w *memoryfiles.Write, f *memoryfiles.File, action memoryfiles.Action) {
	f.Revision++
	f.UpdateTime = w.Now
	r := &memoryfiles.Revision{App: f.App, User: f.User, FileID: f.ID, Number: f.Revision, Action: action, Path: f.Path, Size: f.Size, CreateTime: w.Now}
	content := action == memoryfiles.Created || action == memoryfiles.Edited
	if content {
		r.Content = f.Content
	}
	w.Files = append(w.Files, memoryfiles.FileChange{File: f, Content: content})
	w.Revisions = append(w.Revisions, r)
}

func testConcurrentEdits(t *testing.T, h *Harness) {
	const n = 8
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "item %d: todo\n", i)
	}
	h.Create("/memories/list.txt", b.String())
	var wg sync.WaitGroup
	results := make([]*memoryfiles.Result, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			results[i], errs[i] = h.Svc.Execute(h.Ctx, "app1", "ann", map[string]any{
				"command": "str_replace", "path": "/memories/list.txt",
				"old_str": fmt.Sprintf("item %d: todo", i), "new_str": fmt.Sprintf("item %d: done", i),
			})
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || results[i].IsError {
			t.Errorf("edit %d: %+v, %v", i, results[i], errs[i])
		}
	}
	want := strings.ReplaceAll(b.String(), "todo", "done")
	if got, _ := h.Content("ann", "/memories/list.txt"); got != want {
		t.Errorf("after %d concurrent edits:\n%s\nwant\n%s", n, got, want)
	}
	f, _ := h.Store.FindFile(h.Ctx, "app1", "ann", "/memories/list.txt")
	if f.Revision != n+1 {
		t.Errorf("revision = %d, want %d", f.Revision, n+1)
	}
	// The same edit twice at once: one applies, the other finds nothing
	// to replace; and one create of a path at once from two sides.
	var ok, refused int
	var mu sync.Mutex
	for _, in := range []map[string]any{
		{"command": "str_replace", "path": "/memories/list.txt", "old_str": "item 0: done", "new_str": "item 0: DONE"},
		{"command": "str_replace", "path": "/memories/list.txt", "old_str": "item 0: done", "new_str": "item 0: DONE"},
		{"command": "create", "path": "/memories/race.txt", "file_text": "x"},
		{"command": "create", "path": "/memories/race.txt", "file_text": "x"},
	} {
		wg.Go(func() {
			res, err := h.Svc.Execute(h.Ctx, "app1", "ann", in)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Error(err)
			case res.IsError:
				refused++
			default:
				ok++
			}
		})
	}
	wg.Wait()
	if ok != 2 || refused != 2 {
		t.Errorf("racing duplicates: %d applied, %d refused; want 2 and 2", ok, refused)
	}
	if u := h.Usage("ann"); u.Files != 2 {
		t.Errorf("usage = %+v, want 2 files", u)
	}
}

func testStaleWrite(t *testing.T, h *Harness) {
	h.Create("/memories/a.txt", "a")
	u := h.Usage("ann")
	f, err := h.Store.FindFile(h.Ctx, "app1", "ann", "/memories/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	h.OK(map[string]any{"command": "str_replace", "path": "/memories/a.txt", "old_str": "a", "new_str": "b"})
	// A Write computed before that edit is refused and writes nothing.
	f.Content, f.Size = "stale", 5
	w := &memoryfiles.Write{App: "app1", User: "ann", Version: u.Version, Usage: u, Now: h.Now()}
	w.Usage.Bytes += 4
	addChange(w, f, memoryfiles.Edited)
	if err := h.Store.Write(h.Ctx, w); !fault.Is(err, fault.Aborted) {
		t.Fatalf("stale Write: %v, want Aborted", err)
	}
	if got, _ := h.Content("ann", "/memories/a.txt"); got != "b" {
		t.Errorf("content after a stale write = %q", got)
	}
	if got := h.Usage("ann"); got.Version != u.Version+1 || got.Bytes != 1 {
		t.Errorf("usage after a stale write = %+v", got)
	}
}
