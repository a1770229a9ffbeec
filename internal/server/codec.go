package server

import (
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// jsonCodec is connect-go's JSON codec (protojson, unknown fields
// discarded) with one difference: a request that does not decode because
// it escapes a lone UTF-16 surrogate ("\ud800") says so, where protojson
// says "unexpected EOF".
type jsonCodec struct{ name string }

func (c jsonCodec) Name() string { return c.name }

func (c jsonCodec) IsBinary() bool { return false }

func (c jsonCodec) Marshal(m any) ([]byte, error) { return c.MarshalAppend(nil, m) }

func (c jsonCodec) MarshalAppend(dst []byte, m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a proto message", m)
	}
	return protojson.MarshalOptions{}.MarshalAppend(dst, pm)
}

func (c jsonCodec) Unmarshal(data []byte, m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a proto message", m)
	}
	if len(data) == 0 {
		return errors.New("zero-length payload is not a valid JSON object")
	}
	err := protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(data, pm)
	if err != nil {
		if at, esc := loneSurrogate(data); esc != "" {
			return fmt.Errorf("the JSON escapes %s at byte %d, half of a UTF-16 surrogate pair, which is not a character: strings must be valid Unicode", esc, at)
		}
		return fmt.Errorf("unmarshal into %T: %w", m, err)
	}
	return nil
}

// loneSurrogate finds a \u escape of a UTF-16 surrogate that is not part
// of a pair, returning its offset and text ("" when there is none).
func loneSurrogate(data []byte) (int, string) {
	escape := func(i int) (rune, bool) { // the \uXXXX at i, if any
		if i+6 > len(data) || data[i] != '\\' || data[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(data[i+2:i+6]), 16, 16)
		return rune(v), err == nil
	}
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' {
			continue
		}
		r, ok := escape(i)
		switch {
		case !ok:
			i++ // another escape: skip the escaped character
		case r >= 0xD800 && r <= 0xDBFF:
			if low, ok := escape(i + 6); ok && low >= 0xDC00 && low <= 0xDFFF {
				i += 11
				continue
			}
			return i, string(data[i : i+6])
		case r >= 0xDC00 && r <= 0xDFFF:
			return i, string(data[i : i+6])
		default:
			i += 5
		}
	}
	return 0, ""
}
