// Package reqlimit bounds what a request body may decode into, before it
// is decoded: a cheap scan of the bytes (no allocation) counts the values
// a body holds and how deep they nest, and refuses a body over the limits
// with an Error naming them (INVALID_ARGUMENT). A JSON array of 16 MiB of zeros is
// 8 million values, which protojson turns into about a gigabyte of
// google.protobuf.Value messages before any later check could refuse it;
// scanned first, it is refused in milliseconds with no memory beyond the
// body itself.
//
// # The per-request memory budget
//
// A request's body is at most a message (16 MiB by default) plus framing;
// it inflates to at most a message too (the server's bounded gzip). What
// it decodes into is bounded here: at most MaxValues values (every JSON
// value, object member or array element; every protobuf field occurrence,
// packed elements counted one by one) nested at most MaxDepth deep.
// Strings and bytes decode into no more bytes than they take in the body,
// and a decoded value costs at most a few hundred bytes (a
// google.protobuf.Value in a ListValue, the costliest, about 100; a map
// entry or a message with its fields more). So a request holds at most:
// its body, twice while a REST or Vertex body is transcoded (the JSON, and
// the binary form the handler reads), plus MaxValues decoded values, twice
// during transcoding: about 2 × 16 MiB + 2 × 262,144 × ~200 B ≈ 130 MiB
// for the largest request the server accepts, and far less for any
// request that fits the domain's own limits (an event of 512 KiB, a state
// of 256 KiB).
package reqlimit

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The limits of one request body.
const (
	// MaxDepth is how deep objects and arrays (or messages) may nest.
	// No request kioku accepts comes near it: session state and event
	// values nest at most 32 deep (package sessions).
	MaxDepth = 100
	// MaxValues is how many values a body may hold: as many as the
	// smallest JSON values ("0,") make of a 512 KiB event, the largest
	// single input of the API.
	MaxValues = 1 << 18
)

// Error is the error of a body over the limits: the caller's mistake
// (INVALID_ARGUMENT), whose message names the limit.
type Error struct{ msg string }

func (e *Error) Error() string { return e.msg }

func tooDeep(what string) error {
	return &Error{fmt.Sprintf("the request body nests %s more than %d levels deep, the most a request may; flatten the value (state and event values may nest at most 32 levels)", what, MaxDepth)}
}

func tooMany(what string) error {
	return &Error{fmt.Sprintf("the request body holds more than %d %s, the most one request may decode into; send the data in several requests", MaxValues, what)}
}

// JSON checks a JSON body against the limits. It does not validate the
// JSON (the decoder does); it counts, outside strings, the objects and
// arrays opened (and their depth) and the commas between members and
// elements: a bound on the values the decoder would make.
func JSON(data []byte) error {
	depth, values := 0, 1
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			if depth++; depth > MaxDepth {
				return tooDeep("JSON objects and arrays")
			}
			values++
		case '}', ']':
			depth--
		case ',':
			values++
		default:
			continue
		}
		if values > MaxValues {
			return tooMany("JSON values (object members and array elements)")
		}
	}
	return nil
}

// Proto checks a binary protobuf body of message md against the limits,
// walking its wire format: each field occurrence is a value, each element
// of a packed repeated field too, and the fields of a nested message
// (a map entry included) one level deeper. Malformed wire data is left to
// the decoder to report.
func Proto(data []byte, md protoreflect.MessageDescriptor) error {
	s := protoScan{}
	return s.message(data, md, 1)
}

type protoScan struct{ values int }

func (s *protoScan) count(n int) error {
	if s.values += n; s.values > MaxValues {
		return tooMany("protobuf fields and repeated elements")
	}
	return nil
}

func (s *protoScan) message(b []byte, md protoreflect.MessageDescriptor, depth int) error {
	if depth > MaxDepth {
		return tooDeep("messages")
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil // malformed: the decoder says so
		}
		b = b[n:]
		var fd protoreflect.FieldDescriptor
		if md != nil {
			fd = md.Fields().ByNumber(num)
		}
		if typ != protowire.BytesType || fd == nil {
			if err := s.count(1); err != nil {
				return err
			}
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return nil
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		switch {
		case fd.Message() != nil:
			if err := s.count(1); err != nil {
				return err
			}
			if err := s.message(v, fd.Message(), depth+1); err != nil {
				return err
			}
		case fd.IsList() && packable(fd.Kind()):
			if err := s.count(packed(v, fd.Kind())); err != nil {
				return err
			}
		default: // a string or bytes
			if err := s.count(1); err != nil {
				return err
			}
		}
	}
	return nil
}

// packable reports whether a kind of scalar may be packed.
func packable(k protoreflect.Kind) bool {
	return k != protoreflect.StringKind && k != protoreflect.BytesKind && k != protoreflect.MessageKind && k != protoreflect.GroupKind
}

// packed counts the elements of a packed field's bytes.
func packed(v []byte, k protoreflect.Kind) int {
	switch k {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return len(v) / 4
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return len(v) / 8
	}
	n := 0
	for _, c := range v {
		if c < 0x80 {
			n++
		}
	}
	return n
}
