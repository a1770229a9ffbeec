package memoryfiles_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/kioku-ai/kioku/internal/memoryfilestore/sqlite"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/memoryfiles"
	"github.com/kioku-ai/kioku/memoryfiles/memoryfilestest"
)

// The conformance suite on the reference store, SQLite.
func TestConformance(t *testing.T) {
	memoryfilestest.Run(t, func(t *testing.T) memoryfiles.Store {
		db, err := sqlitedb.Open(filepath.Join(t.TempDir(), "kioku.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		s, err := sqlite.New(db)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestCleanPath(t *testing.T) {
	for in, want := range map[string]string{
		"/memories":                 "/memories",
		"/memories/":                "/memories",
		"/memories/notes.txt":       "/memories/notes.txt",
		"/memories/a/b/":            "/memories/a/b",
		"/memories/メモ/ノート.md":       "/memories/メモ/ノート.md",
		"/memories/with space/x.md": "/memories/with space/x.md",
	} {
		if got, err := memoryfiles.CleanPath(in); err != nil || got != want {
			t.Errorf("CleanPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for p := range memoryfilestest.BadPaths {
		if got, err := memoryfiles.CleanPath(p); err == nil {
			t.Errorf("CleanPath(%q) = %q, want an error", p, got)
		}
	}
}

// FuzzCleanPath checks what a path that CleanPath accepts is: within
// /memories, with no segment a file system resolves, and clean already.
func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"/memories/a", "/memories/../x", "/memories/%2e%2e", "/memories/a/./b", "/memories/．．/x", "/memories/a\\..\\b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		clean, err := memoryfiles.CleanPath(p)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "Error: The path ") || strings.ContainsAny(err.Error(), "\n\r\x00") {
				t.Fatalf("CleanPath(%q) error %q", p, err)
			}
			return
		}
		if again, err := memoryfiles.CleanPath(clean); err != nil || again != clean {
			t.Fatalf("CleanPath(%q) = %q, but CleanPath of that is %q, %v", p, clean, again, err)
		}
		if !utf8.ValidString(clean) || clean != memoryfiles.Root && !strings.HasPrefix(clean, memoryfiles.Root+"/") {
			t.Fatalf("CleanPath(%q) = %q, outside the root", p, clean)
		}
		for _, s := range strings.Split(clean, "/")[1:] {
			k := norm.NFKC.String(s)
			if s == "" || k == "." || k == ".." || strings.ContainsAny(k, `/\`) || strings.ContainsRune(s, 0) {
				t.Fatalf("CleanPath(%q) = %q, with the segment %q", p, clean, s)
			}
		}
	})
}

// BenchmarkExecute measures commands of the memory tool on the SQLite
// store (durable commits): a str_replace (read, write, revision) of a 4
// KiB file, and a view of a directory of 1,000 files.
func BenchmarkExecute(b *testing.B) {
	db, err := sqlitedb.Open(filepath.Join(b.TempDir(), "kioku.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	st, err := sqlite.New(db)
	if err != nil {
		b.Fatal(err)
	}
	svc := memoryfiles.NewService(st, memoryfiles.Config{})
	ctx := b.Context()
	run := func(in map[string]any) {
		res, err := svc.Execute(ctx, "app", "ann", in)
		if err != nil || res.IsError {
			b.Fatalf("Execute(%v) = %v, %v", in, res, err)
		}
	}
	run(map[string]any{"command": "create", "path": "/memories/notes.md", "file_text": "count: 0\n" + strings.Repeat("a line of notes about the user\n", 132)})
	b.Run("str_replace", func(b *testing.B) {
		n := 0
		for b.Loop() {
			run(map[string]any{"command": "str_replace", "path": "/memories/notes.md", "old_str": fmt.Sprintf("count: %d\n", n), "new_str": fmt.Sprintf("count: %d\n", n+1)})
			n++
		}
	})
	for i := range memoryfiles.MaxFiles - 1 {
		run(map[string]any{"command": "create", "path": fmt.Sprintf("/memories/d%02d/f%03d.md", i%50, i), "file_text": "x"})
	}
	b.Run("view_1000_files", func(b *testing.B) {
		for b.Loop() {
			run(map[string]any{"command": "view", "path": "/memories"})
		}
	})
}
