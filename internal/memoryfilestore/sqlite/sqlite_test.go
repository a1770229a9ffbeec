package sqlite_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/internal/memoryfilestore/sqlite"
	"github.com/kioku-ai/kioku/internal/seal"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/internal/sqlitetest"
	"github.com/kioku-ai/kioku/memoryfiles"
	"github.com/kioku-ai/kioku/memoryfiles/memoryfilestest"
)

// open returns a store on a fresh database file.
func open(t *testing.T) memoryfiles.Store { return on(t, sqlitetest.Open(t)) }

// on returns a store on db.
func on(t testing.TB, db *sqlitedb.DB) memoryfiles.Store {
	s, err := sqlite.New(db)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	memoryfilestest.Run(t, open)
}

// TestConformanceEncrypted runs the suite on an encrypted database.
func TestConformanceEncrypted(t *testing.T) {
	memoryfilestest.Run(t, func(t *testing.T) memoryfiles.Store { return on(t, sqlitetest.OpenEncrypted(t)) })
}

// canary is a word that a path holds and no stored byte may.
const canary = "zqxcanarypath"

// TestEncryptedPathsLeaveNoTrace is issue 36's finding 9: the model
// chooses memory file paths, so an encrypted database must not keep them
// in the clear. Files whose paths hold a canary are created, edited,
// renamed as a directory, deleted and listed; in an encrypted database
// every command answers as in a plain one, and no byte of the database,
// its log or its shared memory holds the canary while it is open nor
// after it closed; a plain database does (the check sees it).
func TestEncryptedPathsLeaveNoTrace(t *testing.T) {
	sqlitetest.LeavesNoTrace(t, canary, "a path", func(t *testing.T, db *sqlitedb.DB) {
		h := memoryfilestest.NewHarness(t, on(t, db))
		d := "/memories/" + canary
		h.Create(d+"/notes.md", "likes tea\n")
		h.Create(d+"/plans.md", "a trip\n")
		h.OK(map[string]any{"command": "str_replace", "path": d + "/notes.md", "old_str": "tea", "new_str": "green tea"})
		h.OK(map[string]any{"command": "rename", "old_path": d, "new_path": d + "-moved"})
		h.OK(map[string]any{"command": "delete", "path": d + "-moved/plans.md"})
		h.Want(map[string]any{"command": "create", "path": d + "-moved/notes.md", "file_text": "again"},
			"Error: File "+d+"-moved/notes.md already exists", true)
		if got, want := h.Paths("ann"), []string{d + "-moved/notes.md"}; !slices.Equal(got, want) {
			t.Fatalf("paths %q, want %q", got, want)
		}
		if got := h.OK(map[string]any{"command": "view", "path": d + "-moved"}); !strings.Contains(got, "notes.md") || strings.Contains(got, "plans.md") {
			t.Fatalf("view of the directory:\n%s", got)
		}
		if got, _ := h.Content("ann", d+"-moved/notes.md"); got != "likes green tea\n" {
			t.Fatalf("content %q", got)
		}
		f, err := h.Store.FindFile(h.Ctx, "app1", "ann", d+"-moved/notes.md")
		if err != nil {
			t.Fatal(err)
		}
		revs, err := h.Store.ListRevisions(h.Ctx, "app1", "ann", f.ID, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(revs) != 3 || revs[0].Path != d+"-moved/notes.md" || revs[2].Path != d+"/notes.md" {
			t.Fatalf("revisions %+v", revs)
		}
	})
}

// TestEncryptedPathsSealedOnUpgrade: an encrypted database whose files and
// revisions kept their paths in the clear (the schema before paths were
// sealed) has them sealed when the store opens on it, and every lookup,
// listing and revision still finds them; the canary is gone from the
// file.
func TestEncryptedPathsSealedOnUpgrade(t *testing.T) {
	dir := t.TempDir()
	db, err := sqlitedb.Open(filepath.Join(dir, "kioku.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sqlitetest.Encrypt(t, db, sqlitetest.NewKey(t))
	if err := db.Migrate("memoryfiles", []string{sqlite.SchemaV1}); err != nil {
		t.Fatal(err)
	}
	// The rows as the first schema's store wrote them: contents sealed,
	// paths not.
	k := db.Keyring()
	p := "/memories/" + canary + "/notes.md"
	content, err := k.SealString("app1", seal.At("memory_files.content", "app1", "ann", "f1"), "likes tea\n")
	if err != nil {
		t.Fatal(err)
	}
	err = db.Write(t.Context(), func(tx *sql.Tx) error {
		if _, err := tx.Exec(`INSERT INTO memory_file_usages (app, user_id, files, deleted, bytes, version) VALUES ('app1', 'ann', 1, 0, 10, 2)`); err != nil {
			return err
		}
		if _, err := tx.Exec(`INSERT INTO memory_files (app, user_id, id, path, content, size, revision, create_ns, update_ns, deleted) VALUES ('app1', 'ann', 'f1', ?, ?, 10, 2, 1, 2, 0)`, p, content); err != nil {
			return err
		}
		for n, path := range []string{"/memories/" + canary + ".md", p} {
			c, err := k.SealString("app1", seal.At("memory_file_revisions.content", "app1", "ann", "f1", strconv.Itoa(n+1)), "likes tea\n")
			if err != nil {
				return err
			}
			if _, err := tx.Exec(`INSERT INTO memory_file_revisions (app, user_id, file_id, number, action, path, content, size, create_ns) VALUES ('app1', 'ann', 'f1', ?, ?, ?, ?, 10, ?)`,
				n+1, []string{"CREATED", "RENAMED"}[n], path, c, n+1); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	h := memoryfilestest.NewHarness(t, on(t, db))
	if got, ok := h.Content("ann", p); !ok || got != "likes tea\n" {
		t.Fatalf("FindFile(%s) after the upgrade = %q, %v", p, got, ok)
	}
	if got := h.Paths("ann"); !slices.Equal(got, []string{p}) {
		t.Fatalf("paths %q", got)
	}
	h.Want(map[string]any{"command": "create", "path": p, "file_text": "again"}, "Error: File "+p+" already exists", true)
	revs, err := h.Store.ListRevisions(h.Ctx, "app1", "ann", "f1", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(revs) != 2 || revs[0].Path != p || revs[1].Path != "/memories/"+canary+".md" {
		t.Fatalf("revisions %+v", revs)
	}
	db.Close()
	if found := sqlitetest.Holding(t, dir, canary); len(found) > 0 {
		t.Fatalf("after the upgrade, %v hold the canary of a path", found)
	}
}

// BenchmarkListFiles lists a page of 100 of a user's 1,000 files (the
// limit), in a plain and an encrypted database: the encrypted one opens
// every path and orders them in memory.
func BenchmarkListFiles(b *testing.B) {
	for _, encrypted := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "encrypted"}[encrypted], func(b *testing.B) {
			db := sqlitetest.Open(b)
			if encrypted {
				sqlitetest.Encrypt(b, db, sqlitetest.NewKey(b))
			}
			s, err := sqlite.New(db)
			if err != nil {
				b.Fatal(err)
			}
			svc := memoryfiles.NewService(s, memoryfiles.Config{})
			for i := range memoryfiles.MaxFiles {
				input := map[string]any{"command": "create", "path": fmt.Sprintf("/memories/d%d/f%03d.md", i%10, i), "file_text": "x\n"}
				if res, err := svc.Execute(b.Context(), "app1", "ann", input); err != nil || res.IsError {
					b.Fatal(err, res)
				}
			}
			q := memoryfiles.ListQuery{App: "app1", User: "ann", Dir: "/memories/d3", AfterPath: "/memories/d3/f503.md", Limit: 100}
			b.ResetTimer()
			for b.Loop() {
				files, err := s.ListFiles(b.Context(), q)
				if err != nil || len(files) != 50 {
					b.Fatal(len(files), err)
				}
			}
		})
	}
}
