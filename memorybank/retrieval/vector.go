package retrieval

import (
	"math"
	"slices"
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

// Vector is a vector in a compact form, as a store keeps it in memory:
// sparse (sorted coordinate indexes and their values) when most
// coordinates are zero, dense (every coordinate) otherwise.
type Vector struct {
	idx  []uint16
	val  []float32
	dims int32
}

// NewVector returns the compact form of v.
func NewVector(v []float32) Vector {
	nnz := 0
	for _, x := range v {
		if x != 0 {
			nnz++
		}
	}
	if nnz*4 > len(v) || len(v) > math.MaxUint16+1 {
		return Vector{dims: int32(len(v)), val: slices.Clone(v)}
	}
	out := Vector{dims: int32(len(v)), idx: make([]uint16, 0, nnz), val: make([]float32, 0, nnz)}
	for i, x := range v {
		if x != 0 {
			out.idx = append(out.idx, uint16(i))
			out.val = append(out.val, x)
		}
	}
	return out
}

// SparseVector returns the vector of dims coordinates whose non-zero ones
// are at the sorted indexes idx, each 1 (the buckets of a memory's terms,
// for their document frequencies).
func SparseVector(dims int, idx []uint16) Vector {
	return Vector{dims: int32(dims), idx: idx}
}

// Dense reports whether the vector holds every coordinate.
func (v Vector) Dense() bool { return v.idx == nil && len(v.val) > 0 }

// Sparse returns the indexes and values of a sparse vector's non-zero
// coordinates (nil for a dense one).
func (v Vector) Sparse() (idx []uint16, val []float32) { return v.idx, v.val }

// Bytes is the heap the vector's coordinates take.
func (v Vector) Bytes() int64 { return int64(2*len(v.idx) + 4*len(v.val)) }

// Dot returns the dot product of the vector with q.
func (v Vector) Dot(q []float32) float64 {
	if v.Dense() {
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
func (v Vector) nonZero(f func(i int)) {
	if v.Dense() {
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

// DocFreq counts, for the vectors of one embedding model in a scope, how
// many there are (N) and how many use each coordinate (the document
// frequencies of WeightedQuery); or the same for the buckets of the scope's
// memories' terms (see TermStats). Kept sparse (sorted coordinates with their
// counts) while few coordinates are used, as with the offline embedder's
// hashed words in a small scope, and dense once a quarter of them are.
type DocFreq struct {
	n     int32
	dims  int32
	dense []int32
	idx   []uint16
	cnt   []int32
}

// N returns how many vectors are counted.
func (d *DocFreq) N() int { return int(d.n) }

// Add counts a vector in (sign 1) or out (sign -1).
func (d *DocFreq) Add(v Vector, sign int32) {
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

// Get returns how many vectors use coordinate i.
func (d *DocFreq) Get(i int) int32 {
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

// Bytes is the heap the counts take (their capacity: slices grow ahead).
func (d *DocFreq) Bytes() int64 {
	return int64(4*cap(d.dense) + 2*cap(d.idx) + 4*cap(d.cnt))
}
