package firestore

import (
	"encoding/json"
	"flag"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kioku-ai/kioku/internal/golden"
)

var update = flag.Bool("update", false, "rewrite testdata/scope-stats.json")

// TestScopeStatsGolden: the body of a scope's statistics document.
func TestScopeStatsGolden(t *testing.T) {
	st := scopeStats{"kioku-offline-v2": {N: 3, DF: []int32{0, 2, 1, 3}}, "text-embedding-005": {N: 1, DF: []int32{1, 1}}}
	got, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	want := golden.Check(t, filepath.Join("testdata", "scope-stats.json"), got, *update)
	var back scopeStats
	if err := json.Unmarshal(want, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(st, back); diff != "" {
		t.Errorf("decoded (-sample +golden):\n%s", diff)
	}
}
