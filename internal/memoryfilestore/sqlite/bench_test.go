package sqlite_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/internal/sqlitetest"
	"github.com/kioku-ai/kioku/memoryfiles"
)

// BenchmarkExecute measures commands of the memory tool on the SQLite
// store (durable commits): a str_replace (read, write, revision) of a 4
// KiB file, and a view of a directory of 1,000 files.
func BenchmarkExecute(b *testing.B) {
	svc := memoryfiles.NewService(on(b, sqlitetest.Open(b)), memoryfiles.Config{})
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
