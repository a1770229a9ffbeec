package sqlite

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/internal/sqlitedb"
)

// TestQueryPlans checks that the hot queries search by their index and
// never scan a table.
func TestQueryPlans(t *testing.T) {
	db, err := sqlitedb.Open(filepath.Join(t.TempDir(), "kioku.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := New(db, Options{}); err != nil {
		t.Fatal(err)
	}
	for name, q := range map[string]string{
		"scope load": scopeLoadQuery,
		"queued":     queuedQuery,
		"pending":    pendingQuery,
		"busy":       busyQuery,
		"finished":   finishedSelect,
	} {
		args := make([]any, strings.Count(q, "?"))
		rows, err := db.Read().Query("EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		joined := strings.Join(plan, "; ")
		if strings.Contains(joined, "SCAN") || !strings.Contains(joined, "INDEX") {
			t.Errorf("%s: plan %q scans instead of searching an index", name, joined)
		}
	}
}
