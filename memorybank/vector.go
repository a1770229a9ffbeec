package memorybank

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"time"
)

// WeightedQuery returns the query vector q weighted for a scope of n
// vectors in which df(i) vectors have coordinate i non-zero, scaled to unit
// length: coordinate i is multiplied by the inverse document frequency
// ln(1 + (n - df + 0.5) / (df + 0.5)), so coordinates every vector uses
// weigh least (with dense vectors all weigh the same). Only the weights of
// q's non-zero coordinates are computed.
func WeightedQuery(q []float32, n int, df func(i int) int32) []float32 {
	out := make([]float32, len(q))
	N := float64(n)
	var s float64
	for i, x := range q {
		if x == 0 {
			continue
		}
		f := float64(df(i))
		w := float32(math.Log(1 + (N-f+0.5)/(f+0.5)))
		out[i] = x * w
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

// vector is a vector as the cache keeps it: sparse (sorted coordinate
// indexes and their values) when most coordinates are zero, dense (idx nil,
// val holding every coordinate) otherwise.
type vector struct {
	idx  []uint16
	val  []float32
	dims int32
}

func newVector(v []float32) vector {
	nnz := 0
	for _, x := range v {
		if x != 0 {
			nnz++
		}
	}
	if nnz*4 > len(v) || len(v) > math.MaxUint16+1 {
		return vector{dims: int32(len(v)), val: slices.Clone(v)}
	}
	out := vector{dims: int32(len(v)), idx: make([]uint16, 0, nnz), val: make([]float32, 0, nnz)}
	for i, x := range v {
		if x != 0 {
			out.idx = append(out.idx, uint16(i))
			out.val = append(out.val, x)
		}
	}
	return out
}

// dense reports whether the vector holds every coordinate.
func (v vector) dense() bool { return v.idx == nil && len(v.val) > 0 }

// bytes is the heap the vector's coordinates take.
func (v vector) bytes() int64 { return int64(2*len(v.idx) + 4*len(v.val)) }

func (v vector) dot(q []float32) float64 {
	if v.dense() {
		d := v.val
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
	var s float32
	for k, i := range v.idx {
		if int(i) < len(q) {
			s += v.val[k] * q[i]
		}
	}
	return float64(s)
}

// nonZero calls f for each non-zero coordinate.
func (v vector) nonZero(f func(i int)) {
	if v.dense() {
		for i, x := range v.val {
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

// dfStats counts, for the vectors of one embedding model in a scope, how
// many there are (n) and how many use each coordinate (the document
// frequencies of WeightedQuery); or the same for the buckets of the scope's
// memories' terms (see TermStats). Kept sparse (sorted coordinates with their
// counts) while few coordinates are used, as with the offline embedder's
// hashed words in a small scope, and dense once a quarter of them are.
type dfStats struct {
	n     int32
	dims  int32
	dense []int32
	idx   []uint16
	cnt   []int32
}

// add counts a vector in (sign 1) or out (sign -1).
func (d *dfStats) add(v vector, sign int32) {
	d.n += sign
	if v.dims > d.dims {
		d.dims = v.dims
		if d.dense != nil {
			d.dense = append(d.dense, make([]int32, int(d.dims)-len(d.dense))...)
		}
	}
	v.nonZero(func(i int) {
		if d.dense != nil {
			d.dense[i] += sign
			return
		}
		k, found := slices.BinarySearch(d.idx, uint16(i))
		switch {
		case found:
			if d.cnt[k] += sign; d.cnt[k] == 0 {
				d.idx = slices.Delete(d.idx, k, k+1)
				d.cnt = slices.Delete(d.cnt, k, k+1)
			}
		case sign > 0:
			d.idx = slices.Insert(d.idx, k, uint16(i))
			d.cnt = slices.Insert(d.cnt, k, sign)
		}
	})
	if d.dense == nil && len(d.idx)*4 > int(d.dims) {
		d.dense = make([]int32, d.dims)
		for k, i := range d.idx {
			d.dense[i] = d.cnt[k]
		}
		d.idx, d.cnt = nil, nil
	}
}

// get returns how many vectors use coordinate i.
func (d *dfStats) get(i int) int32 {
	if d.dense != nil {
		if i < len(d.dense) {
			return d.dense[i]
		}
		return 0
	}
	if i > math.MaxUint16 {
		return 0
	}
	if k, found := slices.BinarySearch(d.idx, uint16(i)); found {
		return d.cnt[k]
	}
	return 0
}

// bytes is the heap the counts take (their capacity: slices grow ahead).
func (d *dfStats) bytes() int64 {
	return int64(4*cap(d.dense) + 2*cap(d.idx) + 4*cap(d.cnt))
}

// EncodeVector returns the stored form of a vector: sparse (count, then
// uint16 index and float32 value pairs) when most coordinates are zero,
// dense (float32 values) otherwise; little-endian with a one-byte tag.
func EncodeVector(v []float32) []byte {
	if v == nil {
		return nil
	}
	vec := newVector(v)
	if vec.dense() {
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

// MatchesTimes reports whether a memory's times pass a filter's bounds.
func (f Filter) MatchesTimes(event, stated time.Time) bool {
	return f.EventTime.Contains(event) && f.StatedTime.Contains(stated)
}

// Matches reports whether a memory passes a filter's topics and metadata
// (see MatchesTimes for its times).
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

// ScoreMemories ranks memories by the same rule as VectorCache.Search, for
// stores that fetch candidates by other means.
func ScoreMemories(q SearchQuery, memories []*Memory) []Scored {
	return newScopeIndex(q.App, q.ScopeKey, memories).search(q)
}
