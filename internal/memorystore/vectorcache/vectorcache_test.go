package vectorcache

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/retrieval"
	"github.com/kioku-ai/kioku/model"
)

// randomVector returns a unit vector of dims coordinates, sparse (a few
// non-zero) or dense.
func randomVector(r *rand.Rand, dims int, sparse bool) []float32 {
	v := make([]float32, dims)
	if sparse {
		for range 1 + r.IntN(5) {
			v[r.IntN(dims)] = r.Float32() + 0.1
		}
	} else {
		for i := range v {
			v[i] = r.Float32()*2 - 1
		}
	}
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	for i := range v {
		v[i] = float32(float64(v[i]) / math.Sqrt(s))
	}
	return v
}

// referenceSearch ranks memories the slow, obvious way: IDF weights from
// the visible and invisible vectors of the model, the weighted query scaled
// to unit length, dot products, best first, ties by id.
func referenceSearch(q memorydriver.SearchQuery, memories []*memorytype.Memory) []string {
	var n int
	df := make([]float64, len(q.Vector))
	for _, m := range memories {
		if m.EmbeddingModel != q.Model || m.Deleted || len(m.Embedding) == 0 {
			continue
		}
		n++
		for i, x := range m.Embedding {
			if x != 0 && i < len(df) {
				df[i]++
			}
		}
	}
	wq := make([]float64, len(q.Vector))
	var norm float64
	for i, x := range q.Vector {
		w := math.Log(1 + (float64(n)-df[i]+0.5)/(df[i]+0.5))
		wq[i] = float64(x) * w
		norm += wq[i] * wq[i]
	}
	type hit struct {
		id    string
		score float64
	}
	var hits []hit
	for _, m := range memories {
		if m.EmbeddingModel != q.Model || !m.Visible(q.Now) || len(m.Embedding) == 0 || !q.Filter.Matches(m) {
			continue
		}
		var s float64
		for i, x := range m.Embedding {
			if i < len(wq) {
				s += float64(x) * wq[i]
			}
		}
		hits = append(hits, hit{m.ID, s / math.Sqrt(norm)})
	}
	sort.Slice(hits, func(i, j int) bool {
		if math.Abs(hits[i].score-hits[j].score) > 1e-5 {
			return hits[i].score > hits[j].score
		}
		return hits[i].id < hits[j].id
	})
	var ids []string
	for i := 0; i < len(hits) && i < q.K; i++ {
		ids = append(ids, hits[i].id)
	}
	return ids
}

// ids returns the ids of the memories the dense side ranked, in order.
func ids(scored []retrieval.Ranked[*memorytype.Memory]) []string {
	var out []string
	for _, s := range scored {
		if s.DenseRank > 0 {
			out = append(out, s.Item.ID)
		}
	}
	return out
}

// ranks describes results with both sides' ranks and scores.
func ranks(scored []retrieval.Ranked[*memorytype.Memory]) []string {
	var out []string
	for _, s := range scored {
		out = append(out, fmt.Sprintf("%s:%d:%d:%v:%v", s.Item.ID, s.DenseRank, s.LexicalRank, s.Score, s.Lexical))
	}
	return out
}

var words = strings.Fields("tea coffee Kyoto Osaka tennis piano sister brother garden paints ladder hiking")

func randomFact(r *rand.Rand) string {
	var b strings.Builder
	for range 1 + r.IntN(5) {
		b.WriteString(words[r.IntN(len(words))] + " ")
	}
	return b.String()
}

// memStore is a scope's memories as a store would load them.
type memStore struct {
	mu   sync.Mutex
	live map[string]*memorytype.Memory
	// loads counts the loads.
	loads int
}

func (m *memStore) load(context.Context) ([]*memorytype.Memory, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.loads++
	return slices.Collect(maps.Values(m.live)), nil
}

// write applies a memory the way a store's Write does: Touch, commit, Put.
func (m *memStore) write(c *Cache, mem *memorytype.Memory) {
	c.Touch(mem.App, mem.Scope.Key())
	m.mu.Lock()
	if m.live == nil {
		m.live = map[string]*memorytype.Memory{}
	}
	if mem.Deleted {
		delete(m.live, mem.ID)
	} else {
		m.live[mem.ID] = mem
	}
	m.mu.Unlock()
	c.Put(mem)
}

func search(t *testing.T, c *Cache, q memorydriver.SearchQuery, st *memStore) []retrieval.Ranked[*memorytype.Memory] {
	t.Helper()
	res, err := c.Search(t.Context(), q, st.load)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestVectorCacheMatchesReference: a scope kept up to date write by write
// (puts, replacements, deletions, another model, expired and filtered
// memories) ranks exactly as a reference computed from scratch and as a
// scope loaded afresh, for sparse and dense vectors, and keeps doing so
// when it is evicted and loaded again. The lexical side's ranks and scores
// match a fresh load too (the document frequencies of terms do not drift).
func TestVectorCacheMatchesReference(t *testing.T) {
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for _, sparse := range []bool{true, false} {
		t.Run(fmt.Sprintf("sparse=%v", sparse), func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			const dims = 64
			c := New(1 << 30)
			st := &memStore{}
			for step := range 400 {
				id := fmt.Sprintf("m%03d", r.IntN(120))
				m := &memorytype.Memory{App: "a", ID: id, Scope: memorytype.Scope{"user_id": "u"}, Embedding: randomVector(r, dims, sparse), EmbeddingModel: "m1", Fact: randomFact(r)}
				switch r.IntN(10) {
				case 0:
					m.Deleted = true
				case 1:
					m.EmbeddingModel = "m2"
				case 2:
					m.ExpireTime = now.Add(-time.Minute)
				case 3:
					m.Topics = []string{"pets"}
				}
				st.write(c, m)
				if step%50 != 49 {
					continue
				}
				all, _ := st.load(t.Context())
				for _, filter := range []memorytype.Filter{{}, {Topics: []string{"pets"}}} {
					q := memorydriver.SearchQuery{App: "a", ScopeKey: "user_id=u", Vector: randomVector(r, dims, sparse), Model: "m1", Terms: model.OfflineTerms(randomFact(r)), K: 10, Filter: filter, Now: now}
					got := search(t, c, q, st)
					if want := referenceSearch(q, all); !slices.Equal(ids(got), want) {
						t.Fatalf("step %d, filter %+v: cache ranks %v, reference %v", step, filter, ids(got), want)
					}
					fresh := Score(q, all)
					if !slices.Equal(ranks(fresh), ranks(got)) {
						t.Fatalf("step %d: a scope loaded afresh ranks %v, the updated one %v (document frequencies drifted)", step, ranks(fresh), ranks(got))
					}
					// Evicted and loaded again: the very same results.
					evicted := New(1 << 30)
					again := search(t, evicted, q, st)
					if diff := cmp.Diff(got, again); diff != "" {
						t.Fatalf("step %d: after a reload (-kept +reloaded):\n%s", step, diff)
					}
				}
			}
			if c.Stats().Misses != 1 {
				t.Errorf("misses = %d; the scope, once loaded, stays", c.Stats().Misses)
			}
		})
	}
}

// TestVectorCacheEvictsLeastRecentlySearched fills a small cache with
// scopes: it stays within its budget, evicts the least recently searched
// scope first, and every search, hit or miss, returns what a cache that
// keeps everything returns.
func TestVectorCacheEvictsLeastRecentlySearched(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	const scopes = 40
	stores := make([]*memStore, scopes)
	big := New(1 << 30)
	for i := range stores {
		stores[i] = &memStore{}
		for j := range 5 {
			stores[i].write(big, &memorytype.Memory{App: "a", ID: fmt.Sprint("m", j), Scope: memorytype.Scope{"user_id": fmt.Sprint(i)}, Fact: "a fact of some length",
				Embedding: randomVector(r, 2048, true), EmbeddingModel: "m1", Sources: []memorytype.Source{{Session: "apps/a/users/u/sessions/s", EventIDs: []string{"e1"}}}})
		}
	}
	query := func(i int) memorydriver.SearchQuery {
		return memorydriver.SearchQuery{App: "a", ScopeKey: memorytype.Scope{"user_id": fmt.Sprint(i)}.Key(), Vector: randomVector(r, 2048, true), Model: "m1", K: 3, Now: now}
	}
	// The size of one scope, to size the small cache at 10 of them.
	one := New(1 << 30)
	search(t, one, query(0), stores[0])
	per := one.Stats().Bytes
	if per < 2048 || per > 8192 {
		t.Fatalf("one scope of 5 sparse memories is estimated at %d bytes", per)
	}
	c := New(10*per + per/2)
	for i := range scopes {
		q := query(i)
		if diff := cmp.Diff(search(t, big, q, stores[i]), search(t, c, q, stores[i])); diff != "" {
			t.Fatalf("scope %d (-kept +small cache):\n%s", i, diff)
		}
		if st := c.Stats(); st.Bytes > st.Budget {
			t.Fatalf("after scope %d: %d bytes held, budget %d", i, st.Bytes, st.Budget)
		}
	}
	st := c.Stats()
	if st.Scopes != 10 || st.Misses != scopes || st.Hits != 0 || st.Evictions != scopes-10 {
		t.Fatalf("stats = %+v; want the last 10 scopes held, %d misses and %d evictions", st, scopes, scopes-10)
	}
	// Scope 30 is the least recently searched of those held; searching it
	// makes 31 the next to go.
	search(t, c, query(30), stores[30])
	search(t, c, query(0), stores[0])
	if !c.Loaded("a", memorytype.Scope{"user_id": "30"}.Key()) || c.Loaded("a", memorytype.Scope{"user_id": "31"}.Key()) {
		t.Fatal("the least recently searched scope was not the one evicted")
	}
	if st := c.Stats(); st.Hits != 1 || st.Misses != scopes+1 {
		t.Fatalf("stats = %+v; want one hit (scope 30) and one more miss (scope 0)", st)
	}
	// A write to a held scope is seen by its next search, without a load.
	loads := stores[0].loads
	stores[0].write(c, &memorytype.Memory{App: "a", ID: "m0", Scope: memorytype.Scope{"user_id": "0"}, Deleted: true})
	for _, s := range search(t, c, memorydriver.SearchQuery{App: "a", ScopeKey: memorytype.Scope{"user_id": "0"}.Key(), Vector: randomVector(r, 2048, false), Model: "m1", K: 10, Now: now}, stores[0]) {
		if s.Item.ID == "m0" {
			t.Fatal("a deleted memory is still found")
		}
	}
	if stores[0].loads != loads {
		t.Fatal("a held scope was loaded again")
	}
	// A cache of no budget keeps nothing and still answers.
	none := New(0)
	if got := search(t, none, query(1), stores[1]); len(got) != 3 || none.Stats().Scopes != 0 || none.Stats().Bytes != 0 {
		t.Fatalf("cache of no budget: %d results, %+v", len(got), none.Stats())
	}
}

// A load is not kept when a writer touched the scope after the load read
// its generation; the search still answers from it.
func TestVectorCacheInstallRace(t *testing.T) {
	c := New(1 << 20)
	st := &memStore{}
	q := memorydriver.SearchQuery{App: "a", ScopeKey: "s", K: 1}
	raced := false
	load := func(ctx context.Context) ([]*memorytype.Memory, error) {
		if !raced {
			raced = true
			c.Touch("a", "s") // a writer, between the generation read and the install
		}
		return st.load(ctx)
	}
	if _, err := c.Search(t.Context(), q, load); err != nil {
		t.Fatal(err)
	}
	if st.loads != 2 || !c.Loaded("a", "s") {
		t.Fatalf("%d loads, loaded %v; want the stale load dropped and the second kept", st.loads, c.Loaded("a", "s"))
	}
}

// TestVectorCacheConcurrent searches, writes and evicts at once (run with
// -race): afterwards every scope ranks as its memories say.
func TestVectorCacheConcurrent(t *testing.T) {
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	const scopes = 8
	stores := make([]*memStore, scopes)
	for i := range stores {
		stores[i] = &memStore{}
	}
	c := New(3 * 4096) // room for a few scopes: constant eviction
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 9))
			for range 300 {
				i := r.IntN(scopes)
				scope := memorytype.Scope{"user_id": fmt.Sprint(i)}
				if r.IntN(2) == 0 {
					stores[i].write(c, &memorytype.Memory{App: "a", ID: fmt.Sprint("m", r.IntN(6)), Scope: scope, Embedding: randomVector(r, 256, true), EmbeddingModel: "m1", Deleted: r.IntN(5) == 0})
					continue
				}
				if _, err := c.Search(t.Context(), memorydriver.SearchQuery{App: "a", ScopeKey: scope.Key(), Vector: randomVector(r, 256, true), Model: "m1", K: 3, Now: now}, stores[i].load); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	r := rand.New(rand.NewPCG(7, 7))
	for i := range scopes {
		q := memorydriver.SearchQuery{App: "a", ScopeKey: memorytype.Scope{"user_id": fmt.Sprint(i)}.Key(), Vector: randomVector(r, 256, false), Model: "m1", K: 6, Now: now}
		all, _ := stores[i].load(t.Context())
		if diff := cmp.Diff(Score(q, all), search(t, c, q, stores[i])); diff != "" {
			t.Fatalf("scope %d after concurrent writes (-loaded afresh +cache):\n%s", i, diff)
		}
	}
	if st := c.Stats(); st.Bytes > st.Budget || st.Evictions == 0 {
		t.Fatalf("stats = %+v", st)
	}
}

// TestVectorCacheFootprint: the heap a full cache holds is within a small
// factor of its budget (the estimate is close to what Go allocates).
func TestVectorCacheFootprint(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	const budget = 2 << 20
	c := New(budget)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 4000 {
		var mems []*memorytype.Memory
		for j := range 3 {
			mems = append(mems, &memorytype.Memory{App: "app", ID: fmt.Sprintf("%020d", j), Scope: memorytype.Scope{"user_id": fmt.Sprint(i)}, Fact: "The user likes green tea in the morning and coffee after lunch.",
				Embedding: randomVector(r, 2048, true), EmbeddingModel: "kioku-offline-v1", Sources: []memorytype.Source{{Session: "apps/app/users/u/sessions/s", EventIDs: []string{"e1", "e2"}}}})
		}
		q := memorydriver.SearchQuery{App: "app", ScopeKey: memorytype.Scope{"user_id": fmt.Sprint(i)}.Key(), Vector: mems[0].Embedding, Model: "kioku-offline-v1", K: 3}
		if _, err := c.Search(t.Context(), q, func(context.Context) ([]*memorytype.Memory, error) { return mems, nil }); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	st := c.Stats()
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d scopes held, estimated %d bytes (%d a scope), heap grew by %d", st.Scopes, st.Bytes, st.Bytes/int64(st.Scopes), held)
	// About 2.4 KB a scope: 1.9 KB of memories and vectors, the rest the
	// facts' terms (words and concepts: this fact has three concepts) and
	// their document frequencies (lexical retrieval).
	if st.Bytes > budget || st.Scopes < 850 || held > 2*budget {
		t.Fatalf("%d scopes, estimated %d bytes, heap grew by %d; want at least 850 scopes within the %d-byte budget and the heap within twice it", st.Scopes, st.Bytes, held, budget)
	}
}
