package memorybank

import (
	"container/heap"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"sync"
)

// QueryWeights returns the weight of each coordinate for a scope of n
// vectors in which df[i] vectors have coordinate i non-zero: the inverse
// document frequency ln(1 + (n - df + 0.5) / (df + 0.5)). Coordinates every
// vector uses weigh least; with dense vectors all weigh the same.
func QueryWeights(df []int32, n int) []float32 {
	w := make([]float32, len(df))
	N := float64(n)
	for i, d := range df {
		f := float64(d)
		w[i] = float32(math.Log(1 + (N-f+0.5)/(f+0.5)))
	}
	return w
}

// WeightQuery returns q with each coordinate multiplied by its weight and
// the result scaled to unit length, and that length before scaling.
func WeightQuery(q, weights []float32) []float32 {
	out := make([]float32, len(q))
	var s float64
	for i := range q {
		out[i] = q[i] * weights[i]
		s += float64(out[i]) * float64(out[i])
	}
	if s > 0 {
		n := float32(1 / math.Sqrt(s))
		for i := range out {
			out[i] *= n
		}
	}
	return out
}

// Distance turns a score (the dot product of a unit-length weighted query
// with a memory's vector) into the API's distance: 1 - score, which for
// unit-length memory vectors is the cosine distance (0 identical, 2
// opposite).
func Distance(score float64) float64 { return 1 - score }

// vector is a stored vector: sparse (coordinate indexes and values) when
// most coordinates are zero, dense otherwise.
type vector struct {
	dims  int
	idx   []uint16
	val   []float32
	dense []float32
}

func newVector(v []float32) vector {
	nnz := 0
	for _, x := range v {
		if x != 0 {
			nnz++
		}
	}
	if nnz*4 > len(v) || len(v) > math.MaxUint16+1 {
		return vector{dims: len(v), dense: v}
	}
	out := vector{dims: len(v), idx: make([]uint16, 0, nnz), val: make([]float32, 0, nnz)}
	for i, x := range v {
		if x != 0 {
			out.idx = append(out.idx, uint16(i))
			out.val = append(out.val, x)
		}
	}
	return out
}

func (v vector) dot(q []float32) float64 {
	var s float32
	if v.dense != nil {
		d := v.dense
		n := min(len(d), len(q))
		i := 0
		var s0, s1, s2, s3 float32
		for ; i+4 <= n; i += 4 {
			s0 += d[i] * q[i]
			s1 += d[i+1] * q[i+1]
			s2 += d[i+2] * q[i+2]
			s3 += d[i+3] * q[i+3]
		}
		for ; i < n; i++ {
			s0 += d[i] * q[i]
		}
		return float64(s0 + s1 + s2 + s3)
	}
	for k, i := range v.idx {
		if int(i) < len(q) {
			s += v.val[k] * q[i]
		}
	}
	return float64(s)
}

// nonZero calls f for each non-zero coordinate.
func (v vector) nonZero(f func(i int)) {
	if v.dense != nil {
		for i, x := range v.dense {
			if x != 0 {
				f(i)
			}
		}
		return
	}
	for _, i := range v.idx {
		f(int(i))
	}
}

// EncodeVector returns the stored form of a vector: sparse (count, then
// uint16 index and float32 value pairs) when most coordinates are zero,
// dense (float32 values) otherwise; little-endian with a one-byte tag.
func EncodeVector(v []float32) []byte {
	if v == nil {
		return nil
	}
	vec := newVector(v)
	if vec.dense != nil {
		b := make([]byte, 1+4*len(v))
		b[0] = 'd'
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[1+4*i:], math.Float32bits(x))
		}
		return b
	}
	b := make([]byte, 5+6*len(vec.idx))
	b[0] = 's'
	binary.LittleEndian.PutUint32(b[1:], uint32(len(v)))
	for k, i := range vec.idx {
		binary.LittleEndian.PutUint16(b[5+6*k:], i)
		binary.LittleEndian.PutUint32(b[7+6*k:], math.Float32bits(vec.val[k]))
	}
	return b
}

// DecodeVector decodes EncodeVector's output.
func DecodeVector(b []byte) ([]float32, error) {
	if len(b) == 0 {
		return nil, nil
	}
	switch b[0] {
	case 'd':
		if (len(b)-1)%4 != 0 {
			return nil, errors.New("memorybank: malformed dense vector")
		}
		v := make([]float32, (len(b)-1)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[1+4*i:]))
		}
		return v, nil
	case 's':
		if len(b) < 5 || (len(b)-5)%6 != 0 {
			return nil, errors.New("memorybank: malformed sparse vector")
		}
		v := make([]float32, binary.LittleEndian.Uint32(b[1:]))
		for k := 0; 5+6*k < len(b); k++ {
			i := int(binary.LittleEndian.Uint16(b[5+6*k:]))
			if i >= len(v) {
				return nil, errors.New("memorybank: sparse vector index out of range")
			}
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[7+6*k:]))
		}
		return v, nil
	}
	return nil, errors.New("memorybank: unknown vector encoding")
}

// Matches reports whether a memory passes a filter.
func (f Filter) Matches(topics []string, metadata map[string]string) bool {
	if f.None {
		return false
	}
	for _, t := range f.Topics {
		if !slices.Contains(topics, t) {
			return false
		}
	}
	for k, v := range f.Metadata {
		if got, ok := metadata[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// VectorIndex keeps the vectors of memories in memory, by app and scope,
// for stores that search by themselves (the SQLite store). A scope is
// loaded on its first search and then kept up to date with Put after each
// committed write.
//
// Loading races with writes; generations settle it. A writer calls Touch
// for each scope it changes before it commits, and Put after. A loader
// reads Generation before it queries the store and installs its result with
// Install, which refuses it if a writer touched the scope meanwhile (the
// loader then queries again).
type VectorIndex struct {
	mu     sync.RWMutex
	scopes map[string]*scopeIndex // app + "\x00" + scope key
	gens   map[string]uint64
}

type scopeIndex struct {
	entries map[string]*indexEntry
	// df and n per embedding model: how many vectors use each coordinate.
	stats map[string]*dfStats
}

type dfStats struct {
	df []int32
	n  int
}

type indexEntry struct {
	memory *Memory // without its embedding; Fact etc. for results
	model  string
	vec    vector
}

// NewVectorIndex returns an empty index.
func NewVectorIndex() *VectorIndex {
	return &VectorIndex{scopes: map[string]*scopeIndex{}, gens: map[string]uint64{}}
}

func indexKey(app, scopeKey string) string { return app + "\x00" + scopeKey }

// Loaded reports whether a scope is in the index.
func (x *VectorIndex) Loaded(app, scopeKey string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.scopes[indexKey(app, scopeKey)] != nil
}

// Generation returns the scope's write generation, for Install.
func (x *VectorIndex) Generation(app, scopeKey string) uint64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.gens[indexKey(app, scopeKey)]
}

// Touch marks a scope as being written.
func (x *VectorIndex) Touch(app, scopeKey string) {
	x.mu.Lock()
	x.gens[indexKey(app, scopeKey)]++
	x.mu.Unlock()
}

// Install installs a scope's visible memories, read after Generation
// returned gen, unless the scope was touched since. It reports whether it
// installed them.
func (x *VectorIndex) Install(app, scopeKey string, gen uint64, memories []*Memory) bool {
	s := &scopeIndex{entries: map[string]*indexEntry{}, stats: map[string]*dfStats{}}
	for _, m := range memories {
		s.put(m)
	}
	k := indexKey(app, scopeKey)
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.gens[k] != gen {
		return false
	}
	x.scopes[k] = s
	return true
}

// Put adds or replaces a memory in its scope, if the scope is loaded;
// deleted memories are removed.
func (x *VectorIndex) Put(m *Memory) {
	x.mu.Lock()
	defer x.mu.Unlock()
	s := x.scopes[indexKey(m.App, m.Scope.Key())]
	if s == nil {
		return
	}
	s.remove(m.ID)
	if !m.Deleted {
		s.put(m)
	}
}

func (s *scopeIndex) put(m *Memory) {
	if len(m.Embedding) == 0 {
		return
	}
	c := m.clone()
	c.Embedding = nil
	e := &indexEntry{memory: c, model: m.EmbeddingModel, vec: newVector(m.Embedding)}
	s.entries[m.ID] = e
	st := s.stats[e.model]
	if st == nil {
		st = &dfStats{df: make([]int32, e.vec.dims)}
		s.stats[e.model] = st
	}
	if len(st.df) < e.vec.dims {
		st.df = append(st.df, make([]int32, e.vec.dims-len(st.df))...)
	}
	st.n++
	e.vec.nonZero(func(i int) { st.df[i]++ })
}

func (s *scopeIndex) remove(id string) {
	e := s.entries[id]
	if e == nil {
		return
	}
	delete(s.entries, id)
	st := s.stats[e.model]
	st.n--
	e.vec.nonZero(func(i int) { st.df[i]-- })
}

// Search scores the scope's visible memories of q.Model against the
// weighted query and returns the top q.K, best first. ok is false when the
// scope is not loaded.
func (x *VectorIndex) Search(q SearchQuery) (results []Scored, ok bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	s := x.scopes[indexKey(q.App, q.ScopeKey)]
	if s == nil {
		return nil, false
	}
	st := s.stats[q.Model]
	if st == nil || st.n == 0 || q.K <= 0 {
		return nil, true
	}
	df := st.df
	if len(df) > len(q.Vector) {
		df = df[:len(q.Vector)]
	}
	wq := WeightQuery(q.Vector, QueryWeights(padTo(df, len(q.Vector)), st.n))
	h := &scoredHeap{}
	for _, e := range s.entries {
		if e.model != q.Model || !e.memory.Visible(q.Now) || !q.Filter.Matches(e.memory.Topics, e.memory.Metadata) {
			continue
		}
		score := e.vec.dot(wq)
		if h.Len() < q.K {
			heap.Push(h, Scored{Memory: e.memory, Score: score})
		} else if score > (*h)[0].Score || score == (*h)[0].Score && e.memory.ID < (*h)[0].Memory.ID {
			(*h)[0] = Scored{Memory: e.memory, Score: score}
			heap.Fix(h, 0)
		}
	}
	out := make([]Scored, h.Len())
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(h).(Scored)
	}
	for i := range out {
		out[i].Memory = out[i].Memory.clone()
	}
	return out, true
}

func padTo(df []int32, n int) []int32 {
	if len(df) >= n {
		return df
	}
	return append(slices.Clone(df), make([]int32, n-len(df))...)
}

// scoredHeap is a min-heap of results (worst first), ties broken by id so
// that results are deterministic.
type scoredHeap []Scored

func (h scoredHeap) Len() int { return len(h) }
func (h scoredHeap) Less(i, j int) bool {
	if h[i].Score != h[j].Score {
		return h[i].Score < h[j].Score
	}
	return h[i].Memory.ID > h[j].Memory.ID
}
func (h scoredHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *scoredHeap) Push(x any)   { *h = append(*h, x.(Scored)) }
func (h *scoredHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// ScoreMemories ranks memories by the same rule as VectorIndex.Search, for
// stores that fetch candidates by other means.
func ScoreMemories(q SearchQuery, memories []*Memory) []Scored {
	x := NewVectorIndex()
	x.Install(q.App, q.ScopeKey, 0, memories)
	out, _ := x.Search(q)
	return out
}
