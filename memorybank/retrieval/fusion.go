package retrieval

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/kioku-ai/kioku/fault"
)

// FusionMethod is how hybrid retrieval combines its two sides.
type FusionMethod string

// The fusion methods.
const (
	// FusionRRF is reciprocal rank fusion: a memory's similarity is the
	// sum over the sides that ranked it of weight / (k + rank), scaled to
	// [0, 1] by the best possible sum. It needs no calibration between the
	// sides' scores, which is why it is the default.
	FusionRRF FusionMethod = "rrf"
	// FusionWeighted is a weighted mean of the dense similarity (the
	// cosine, below 0 counted as 0) and the lexical similarity.
	FusionWeighted FusionMethod = "weighted"
)

// Fusion configures hybrid retrieval: how a similarity search combines the
// dense side (the embedder's vectors) with the lexical side (the terms of
// the facts, see Rank) when the embedder is a model. With the built-in
// offline embedder, whose vectors are a hashing of those same terms,
// retrieval ranks by the lexical side alone. The zero Fusion is the
// default: reciprocal rank fusion, both sides weighing 1, k = 60.
type Fusion struct {
	Method FusionMethod `json:"method,omitempty"`
	// DenseWeight and LexicalWeight weigh the sides, each 0 to 100; both
	// zero means 1 and 1. One of them zero leaves that side out.
	DenseWeight   float64 `json:"dense_weight,omitempty"`
	LexicalWeight float64 `json:"lexical_weight,omitempty"`
	// RRFK is reciprocal rank fusion's k, 1 to 1000 (0 means 60): the
	// larger, the less the first ranks dominate.
	RRFK int `json:"rrf_k,omitempty"`
}

// Fusion defaults and limits.
const (
	DefaultRRFK     = 60
	maxRRFK         = 1000
	maxFusionWeight = 100
	// FusionDepth is the least number of memories each side contributes
	// to a hybrid search (twice top_k when more).
	FusionDepth = 20
)

// Validate checks a fusion configuration.
func (f Fusion) Validate(field string) error {
	switch f.Method {
	case "", FusionRRF, FusionWeighted:
	default:
		return fault.Invalidf("%s.method is %q; use %q or %q", field, f.Method, FusionRRF, FusionWeighted)
	}
	for _, w := range []struct {
		name string
		v    float64
	}{{"dense_weight", f.DenseWeight}, {"lexical_weight", f.LexicalWeight}} {
		if !(w.v >= 0 && w.v <= maxFusionWeight) {
			return fault.Invalidf("%s.%s is %v; it must be 0 to %d", field, w.name, w.v, maxFusionWeight)
		}
	}
	if f.RRFK < 0 || f.RRFK > maxRRFK {
		return fault.Invalidf("%s.rrf_k is %d; it must be 1 to %d (0 means %d)", field, f.RRFK, maxRRFK, DefaultRRFK)
	}
	return nil
}

// weights returns the sides' weights with the defaults applied.
func (f Fusion) weights() (dense, lexical float64) {
	if f.DenseWeight == 0 && f.LexicalWeight == 0 {
		return 1, 1
	}
	return f.DenseWeight, f.LexicalWeight
}

// String describes the fusion, for logs.
func (f Fusion) String() string {
	d, l := f.weights()
	return fmt.Sprintf("%s dense %g lexical %g", cmp.Or(f.Method, FusionRRF), d, l)
}

// Fused is a result of Fuse: a memory and its distance from the query,
// 1 minus its fused similarity.
type Fused[M any] struct {
	Item     M
	Distance float64
}

// Fuse orders a search's results and returns the best k. lexicalOnly
// ranks by the lexical side alone (the offline embedder), then, to fill k,
// the memories that share no term with the query, by the dense side
// (similarity 0). Otherwise a memory that only a side weighing 0 found is
// left out. Memories for which preferred (when not nil) holds, those of a
// preferred period, rank higher (see Time in period.go); id breaks ties.
func Fuse[M any](ranked []Ranked[M], k int, lexicalOnly bool, f Fusion, preferred func(M) bool, id func(M) string) []Fused[M] {
	type fused struct {
		s    Ranked[M]
		sim  float64
		rank int // the dense rank of fillers
	}
	wd, wl := f.weights()
	rrfK := float64(cmp.Or(f.RRFK, DefaultRRFK))
	var list []fused
	for _, s := range ranked {
		r := fused{s: s}
		switch {
		case lexicalOnly:
			if s.LexicalRank == 0 {
				r.rank = s.DenseRank
			}
			r.sim = s.Lexical
		case f.Method == FusionWeighted:
			r.sim = (wd*max(0, min(1, s.Score)) + wl*s.Lexical) / (wd + wl)
		default:
			if s.DenseRank > 0 {
				r.sim += wd / (rrfK + float64(s.DenseRank))
			}
			if s.LexicalRank > 0 {
				r.sim += wl / (rrfK + float64(s.LexicalRank))
			}
			r.sim /= (wd + wl) / (rrfK + 1)
		}
		if !lexicalOnly && r.sim <= 0 {
			continue // found only by a side weighted 0
		}
		if r.sim > 0 && preferred != nil && preferred(s.Item) {
			r.sim = r.sim * (2 - r.sim) // the distance squared
		}
		list = append(list, r)
	}
	slices.SortFunc(list, func(a, b fused) int {
		if c := cmp.Compare(b.sim, a.sim); c != 0 {
			return c
		}
		if c := cmp.Compare(a.rank, b.rank); c != 0 {
			return c
		}
		return cmp.Compare(id(a.s.Item), id(b.s.Item))
	})
	out := make([]Fused[M], 0, min(k, len(list)))
	for _, r := range list[:min(k, len(list))] {
		out = append(out, Fused[M]{Item: r.s.Item, Distance: Distance(r.sim)})
	}
	return out
}
