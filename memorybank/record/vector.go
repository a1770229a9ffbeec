package record

import (
	"encoding/binary"
	"errors"
	"math"

	"github.com/kioku-ai/kioku/memorybank/retrieval"
)

// EncodeVector returns the stored form of a vector: sparse (count, then
// uint16 index and float32 value pairs) when most coordinates are zero,
// dense (float32 values) otherwise; little-endian with a one-byte tag.
func EncodeVector(v []float32) []byte {
	if v == nil {
		return nil
	}
	vec := retrieval.NewVector(v)
	if vec.Dense() {
		b := make([]byte, 1+4*len(v))
		b[0] = 'd'
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[1+4*i:], math.Float32bits(x))
		}
		return b
	}
	idx, val := vec.Sparse()
	b := make([]byte, 5+6*len(idx))
	b[0] = 's'
	binary.LittleEndian.PutUint32(b[1:], uint32(len(v)))
	for k, i := range idx {
		binary.LittleEndian.PutUint16(b[5+6*k:], i)
		binary.LittleEndian.PutUint32(b[7+6*k:], math.Float32bits(val[k]))
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
			return nil, errors.New("record: malformed dense vector")
		}
		v := make([]float32, (len(b)-1)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[1+4*i:]))
		}
		return v, nil
	case 's':
		if len(b) < 5 || (len(b)-5)%6 != 0 {
			return nil, errors.New("record: malformed sparse vector")
		}
		v := make([]float32, binary.LittleEndian.Uint32(b[1:]))
		for k := 0; 5+6*k < len(b); k++ {
			i := int(binary.LittleEndian.Uint16(b[5+6*k:]))
			if i >= len(v) {
				return nil, errors.New("record: sparse vector index out of range")
			}
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[7+6*k:]))
		}
		return v, nil
	}
	return nil, errors.New("record: unknown vector encoding")
}
