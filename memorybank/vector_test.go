package memorybank

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"
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
func referenceSearch(q SearchQuery, memories []*Memory) []string {
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
		if m.EmbeddingModel != q.Model || !m.Visible(q.Now) || len(m.Embedding) == 0 || !q.Filter.Matches(m.Topics, m.Metadata) {
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

func ids(scored []Scored) []string {
	var out []string
	for _, s := range scored {
		out = append(out, s.Memory.ID)
	}
	return out
}

// TestVectorIndexMatchesReference: an index kept up to date write by write
// (puts, replacements, deletions, another model, expired and filtered
// memories) ranks exactly as a reference computed from scratch, for sparse
// and dense vectors.
func TestVectorIndexMatchesReference(t *testing.T) {
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for _, sparse := range []bool{true, false} {
		t.Run(fmt.Sprintf("sparse=%v", sparse), func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			const dims = 64
			x := NewVectorIndex()
			if !x.Install("a", "user_id=u", x.Generation("a", "user_id=u"), nil) {
				t.Fatal("Install of an untouched scope refused")
			}
			live := map[string]*Memory{}
			for step := range 400 {
				id := fmt.Sprintf("m%03d", r.IntN(120))
				m := &Memory{App: "a", ID: id, Scope: Scope{"user_id": "u"}, Embedding: randomVector(r, dims, sparse), EmbeddingModel: "m1"}
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
				x.Put(m)
				if m.Deleted {
					delete(live, id)
				} else {
					live[id] = m
				}
				if step%50 != 49 {
					continue
				}
				all := slices.Collect(func(yield func(*Memory) bool) {
					for _, m := range live {
						if !yield(m) {
							return
						}
					}
				})
				for _, filter := range []Filter{{}, {Topics: []string{"pets"}}} {
					q := SearchQuery{App: "a", ScopeKey: "user_id=u", Vector: randomVector(r, dims, sparse), Model: "m1", K: 10, Filter: filter, Now: now}
					got, ok := x.Search(q)
					if !ok {
						t.Fatal("Search: scope not loaded")
					}
					if want := referenceSearch(q, all); !slices.Equal(ids(got), want) {
						t.Fatalf("step %d, filter %+v: index ranks %v, reference %v", step, filter, ids(got), want)
					}
					if fresh := ScoreMemories(q, all); !slices.Equal(ids(fresh), ids(got)) {
						t.Fatalf("step %d: an index built fresh ranks %v, the updated one %v (document frequencies drifted)", step, ids(fresh), ids(got))
					}
				}
			}
		})
	}
}

// A loader's result is refused when a writer touched the scope after the
// loader read its generation.
func TestVectorIndexInstallRace(t *testing.T) {
	x := NewVectorIndex()
	gen := x.Generation("a", "s")
	x.Touch("a", "s")
	if x.Install("a", "s", gen, nil) || x.Loaded("a", "s") {
		t.Fatal("a stale load was installed")
	}
	if !x.Install("a", "s", x.Generation("a", "s"), nil) || !x.Loaded("a", "s") {
		t.Fatal("a current load was refused")
	}
	if _, ok := x.Search(SearchQuery{App: "a", ScopeKey: "other", K: 1}); ok {
		t.Error("Search of a scope never loaded reports ok")
	}
}

func TestVectorEncoding(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, v := range [][]float32{randomVector(r, 768, true), randomVector(r, 768, false), {0, 0, 0}, {}} {
		b := EncodeVector(v)
		got, err := DecodeVector(b)
		if err != nil || !slices.Equal(got, v) {
			t.Fatalf("round trip of %d dims (tag %q): %v", len(v), b[:min(1, len(b))], err)
		}
	}
	if sparse := EncodeVector(randomVector(r, 768, true)); sparse[0] != 's' || len(sparse) > 5+6*5 {
		t.Errorf("a vector of at most 5 non-zero coordinates takes %d bytes, tag %q; want the sparse form", len(sparse), sparse[0])
	}
	for _, bad := range [][]byte{{'d', 1, 2}, {'s', 1}, {'s', 1, 0, 0, 0, 9, 0, 0, 0, 0, 0}, {'x'}} {
		if _, err := DecodeVector(bad); err == nil {
			t.Errorf("DecodeVector(%v) accepted a malformed vector", bad)
		}
	}
}

func TestScopeKeys(t *testing.T) {
	s := Scope{"user_id": "ann&bo=1", "agent": "é x"}
	if k := s.Key(); k != "agent=%C3%A9+x&user_id=ann%26bo%3D1" {
		t.Errorf("Key = %q", k)
	}
	back := ParseScopeKey(s.Key())
	if len(back) != 2 || back["user_id"] != "ann&bo=1" || back["agent"] != "é x" {
		t.Errorf("ParseScopeKey(Key) = %v, want %v", back, s)
	}
	if (Scope{"b": "1", "a": "2"}).Key() != (Scope{"a": "2", "b": "1"}).Key() {
		t.Error("Key depends on map order")
	}
}
