package transport

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"connectrpc.com/vanguard"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/kioku-ai/kioku/internal/transport/reqlimit"
)

// The codecs of the Connect, gRPC and gRPC-Web handlers, and of kioku.v1's
// REST transcoder. Each checks a request body against package reqlimit's
// bounds before it decodes it, so that a body that would decode into
// millions of values is refused at once, and says what protojson's errors
// leave unclear.

// jsonCodec is connect-go's JSON codec (protojson) with these differences:
// a body over reqlimit's bounds is refused before it is decoded; with
// strict set (kioku.v1's services) a field the message does not have is
// INVALID_ARGUMENT naming it, where connect-go discards it (so a typo,
// "sessionID" for "session_id", looked like success); without strict
// (the Vertex AI API's Connect handlers) unknown fields are discarded, as
// connect-go does (its REST codec, package internal/transport/vertex, refuses
// them as Google's front end does); and a request that does not decode because it
// escapes a lone UTF-16 surrogate ("\ud800") says so, where protojson says
// "unexpected EOF". refused, when set, is told of each body refused
// (too_complex, undecodable), for the metrics: these refusals happen
// before any interceptor sees the call.
type jsonCodec struct {
	name    string
	strict  bool
	refused func(reason string)
}

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
	if err := reqlimit.JSON(data); err != nil {
		c.refuse("too_complex")
		return err
	}
	if err := unmarshalJSON(protojson.UnmarshalOptions{DiscardUnknown: !c.strict}, data, pm); err != nil {
		c.refuse("undecodable")
		return err
	}
	return nil
}

func (c jsonCodec) refuse(reason string) {
	if c.refused != nil {
		c.refused(reason)
	}
}

// unmarshalJSON decodes a JSON request with protojson, explaining its
// errors: an unknown field names the field and the message's own, a lone
// surrogate is named as such.
func unmarshalJSON(opts protojson.UnmarshalOptions, data []byte, pm proto.Message) error {
	err := opts.Unmarshal(data, pm)
	if err == nil {
		return nil
	}
	if at, esc := loneSurrogate(data); esc != "" {
		return fmt.Errorf("the JSON escapes %s at byte %d, half of a UTF-16 surrogate pair, which is not a character: strings must be valid Unicode", esc, at)
	}
	if m := unknownField.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("%s has no field %q (%s); check the name against the API (GET /openapi.yaml), in snake_case or lowerCamelCase%s",
			pm.ProtoReflect().Descriptor().FullName(), m[2], "at line "+m[1], suggestField(pm.ProtoReflect().Descriptor(), m[2]))
	}
	return fmt.Errorf("the body does not decode as %s: %w", pm.ProtoReflect().Descriptor().FullName(), err)
}

// unknownField matches protojson's error for a field a message does not
// have: its position and the name.
var unknownField = regexp.MustCompile(`\(line (\d+:\d+)\): unknown field "([^"]*)"`)

// suggestField names a field of md whose name differs from the unknown
// one only in case and underscores (sessionID for session_id), or "".
func suggestField(md protoreflect.MessageDescriptor, name string) string {
	fold := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "")) }
	fields := md.Fields()
	for i := range fields.Len() {
		if f := fields.Get(i); fold(string(f.Name())) == fold(name) {
			return fmt.Sprintf("; did you mean %q?", f.Name())
		}
	}
	return ""
}

// protoCodec is connect-go's binary protobuf codec with reqlimit's bounds
// checked before a request is decoded.
type protoCodec struct{ refused func(reason string) }

func (c protoCodec) Name() string { return "proto" }

func (c protoCodec) IsBinary() bool { return true }

func (c protoCodec) Marshal(m any) ([]byte, error) { return c.MarshalAppend(nil, m) }

func (c protoCodec) MarshalAppend(dst []byte, m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a proto message", m)
	}
	return proto.MarshalOptions{}.MarshalAppend(dst, pm)
}

func (c protoCodec) Unmarshal(data []byte, m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a proto message", m)
	}
	if err := reqlimit.Proto(data, pm.ProtoReflect().Descriptor()); err != nil {
		if c.refused != nil {
			c.refused("too_complex")
		}
		return err
	}
	return proto.Unmarshal(data, pm)
}

// restCodec is the JSON codec of kioku.v1's REST transcoder: vanguard's,
// with reqlimit's bounds checked first and unknown fields refused, naming
// them, as jsonCodec's strict mode does. Its errors are INVALID_ARGUMENT.
type restCodec struct{ *vanguard.JSONCodec }

func newRESTCodec(res vanguard.TypeResolver) vanguard.Codec {
	c := vanguard.NewJSONCodec(res)
	c.UnmarshalOptions.DiscardUnknown = false
	return restCodec{c}
}

func (c restCodec) Unmarshal(data []byte, msg proto.Message) error {
	if err := reqlimit.JSON(data); err != nil {
		return connect.NewError(connect.CodeInvalidArgument, err)
	}
	if err := unmarshalJSON(c.UnmarshalOptions, data, msg); err != nil {
		return connect.NewError(connect.CodeInvalidArgument, err)
	}
	return nil
}

func (c restCodec) UnmarshalField(data []byte, msg proto.Message, field protoreflect.FieldDescriptor) error {
	if err := reqlimit.JSON(data); err != nil {
		return connect.NewError(connect.CodeInvalidArgument, err)
	}
	var err error
	if field.Message() != nil && !field.IsList() && !field.IsMap() {
		err = unmarshalJSON(c.UnmarshalOptions, data, msg.ProtoReflect().Mutable(field).Message().Interface())
	} else if err = c.JSONCodec.UnmarshalField(data, msg, field); err != nil {
		err = fmt.Errorf("the body does not decode as %s: %w", field.FullName(), err)
	}
	if err != nil {
		return connect.NewError(connect.CodeInvalidArgument, err)
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
