package record_test

import (
	"slices"
	"testing"

	"github.com/kioku-ai/kioku/memorybank/record"
)

func TestVectorEncoding(t *testing.T) {
	sparse := make([]float32, 768)
	sparse[3], sparse[100], sparse[767] = 0.5, -0.25, 0.75
	dense := make([]float32, 768)
	for i := range dense {
		dense[i] = float32(i%7) - 3.5
	}
	for _, v := range [][]float32{sparse, dense, {0, 0, 0}, {}} {
		b := record.EncodeVector(v)
		got, err := record.DecodeVector(b)
		if err != nil || !slices.Equal(got, v) {
			t.Fatalf("round trip of %d dims (tag %q): %v", len(v), b[:min(1, len(b))], err)
		}
	}
	if b := record.EncodeVector(sparse); b[0] != 's' || len(b) > 5+6*5 {
		t.Errorf("a vector of at most 5 non-zero coordinates takes %d bytes, tag %q; want the sparse form", len(b), b[0])
	}
	if b := record.EncodeVector(dense); b[0] != 'd' || len(b) != 1+4*len(dense) {
		t.Errorf("a dense vector takes %d bytes, tag %q; want the dense form", len(b), b[0])
	}
	for _, bad := range [][]byte{{'d', 1, 2}, {'s', 1}, {'s', 1, 0, 0, 0, 9, 0, 0, 0, 0, 0}, {'x'}} {
		if _, err := record.DecodeVector(bad); err == nil {
			t.Errorf("DecodeVector(%v) accepted a malformed vector", bad)
		}
	}
}
