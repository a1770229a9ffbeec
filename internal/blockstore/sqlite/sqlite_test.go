package sqlite_test

import (
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

// TestEncryptedValuesLeaveNoTrace: in an encrypted database no byte of
// the file, its log or its shared memory holds a block's value or a
// revision's, while it is open nor after it closed, and the blocks read
// back as written; a plain database does hold them (the check sees it).
func TestEncryptedValuesLeaveNoTrace(t *testing.T) {
	sqlitetest.LeavesNoTrace(t, canary, "a block's value", func(t *testing.T, db *sqlitedb.DB) {
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
	})
}
