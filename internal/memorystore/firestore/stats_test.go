package firestore

import (
	"encoding/json"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kioku-ai/kioku/internal/firestoretest"
	"github.com/kioku-ai/kioku/internal/golden"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/model"
)

// TestScopeStatsGolden: the body of a scope's statistics document.
func TestScopeStatsGolden(t *testing.T) {
	st := scopeStats{"kioku-offline-v2": {N: 3, DF: []int32{0, 2, 1, 3}}, "text-embedding-005": {N: 1, DF: []int32{1, 1}}}
	got, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	want := golden.Check(t, filepath.Join("testdata", "scope-stats.json"), got)
	var back scopeStats
	if err := json.Unmarshal(want, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(st, back); diff != "" {
		t.Errorf("decoded (-sample +golden):\n%s", diff)
	}
}

// TestStatsAfterTermsVersion: a memory document whose terms are of an
// older terms version was counted in its scope's term statistics with the
// terms it holds; rewriting, importing or deleting it takes those out, so
// that the statistics count each memory once, with its current terms.
func TestStatsAfterTermsVersion(t *testing.T) {
	c, _ := firestoretest.NewClient(t)
	ctx := t.Context()
	s := New(c, Options{})
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	const fact = "The user bought a kiln in May."
	// The terms an older version gave the fact (other words than today's).
	oldIDs := termIDs("The user purchased an oven for pottery.")
	buckets := func(ids []int64) map[int]int32 {
		out := map[int]int32{}
		for _, id := range ids {
			out[int(id%model.OfflineDimensions)] = 1
		}
		return out
	}
	// stored writes a memory, in a scope of its own, as a server of the
	// older version left it: its document with the old terms, the scope's
	// statistics counting them.
	stored := func(id string) *memorytype.Memory {
		scope := memorytype.Scope{"user_id": id}
		m := &memorytype.Memory{App: "app1", ID: id, Fact: fact, Scope: scope, CreateTime: now, UpdateTime: now, Revision: 1}
		d, err := toDoc(m)
		if err != nil {
			t.Fatal(err)
		}
		d.Terms, d.TermsVersion = oldIDs, "kioku-offline-v2"
		if _, err := s.memories("app1").Doc(id).Set(ctx, d); err != nil {
			t.Fatal(err)
		}
		st := scopeStats{}
		ts := st.entry(termsKey, model.OfflineDimensions)
		ts.N = 1
		for b := range buckets(oldIDs) {
			ts.DF[b] = 1
		}
		body, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.statsRef("app1", scope.Key()).Set(ctx, map[string]any{"scope_key": scope.Key(), "body": string(body)}); err != nil {
			t.Fatal(err)
		}
		return m
	}
	// counts returns the term statistics of a memory's scope: the count of
	// memories and the buckets counted (nil when the document is gone).
	counts := func(id string) (int, map[int]int32) {
		st, err := readStats(s.statsRef("app1", memorytype.Scope{"user_id": id}.Key()).Get(ctx))
		if err != nil {
			t.Fatal(err)
		}
		ts := st[termsKey]
		if ts == nil {
			return 0, nil
		}
		out := map[int]int32{}
		for b, n := range ts.DF {
			if n != 0 {
				out[b] = n
			}
		}
		return ts.N, out
	}
	wantNow := buckets(termIDs(fact))

	m := stored("rewritten")
	if err := s.Write(ctx, &memorydriver.Write{App: "app1", Now: now, Changes: []memorydriver.Change{{Memory: m, ExpectRevision: 1}}}); err != nil {
		t.Fatal(err)
	}
	if n, got := counts("rewritten"); n != 1 || !maps.Equal(got, wantNow) {
		t.Errorf("after a Write of the memory: %d memories, buckets %v; want 1 with %v", n, got, wantNow)
	}

	m = stored("imported")
	m.Revision, m.UpdateTime = 2, now.Add(time.Hour)
	if _, _, err := s.ImportMemory(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
	if n, got := counts("imported"); n != 1 || !maps.Equal(got, wantNow) {
		t.Errorf("after an import of the memory: %d memories, buckets %v; want 1 with %v", n, got, wantNow)
	}

	stored("deleted")
	if err := s.DeleteMemories(ctx, "app1", []string{"deleted"}); err != nil {
		t.Fatal(err)
	}
	if n, got := counts("deleted"); n != 0 || got != nil {
		t.Errorf("after the memory's deletion: %d memories, buckets %v; want the statistics gone", n, got)
	}
}
