package record_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kioku-ai/kioku/internal/memorystore/record"
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

func TestVectorEncoding(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, v := range [][]float32{randomVector(r, 768, true), randomVector(r, 768, false), {0, 0, 0}, {}} {
		b := record.EncodeVector(v)
		got, err := record.DecodeVector(b)
		if err != nil || !slices.Equal(got, v) {
			t.Fatalf("round trip of %d dims (tag %q): %v", len(v), b[:min(1, len(b))], err)
		}
	}
	if sparse := record.EncodeVector(randomVector(r, 768, true)); sparse[0] != 's' || len(sparse) > 5+6*5 {
		t.Errorf("a vector of at most 5 non-zero coordinates takes %d bytes, tag %q; want the sparse form", len(sparse), sparse[0])
	}
	for _, bad := range [][]byte{{'d', 1, 2}, {'s', 1}, {'s', 1, 0, 0, 0, 9, 0, 0, 0, 0, 0}, {'x'}} {
		if _, err := record.DecodeVector(bad); err == nil {
			t.Errorf("record.DecodeVector(%v) accepted a malformed vector", bad)
		}
	}
}
