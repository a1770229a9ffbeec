package archive_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/archive"
	"github.com/kioku-ai/kioku/memoryfiles"
)

// craftFiles writes an archive of memory files (and, after each file,
// its revisions) as a hostile or broken exporter might.
func craftFiles(t *testing.T, files []*memoryfiles.File, revs map[string][]*memoryfiles.Revision) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := archive.NewWriter(&buf, archive.Header{Created: t0, Store: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := w.MemoryFile(f); err != nil {
			t.Fatal(err)
		}
		for _, r := range revs[f.ID] {
			if err := w.MemoryFileRevision(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// file returns a file of user u of app a1 at revision 1, created at t0.
func file(u, id, path, content string) *memoryfiles.File {
	return &memoryfiles.File{App: "a1", User: u, ID: id, Path: path, Content: content, Size: int64(len(content)), Revision: 1, CreateTime: t0, UpdateTime: t0}
}

// many returns n files of ann, each of size bytes.
func many(n, size int) []*memoryfiles.File {
	out := make([]*memoryfiles.File, n)
	for i := range out {
		out[i] = file("ann", fmt.Sprintf("f%04d", i), fmt.Sprintf("/memories/n/%04d.txt", i), strings.Repeat("x", size))
	}
	return out
}

// revisionsOf returns revisions numbered from..down to of a file.
func revisionsOf(f *memoryfiles.File, from, down int64) []*memoryfiles.Revision {
	var out []*memoryfiles.Revision
	for n := from; n >= down; n-- {
		out = append(out, &memoryfiles.Revision{App: f.App, User: f.User, FileID: f.ID, Number: n, Action: memoryfiles.Edited, Path: f.Path, Content: f.Content, Size: f.Size, CreateTime: t0})
	}
	return out
}

// TestImportChecksMemoryFileLimits: an archive whose memory files pass a
// limit of the memory tool (files, bytes and history of a user, revisions
// of a file, deleted files kept), or that has two files at one path or a
// file below another file, is refused in the first reading, naming the
// limit, and the store is as it was (issue 36, finding 6: such archives
// were imported, or failed half-written).
func TestImportChecksMemoryFileLimits(t *testing.T) {
	over := file("ann", "big", "/memories/big.txt", "v")
	over.Revision = 500
	twenty := file("ann", "t", "/memories/t.txt", "v")
	twenty.Revision = 20
	deleted := func(fs []*memoryfiles.File) []*memoryfiles.File {
		for _, f := range fs {
			f.ID, f.Path, f.Deleted = "d"+f.ID, "/memories/d"+f.Path, true
		}
		return fs
	}
	history := deleted(many(memoryfiles.MaxHistoryBytes/memoryfiles.MaxFileBytes+1, memoryfiles.MaxFileBytes))
	for _, c := range []struct {
		what  string
		files []*memoryfiles.File
		revs  map[string][]*memoryfiles.Revision
		want  string
	}{
		{"too many files", many(memoryfiles.MaxFiles+1, 1), nil,
			"user ann of app a1 has 1001 memory files in the archive, over the limit of 1000 a user"},
		{"too many bytes", many(memoryfiles.MaxUserBytes/memoryfiles.MaxFileBytes+1, memoryfiles.MaxFileBytes), nil,
			"user ann of app a1 has 4198400 bytes of memory files in the archive, over the limit of 4194304 a user"},
		{"too much history", history, nil,
			"user ann of app a1 has 4198400 bytes of memory file history (revisions and deleted files) in the archive, over the 4194304 a user keeps"},
		{"too many deleted files", deleted(many(memoryfiles.MaxDeletedFiles+1, 1)), nil,
			"user ann of app a1 has 101 deleted memory files in the archive, over the 100 a user keeps"},
		{"500 revisions of a file", []*memoryfiles.File{over}, map[string][]*memoryfiles.Revision{"big": revisionsOf(over, 500, 1)},
			"revision apps/a1/users/ann/memoryFiles/big/revisions/480 is not among the 20 a file keeps: its file is at revision 500"},
		{"a revision twice", []*memoryfiles.File{twenty}, map[string][]*memoryfiles.Revision{"t": append(revisionsOf(twenty, 20, 10), revisionsOf(twenty, 10, 1)...)},
			"revision apps/a1/users/ann/memoryFiles/t/revisions/10 follows revision 10; a file's revisions come newest first, each once"},
		{"a file below a file", []*memoryfiles.File{file("ann", "a", "/memories/a", "x"), file("ann", "b", "/memories/a/b", "y")}, nil,
			"user ann of app a1 has the memory file a at /memories/a and the file b at /memories/a/b, below it; a file is not a directory"},
		{"two files at one path", []*memoryfiles.File{file("ann", "a", "/memories/x", "x"), file("ann", "b", "/memories/x", "y")}, nil,
			"memory files a and b of user ann of app a1 are both at /memories/x; a path names one file"},
		{"a user's files apart", []*memoryfiles.File{file("ann", "a", "/memories/x", "x"), file("bob", "b", "/memories/x", "y"), file("ann", "c", "/memories/y", "y")}, nil,
			"the files of user ann of app a1 come after another user's or other records"},
		{"a NUL in a file", []*memoryfiles.File{file("ann", "a", "/memories/x", "a\x00b")}, nil,
			"memory file apps/a1/users/ann/memoryFiles/a: the content has a NUL character"},
	} {
		t.Run(strings.ReplaceAll(c.what, " ", "_"), func(t *testing.T) {
			dst := backends[0].open(t)
			before := write(t, dst, t0)
			_, err := load(t, dst, craftFiles(t, c.files, c.revs), archive.ImportOptions{Now: t0})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "nothing was written") {
				t.Fatalf("%s: %v; want an error with %q, and nothing written", c.what, err, c.want)
			}
			sameRecords(t, c.what+": the store before (-) and after (+) the refused import", before, write(t, dst, t0))
		})
	}
	// At the limits, the same kind of archive imports, with its usage.
	dst := backends[0].open(t)
	at := append(many(memoryfiles.MaxUserBytes/memoryfiles.MaxFileBytes, memoryfiles.MaxFileBytes), twenty)
	at = append(at, history[:memoryfiles.MaxHistoryBytes/memoryfiles.MaxFileBytes]...)
	if _, err := load(t, dst, craftFiles(t, at, map[string][]*memoryfiles.Revision{"t": revisionsOf(twenty, 20, 1)}), archive.ImportOptions{Now: t0}); err != nil {
		t.Fatalf("an archive at the limits: %v", err)
	}
	u, err := dst.Files.Usage(t.Context(), "a1", "ann")
	if err != nil {
		t.Fatal(err)
	}
	if want := (memoryfiles.Usage{Files: 41, Deleted: 40, Bytes: 40*memoryfiles.MaxFileBytes + 1, History: 40*memoryfiles.MaxFileBytes + 20}); u.Files != want.Files || u.Deleted != want.Deleted || u.Bytes != want.Bytes || u.History != want.History {
		t.Errorf("usage after importing an archive at the limits = %+v, want %+v", u, want)
	}
}
