package memoryfiles_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/kioku-ai/kioku/internal/memoryfilestore/memstore"
	"github.com/kioku-ai/kioku/memoryfiles"
	"github.com/kioku-ai/kioku/memoryfiles/memoryfilestest"
)

// TestConformance runs the suite here on the in-memory store; the
// durable stores run it too (the SQLite one on a file, encrypted and not,
// the Firestore one on the emulator).
func TestConformance(t *testing.T) {
	memoryfilestest.Run(t, func(*testing.T) *memstore.Store { return memstore.New() })
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
