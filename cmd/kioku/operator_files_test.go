package main

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
)

// TestFilesCommands runs kioku files list|cat|view|revisions|rm against a
// real server whose memory files a model wrote through Execute.
func TestFilesCommands(t *testing.T) {
	s := newOperatorServer(t)
	for _, in := range []map[string]any{
		{"command": "create", "path": "/memories/notes.md", "file_text": "Ann likes tea.\n"},
		{"command": "str_replace", "path": "/memories/notes.md", "old_str": "tea", "new_str": "green tea"},
		{"command": "create", "path": "/memories/projects/kioku.md", "file_text": "ship it\n"},
		{"command": "create", "path": "/memories/old.md", "file_text": "old"},
		{"command": "delete", "path": "/memories/old.md"},
	} {
		input, _ := structpb.NewStruct(in)
		res, err := s.c.Execute(t.Context(), &kiokuv1.ExecuteRequest{Parent: "apps/a/users/ann", Input: input})
		if err != nil || res.GetIsError() {
			t.Fatalf("Execute(%v) = %v, %v", in, res, err)
		}
	}

	out, _, _ := s.kioku(false, "files", "list", "apps/a/users/ann")
	has(t, "files list", out, "PATH", "BYTES", "REV", "/memories/notes.md", "21", "/memories/projects/kioku.md", "apps/a/users/ann/memoryFiles/")
	if strings.Contains(out, "old.md") {
		t.Errorf("files list shows a deleted file:\n%s", out)
	}
	out, _, _ = s.kioku(false, "files", "list", "apps/a/users/ann", "--deleted")
	has(t, "files list --deleted", out, "/memories/old.md (deleted)")
	out, _, _ = s.kioku(false, "files", "list", "apps/a/users/ann/memories/projects", "--json")
	var listed []map[string]any
	if err := json.Unmarshal([]byte(out), &listed); err != nil || len(listed) != 1 || listed[0]["path"] != "/memories/projects/kioku.md" {
		t.Errorf("files list of a directory --json = %q (%v)", out, err)
	}

	out, _, _ = s.kioku(false, "files", "cat", "apps/a/users/ann/memories/notes.md")
	if out != "Ann likes green tea.\n" {
		t.Errorf("files cat = %q", out)
	}
	out, _, _ = s.kioku(false, "files", "view", "apps/a/users/ann/memories")
	has(t, "files view", out, "Here're the files and directories up to 2 levels deep in /memories", "21B\t/memories/notes.md", "8B\t/memories/projects/")
	out, _, _ = s.kioku(false, "files", "view", "apps/a/users/ann/memories/notes.md")
	has(t, "files view of a file", out, "     1\tAnn likes green tea.")
	out, _, _ = s.kioku(false, "files", "revisions", "apps/a/users/ann/memories/notes.md")
	has(t, "files revisions", out, "REV", "ACTION", "EDITED", "CREATED", "Ann likes green tea.")

	// Names that are not files are refused with a reason.
	_, _, err := s.kioku(true, "files", "cat", "apps/a/users/ann/memories/projects")
	if err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("files cat of a directory: %v", err)
	}
	_, _, err = s.kioku(true, "files", "cat", "apps/a/users/ann/memories/none.md")
	if err == nil || !strings.Contains(err.Error(), "has no memory file at /memories/none.md") {
		t.Errorf("files cat of nothing: %v", err)
	}
	_, _, err = s.kioku(true, "files", "view", "apps/a/users/ann/memories/../etc/passwd")
	if err == nil || !strings.Contains(err.Error(), "is not allowed") {
		t.Errorf("files view outside /memories: %v", err)
	}

	out, _, _ = s.kioku(false, "files", "rm", "apps/a/users/ann/memories/projects")
	has(t, "files rm", out, "Successfully deleted /memories/projects")
	out, _, _ = s.kioku(false, "files", "list", "apps/a/users/ann")
	if strings.Contains(out, "kioku.md") {
		t.Errorf("files list after rm:\n%s", out)
	}
	if _, _, err := s.kioku(true, "files", "rm", "apps/a/users/ann"); err == nil || !strings.Contains(err.Error(), "names a user") {
		t.Errorf("files rm of a whole user: %v", err)
	}
}
