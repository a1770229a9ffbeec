// Package memoryfilestest is the conformance suite of memoryfiles.Store:
// every backend runs Run and must pass all of it. The suite drives a Store
// through memoryfiles.Service, as the API does, and checks what a caller
// sees: the memory tool's six commands and their answers word for word,
// view's answer bounded, paths refused with nothing written and compared
// in Unicode normal form C, users and apps kept apart, the limits,
// revisions and their bound, deleted files and theirs, the history's
// bound in bytes (the usage counting what the store holds), listings and
// paging, concurrent edits that never lose an update, and the primitives
// of export, import and erasure.
package memoryfilestest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kioku-ai/kioku/internal/suitetest"
	"github.com/kioku-ai/kioku/memoryfiles"
)

// Run runs the conformance suite, each case on an empty store of its own
// from newStore, which registers the store's cleanup with t.Cleanup (the
// suite closes nothing).
func Run[S memoryfiles.Store](t *testing.T, newStore func(t *testing.T) S) {
	tests := []suitetest.Case[*Harness]{
		{Name: "CreateAndView", Run: testCreateAndView},
		{Name: "DirectoryListing", Run: testDirectoryListing},
		{Name: "ViewRange", Run: testViewRange},
		{Name: "ViewBounded", Run: testViewBounded},
		{Name: "StrReplace", Run: testStrReplace},
		{Name: "Insert", Run: testInsert},
		{Name: "Delete", Run: testDelete},
		{Name: "Rename", Run: testRename},
		{Name: "BadInput", Run: testBadInput},
		{Name: "PathsRefused", Run: testPathsRefused},
		{Name: "PathsNormalised", Run: testPathsNormalised},
		{Name: "UsersAndAppsApart", Run: testIsolation},
		{Name: "Limits", Run: testLimits},
		{Name: "MaxFiles", Run: testMaxFiles},
		{Name: "Revisions", Run: testRevisions},
		{Name: "RevisionsBounded", Run: testRevisionsBounded},
		{Name: "DeletedFilesBounded", Run: testDeletedBounded},
		{Name: "HistoryBounded", Run: testHistoryBounded},
		{Name: "ListAndPage", Run: testListAndPage},
		{Name: "ConcurrentEdits", Run: testConcurrentEdits},
		{Name: "StaleWriteAborted", Run: testStaleWrite},
		{Name: "Import", Run: testImport},
		{Name: "EraseUser", Run: testEraseUser},
		{Name: "AppsAndUsers", Run: testAppsAndUsers},
	}
	suitetest.Run(t, tests, func(t *testing.T) *Harness { return NewHarness(t, newStore(t)) })
}

// Harness is a Service on a store with a clock that moves one millisecond
// at each reading, and ids f1, f2, ...
type Harness struct {
	T     *testing.T
	Ctx   context.Context
	Store memoryfiles.Store
	Svc   *memoryfiles.Service
	Now   func() time.Time
}

// NewHarness returns a harness on a store.
func NewHarness(t *testing.T, s memoryfiles.Store) *Harness {
	clock := suitetest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), time.Millisecond)
	var n atomic.Int64
	ids := func() string { return fmt.Sprintf("f%d", n.Add(1)) }
	return &Harness{T: t, Ctx: context.Background(), Store: s, Now: clock.Tick,
		Svc: memoryfiles.NewService(s, memoryfiles.Config{Now: clock.Tick, NewID: ids})}
}

// Exec runs one command of the tool for a user of app1 ("ann" unless the
// input says otherwise under "_user"), failing the test on an error that
// is not the tool's.
func (h *Harness) Exec(input map[string]any) *memoryfiles.Result {
	h.T.Helper()
	user := "ann"
	if u, ok := input["_user"].(string); ok {
		user = u
	}
	res, err := h.Svc.Execute(h.Ctx, "app1", user, input)
	if err != nil {
		h.T.Fatalf("Execute(%v): %v", input, err)
	}
	return res
}

// Want runs a command and checks its answer.
func (h *Harness) Want(input map[string]any, output string, isError bool) {
	h.T.Helper()
	got := h.Exec(input)
	if diff := cmp.Diff(&memoryfiles.Result{Output: output, IsError: isError}, got); diff != "" {
		h.T.Errorf("Execute(%v) (-want +got):\n%s", input, diff)
	}
}

// OK runs a command that must succeed.
func (h *Harness) OK(input map[string]any) string {
	h.T.Helper()
	res := h.Exec(input)
	if res.IsError {
		h.T.Fatalf("Execute(%v) = error %q", input, res.Output)
	}
	return res.Output
}

// Create creates a file of ann's.
func (h *Harness) Create(path, text string) {
	h.T.Helper()
	h.OK(map[string]any{"command": "create", "path": path, "file_text": text})
}

// Content returns the content of ann's file at path, "" when none.
func (h *Harness) Content(user, path string) (string, bool) {
	h.T.Helper()
	f, err := h.Store.FindFile(h.Ctx, "app1", user, path)
	if err != nil {
		return "", false
	}
	return f.Content, true
}

// Usage returns a user's usage of app1.
func (h *Harness) Usage(user string) memoryfiles.Usage {
	h.T.Helper()
	u, err := h.Store.Usage(h.Ctx, "app1", user)
	if err != nil {
		h.T.Fatal(err)
	}
	return u
}

// Paths lists a user's files of app1 (not deleted), in order.
func (h *Harness) Paths(user string) []string {
	h.T.Helper()
	files, _, err := h.Svc.ListFiles(h.Ctx, memoryfiles.ListRequest{App: "app1", User: user, PageSize: 1000})
	if err != nil {
		h.T.Fatal(err)
	}
	var out []string
	for _, f := range files {
		out = append(out, f.Path)
	}
	return out
}

func view(path string) map[string]any { return map[string]any{"command": "view", "path": path} }

func testCreateAndView(t *testing.T, h *Harness) {
	h.Want(map[string]any{"command": "create", "path": "/memories/notes.txt", "file_text": "Hello World\nThis is line two\n"},
		"File created successfully at: /memories/notes.txt", false)
	h.Want(view("/memories/notes.txt"), "Here's the content of /memories/notes.txt with line numbers:\n     1\tHello World\n     2\tThis is line two", false)
	h.Want(map[string]any{"command": "create", "path": "/memories/notes.txt", "file_text": "again"},
		"Error: File /memories/notes.txt already exists", true)
	if got, _ := h.Content("ann", "/memories/notes.txt"); got != "Hello World\nThis is line two\n" {
		t.Errorf("content after the refused create = %q", got)
	}
	// Directories above a file are made by create; a file cannot be made
	// where a directory is, nor below a file.
	h.Create("/memories/projects/kioku/todo.md", "- ship\n")
	h.Want(map[string]any{"command": "create", "path": "/memories/projects", "file_text": "x"},
		"Error: The path /memories/projects is a directory; a file needs a name of its own", true)
	h.Want(map[string]any{"command": "create", "path": "/memories/notes.txt/inner.md", "file_text": "x"},
		"Error: The path /memories/notes.txt is a file, not a directory: nothing can be created below it", true)
	h.Want(map[string]any{"command": "create", "path": "/memories", "file_text": "x"},
		"Error: The path /memories is a directory; a file needs a name of its own", true)
	h.Want(map[string]any{"command": "create", "path": "/memories/later/", "file_text": "x"},
		"Error: The path /memories/later/ ends with a slash; a file needs a name of its own (directories come with the files below them)", true)
	h.Want(view("/memories/nothing.txt"), "The path /memories/nothing.txt does not exist. Please provide a valid path.", true)
	// An empty file, and lines as the documentation shows them.
	h.Create("/memories/empty.txt", "")
	h.Want(view("/memories/empty.txt"), "Here's the content of /memories/empty.txt with line numbers:\n", false)
	var b strings.Builder
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	h.Create("/memories/long.txt", b.String())
	out := h.OK(view("/memories/long.txt"))
	for _, want := range []string{"\n     1\tline 1\n", "\n    10\tline 10\n", "\n   100\tline 100"} {
		if !strings.Contains(out, want) {
			t.Errorf("view of a long file lacks %q", want)
		}
	}
	if u := h.Usage("ann"); u.Files != 4 || u.Bytes != int64(len("Hello World\nThis is line two\n")+len("- ship\n")+b.Len()) || u.Deleted != 0 {
		t.Errorf("usage = %+v", u)
	}
}

func testDirectoryListing(t *testing.T, h *Harness) {
	h.Want(view("/memories"), "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n0B\t/memories", false)
	h.Create("/memories/customer_service_guidelines.xml", strings.Repeat("g", 1536))
	h.Create("/memories/refund_policies.xml", strings.Repeat("r", 2048))
	h.Create("/memories/projects/bot.md", strings.Repeat("b", 512))
	h.Create("/memories/projects/deep/deeper/far.md", strings.Repeat("f", 100))
	h.Create("/memories/projects/deep/near.md", strings.Repeat("n", 20))
	h.Create("/memories/.hidden", "secret")
	h.Create("/memories/projects/.cache/x", "xxxx")
	h.Create("/memories/node_modules/pkg/index.js", "js")
	h.Create("/memories/big.log", strings.Repeat("x", 12*1024+1))
	h.Want(view("/memories"), strings.Join([]string{
		"Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:",
		"17K\t/memories",
		"13K\t/memories/big.log",
		"1.5K\t/memories/customer_service_guidelines.xml",
		"632B\t/memories/projects/",
		"512B\t/memories/projects/bot.md",
		"120B\t/memories/projects/deep/",
		"2.0K\t/memories/refund_policies.xml",
	}, "\n"), false)
	want := strings.Join([]string{
		"Here're the files and directories up to 2 levels deep in /memories/projects, excluding hidden items and node_modules:",
		"632B\t/memories/projects",
		"512B\t/memories/projects/bot.md",
		"120B\t/memories/projects/deep/",
		"100B\t/memories/projects/deep/deeper/",
		"20B\t/memories/projects/deep/near.md",
	}, "\n")
	h.Want(view("/memories/projects"), want, false)
	h.Want(view("/memories/projects/"), want, false)
	// Hidden items are left out of listings, not out of reach.
	h.Want(view("/memories/.hidden"), "Here's the content of /memories/.hidden with line numbers:\n     1\tsecret", false)
}

func testViewRange(t *testing.T, h *Harness) {
	h.Create("/memories/notes.txt", "one\ntwo\nthree\nfour\n")
	vr := func(r ...any) map[string]any {
		return map[string]any{"command": "view", "path": "/memories/notes.txt", "view_range": r}
	}
	h.Want(vr(2.0, 3.0), "Here's the content of /memories/notes.txt with line numbers:\n     2\ttwo\n     3\tthree", false)
	h.Want(vr(3.0, -1.0), "Here's the content of /memories/notes.txt with line numbers:\n     3\tthree\n     4\tfour", false)
	h.Want(vr(4.0, 4.0), "Here's the content of /memories/notes.txt with line numbers:\n     4\tfour", false)
	h.Want(vr(0.0, 2.0), "Error: Invalid `view_range`: [0, 2]. Its first element `0` should be within the range of lines of the file: [1, 4]", true)
	h.Want(vr(5.0, 6.0), "Error: Invalid `view_range`: [5, 6]. Its first element `5` should be within the range of lines of the file: [1, 4]", true)
	h.Want(vr(2.0, 9.0), "Error: Invalid `view_range`: [2, 9]. Its second element `9` should be smaller than the number of lines in the file: `4`", true)
	h.Want(vr(3.0, 2.0), "Error: Invalid `view_range`: [3, 2]. Its second element `2` should be larger or equal than its first `3`", true)
	h.Want(vr(1.5, 2.0), "Error: Invalid `view_range`: [1.5, 2]. It should be a list of two integers.", true)
	h.Want(vr(1.0), "Error: Invalid `view_range`: [1]. It should be a list of two integers.", true)
	h.Want(map[string]any{"command": "view", "path": "/memories", "view_range": []any{1.0, 2.0}},
		"Error: The `view_range` parameter is not allowed when `path` points to a directory.", true)
}

// testViewBounded checks that view does not amplify: a file of empty
// lines, which line numbers would make ten times longer, is shown up to
// MaxViewBytes, with a note that says how to view the rest, which
// view_range then shows; a full file of ordinary lines is shown whole.
// Nor does str_replace's list of the lines of several occurrences.
func testViewBounded(t *testing.T, h *Harness) {
	h.Create("/memories/blank.txt", strings.Repeat("\n", memoryfiles.MaxFileBytes))
	out := h.OK(view("/memories/blank.txt"))
	if len(out) > memoryfiles.MaxViewBytes+300 {
		t.Errorf("view of %d newlines answers %d bytes; want at most %d and a note", memoryfiles.MaxFileBytes, len(out), memoryfiles.MaxViewBytes+300)
	}
	shown := strings.Count(out, "\t")
	note := fmt.Sprintf("\n[The view stops at line %d of 102400: an answer shows at most 131,072 bytes of lines. View the rest with view_range, from [%d, -1].]", shown, shown+1)
	if !strings.HasSuffix(out, note) || !strings.Contains(out, fmt.Sprintf("\n%6d\t\n", shown)) {
		t.Errorf("view of a file of newlines ends %q; want line %d, then %q", out[max(0, len(out)-200):], shown, note)
	}
	// The rest, a view_range at a time.
	total, from := shown, shown+1
	for from <= memoryfiles.MaxFileBytes {
		out := h.OK(map[string]any{"command": "view", "path": "/memories/blank.txt", "view_range": []any{float64(from), -1.0}})
		if len(out) > memoryfiles.MaxViewBytes+300 || !strings.Contains(out, fmt.Sprintf("\n%6d\t", from)) {
			t.Fatalf("view_range [%d, -1]: %d bytes, starting %.100q", from, len(out), out)
		}
		n := strings.Count(out, "\t")
		total, from = total+n, from+n
	}
	if total != memoryfiles.MaxFileBytes {
		t.Errorf("the views showed %d lines in all, want %d", total, memoryfiles.MaxFileBytes)
	}
	// str_replace's answer to a string on every line lists 100 of them.
	var lines []string
	for i := 1; i <= 100; i++ {
		lines = append(lines, fmt.Sprint(i))
	}
	h.Want(map[string]any{"command": "str_replace", "path": "/memories/blank.txt", "old_str": "\n", "new_str": ""},
		"No replacement was performed. Multiple occurrences of old_str `\n` in lines: "+strings.Join(lines, ", ")+" and 102,300 more. Please ensure it is unique", true)
	// Ordinary lines: the whole file, no note.
	line := strings.Repeat("a", 39) + "\n"
	h.Create("/memories/full.txt", strings.Repeat(line, memoryfiles.MaxFileBytes/len(line)))
	if out := h.OK(view("/memories/full.txt")); strings.Contains(out, "[The view stops") || strings.Count(out, "\t") != memoryfiles.MaxFileBytes/len(line) {
		t.Errorf("view of a full file of 40-byte lines: %d lines shown, ends %q", strings.Count(out, "\t"), out[max(0, len(out)-100):])
	}
}

func testStrReplace(t *testing.T, h *Harness) {
	h.Create("/memories/preferences.txt", "Name: Ann\nFavorite color: blue\nCity: Kyoto\nPet: cat\nFood: soba\nDrink: tea\nSport: judo\n")
	h.Want(map[string]any{"command": "str_replace", "path": "/memories/preferences.txt", "old_str": "Favorite color: blue", "new_str": "Favorite color: green"},
		"The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\tName: Ann\n     2\tFavorite color: green\n     3\tCity: Kyoto\n     4\tPet: cat", false)
	// The snippet spans the lines of the new text, two on either side.
	h.Want(map[string]any{"command": "str_replace", "path": "/memories/preferences.txt", "old_str": "Food: soba\n", "new_str": "Food: soba\nDessert: mochi\n"},
		"The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     3\tCity: Kyoto\n     4\tPet: cat\n     5\tFood: soba\n     6\tDessert: mochi\n     7\tDrink: tea\n     8\tSport: judo", false)
	if got, _ := h.Content("ann", "/memories/preferences.txt"); got != "Name: Ann\nFavorite color: green\nCity: Kyoto\nPet: cat\nFood: soba\nDessert: mochi\nDrink: tea\nSport: judo\n" {
		t.Errorf("content = %q", got)
	}
	h.Want(map[string]any{"command": "str_replace", "path": "/memories/preferences.txt", "old_str": "purple", "new_str": "x"},
		"No replacement was performed, old_str `purple` did not appear verbatim in /memories/preferences.txt.", true)
	h.Want(map[string]any{"command": "str_replace", "path": "/memories/preferences.txt", "old_str": "t", "new_str": "x"},
		"No replacement was performed. Multiple occurrences of old_str `t` in lines: 2, 3, 4, 6, 7, 8. Please ensure it is unique", true)
	h.Want(map[string]any{"command": "str_replace", "path": "/memories/missing.txt", "old_str": "a", "new_str": "b"},
		"Error: The path /memories/missing.txt does not exist. Please provide a valid path.", true)
	h.Create("/memories/dir/a.txt", "a")
	h.Want(map[string]any{"command": "str_replace", "path": "/memories/dir", "old_str": "a", "new_str": "b"},
		"Error: The path /memories/dir does not exist. Please provide a valid path.", true)
	h.Want(map[string]any{"command": "str_replace", "path": "/memories/dir/a.txt", "old_str": "", "new_str": "b"},
		"Error: Parameter `old_str` is required for command: str_replace", true)
	// Replacing with nothing deletes the text.
	h.OK(map[string]any{"command": "str_replace", "path": "/memories/dir/a.txt", "old_str": "a", "new_str": ""})
	if got, ok := h.Content("ann", "/memories/dir/a.txt"); !ok || got != "" {
		t.Errorf("content after replacing all of it = %q, %v", got, ok)
	}
}

func testInsert(t *testing.T, h *Harness) {
	h.Create("/memories/todo.txt", "- one\n- two\n")
	ins := func(line any, text string) map[string]any {
		return map[string]any{"command": "insert", "path": "/memories/todo.txt", "insert_line": line, "insert_text": text}
	}
	h.Want(ins(2.0, "- Review memory tool documentation\n"), "The file /memories/todo.txt has been edited.", false)
	h.Want(ins(0.0, "# Todo"), "The file /memories/todo.txt has been edited.", false)
	h.Want(ins(1.0, "a\nb\n"), "The file /memories/todo.txt has been edited.", false)
	if got, _ := h.Content("ann", "/memories/todo.txt"); got != "# Todo\na\nb\n- one\n- two\n- Review memory tool documentation\n" {
		t.Errorf("content = %q", got)
	}
	h.Want(ins(7.0, "x"), "Error: Invalid `insert_line` parameter: 7. It should be within the range of lines of the file: [0, 6]", true)
	h.Want(ins(-1.0, "x"), "Error: Invalid `insert_line` parameter: -1. It should be within the range of lines of the file: [0, 6]", true)
	h.Want(ins(1.5, "x"), "Error: Invalid `insert_line` parameter: 1.5. It should be within the range of lines of the file: [0, 6]", true)
	h.Want(ins("2", "x"), "Error: Parameter `insert_line` of command insert must be an integer, not \"2\"", true)
	h.Want(map[string]any{"command": "insert", "path": "/memories/none.txt", "insert_line": 0.0, "insert_text": "x"},
		"Error: The path /memories/none.txt does not exist", true)
	// A file without a final newline keeps none, unless the text goes at
	// the end and ends with one; an empty text is an empty line.
	h.Create("/memories/bare.txt", "a")
	h.OK(map[string]any{"command": "insert", "path": "/memories/bare.txt", "insert_line": 0.0, "insert_text": ""})
	if got, _ := h.Content("ann", "/memories/bare.txt"); got != "\na" {
		t.Errorf("content = %q", got)
	}
	h.OK(map[string]any{"command": "insert", "path": "/memories/bare.txt", "insert_line": 2.0, "insert_text": "z\n"})
	if got, _ := h.Content("ann", "/memories/bare.txt"); got != "\na\nz\n" {
		t.Errorf("content = %q", got)
	}
}

func testDelete(t *testing.T, h *Harness) {
	h.Create("/memories/old_file.txt", "old")
	h.Create("/memories/archive/a.txt", "a")
	h.Create("/memories/archive/2025/b.txt", "bb")
	h.Create("/memories/archived.txt", "keep")
	h.Want(map[string]any{"command": "delete", "path": "/memories/old_file.txt"}, "Successfully deleted /memories/old_file.txt", false)
	h.Want(view("/memories/old_file.txt"), "The path /memories/old_file.txt does not exist. Please provide a valid path.", true)
	h.Want(map[string]any{"command": "delete", "path": "/memories/old_file.txt"}, "Error: The path /memories/old_file.txt does not exist", true)
	h.Want(map[string]any{"command": "delete", "path": "/memories/archive"}, "Successfully deleted /memories/archive", false)
	if diff := cmp.Diff([]string{"/memories/archived.txt"}, h.Paths("ann")); diff != "" {
		t.Errorf("files after deleting a directory (-want +got):\n%s", diff)
	}
	h.Want(map[string]any{"command": "delete", "path": "/memories"}, "Error: Cannot delete the /memories directory itself; delete what it holds instead", true)
	if u := h.Usage("ann"); u.Files != 1 || u.Bytes != 4 || u.Deleted != 3 {
		t.Errorf("usage = %+v", u)
	}
	// A path of a deleted file takes a new file, with a new id.
	h.Create("/memories/old_file.txt", "new")
	if got, _ := h.Content("ann", "/memories/old_file.txt"); got != "new" {
		t.Errorf("content = %q", got)
	}
}

func testRename(t *testing.T, h *Harness) {
	h.Create("/memories/draft.txt", "draft")
	h.Create("/memories/final.txt", "final")
	h.Create("/memories/proj/a.txt", "a")
	h.Create("/memories/proj/sub/b.txt", "b")
	rn := func(from, to string) map[string]any {
		return map[string]any{"command": "rename", "old_path": from, "new_path": to}
	}
	h.Want(rn("/memories/draft.txt", "/memories/final.txt"), "Error: The destination /memories/final.txt already exists", true)
	h.Want(rn("/memories/draft.txt", "/memories/proj"), "Error: The destination /memories/proj already exists", true)
	h.Want(rn("/memories/nope.txt", "/memories/x.txt"), "Error: The path /memories/nope.txt does not exist", true)
	h.Want(rn("/memories/draft.txt", "/memories/final.txt/x"), "Error: The path /memories/final.txt is a file, not a directory: nothing can be created below it", true)
	h.Want(rn("/memories/proj", "/memories/proj/inner"), "Error: Cannot move /memories/proj into itself (/memories/proj/inner)", true)
	h.Want(rn("/memories", "/memories/x"), "Error: Cannot rename the /memories directory itself", true)
	h.Want(rn("/memories/draft.txt", "/memories/done/draft.txt"), "Successfully renamed /memories/draft.txt to /memories/done/draft.txt", false)
	h.Want(rn("/memories/proj", "/memories/projects/2026"), "Successfully renamed /memories/proj to /memories/projects/2026", false)
	if diff := cmp.Diff([]string{"/memories/done/draft.txt", "/memories/final.txt", "/memories/projects/2026/a.txt", "/memories/projects/2026/sub/b.txt"}, h.Paths("ann")); diff != "" {
		t.Errorf("files after the renames (-want +got):\n%s", diff)
	}
	if got, _ := h.Content("ann", "/memories/projects/2026/sub/b.txt"); got != "b" {
		t.Errorf("content after a rename = %q", got)
	}
	if u := h.Usage("ann"); u.Files != 4 || u.Bytes != 12 || u.Deleted != 0 {
		t.Errorf("usage = %+v", u)
	}
}

func testBadInput(t *testing.T, h *Harness) {
	for _, c := range []struct {
		in   map[string]any
		want string
	}{
		{map[string]any{}, "Error: Parameter `command` is required: one of view, create, str_replace, insert, delete, rename"},
		{map[string]any{"command": 3.0}, "Error: Parameter `command` must be a string: one of view, create, str_replace, insert, delete, rename"},
		{map[string]any{"command": "undo_edit", "path": "/memories/x"}, "Error: Unrecognized command \"undo_edit\". The allowed commands for the memory tool are: view, create, str_replace, insert, delete, rename"},
		{map[string]any{"command": "view"}, "Error: Parameter `path` is required for command: view"},
		{map[string]any{"command": "create", "path": "/memories/x"}, "Error: Parameter `file_text` is required for command: create"},
		{map[string]any{"command": "create", "path": 7.0, "file_text": "x"}, "Error: Parameter `path` of command create must be a string, not 7"},
		{map[string]any{"command": "str_replace", "path": "/memories/x", "old_str": "a"}, "Error: Parameter `new_str` is required for command: str_replace"},
		{map[string]any{"command": "insert", "path": "/memories/x", "insert_text": "a"}, "Error: Parameter `insert_line` is required for command: insert"},
		{map[string]any{"command": "rename", "old_path": "/memories/x"}, "Error: Parameter `new_path` is required for command: rename"},
		{map[string]any{"command": "create", "path": "/memories/x", "file_text": "a\x00b"}, "Error: Parameter `file_text` contains a NUL character; memory files hold text"},
	} {
		h.Want(c.in, c.want, true)
	}
	if u := h.Usage("ann"); u != (memoryfiles.Usage{}) {
		t.Errorf("usage after refused commands = %+v", u)
	}
	// The caller's own mistakes are errors, not answers.
	if _, err := h.Svc.Execute(h.Ctx, "app1", "bad/user", view("/memories")); err == nil {
		t.Error("Execute with a bad user id: no error")
	}
}
