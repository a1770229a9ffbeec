package sqlite_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kioku-ai/kioku/blocks"
	"github.com/kioku-ai/kioku/blocks/blockstest"
	"github.com/kioku-ai/kioku/internal/blockstore/sqlite"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/internal/sqlitetest"
)

// on returns a store on db.
func on(t *testing.T, db *sqlitedb.DB) blocks.Store {
	s, err := sqlite.New(db)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	blockstest.Run(t, func(t *testing.T) blocks.Store { return on(t, sqlitetest.Open(t)) })
}

// TestConformanceEncrypted runs the suite on an encrypted database.
func TestConformanceEncrypted(t *testing.T) {
	blockstest.Run(t, func(t *testing.T) blocks.Store { return on(t, sqlitetest.OpenEncrypted(t)) })
}

// canary is a word that block values hold and no stored byte may in an
// encrypted database.
const canary = "zqxcanaryblock"

// holding returns the files of dir whose bytes hold canary.
func holding(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(canary)) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestEncryptedValuesLeaveNoTrace: in an encrypted database no byte of
// the file, its log or its shared memory holds a block's value or a
// revision's, while it is open nor after it closed, and the blocks read
// back as written; a plain database does hold them (the check sees it).
func TestEncryptedValuesLeaveNoTrace(t *testing.T) {
	for _, encrypted := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "encrypted"}[encrypted], func(t *testing.T) {
			dir := t.TempDir()
			db, err := sqlitedb.Open(filepath.Join(dir, "kioku.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if encrypted {
				sqlitetest.Encrypt(t, db, sqlitetest.NewKey(t))
			}
			h := blockstest.NewHarness(t, on(t, db))
			k := blocks.Key{App: "app1", User: "ann", Label: "human"}
			h.Put(k, "Password hint: "+canary, 0)
			if _, err := h.Svc.Append(h.Ctx, k, "Also "+canary+"2."); err != nil {
				t.Fatal(err)
			}
			h.Put(blocks.Key{App: "app1", Label: "persona"}, canary, 0)
			if got := h.Value(k); got != "Password hint: "+canary+"\nAlso "+canary+"2." {
				t.Fatalf("value %q", got)
			}
			revs, _, err := h.Svc.ListRevisions(h.Ctx, k, 0, "")
			if err != nil || len(revs) != 2 || revs[1].Value != "Password hint: "+canary {
				t.Fatalf("revisions %+v, %v", revs, err)
			}
			check := func(when string) {
				t.Helper()
				found := holding(t, dir)
				if encrypted && len(found) > 0 {
					t.Errorf("%s, %v hold the canary of a block's value", when, found)
				}
				if !encrypted && !slices.Contains(found, "kioku.db") && !slices.Contains(found, "kioku.db-wal") {
					t.Errorf("%s, no file holds the canary of a plain database's value: the check sees nothing", when)
				}
			}
			check("while open")
			db.Close()
			check("after closing")
		})
	}
}
