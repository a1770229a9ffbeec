package vertex

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"
	"connectrpc.com/connect"
	"connectrpc.com/vanguard"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/kioku-ai/kioku/internal/transport/httperr"
	"github.com/kioku-ai/kioku/internal/transport/reqlimit"
)

// The JSON of Vertex AI's REST API: the codec the REST transcoder (rest.go)
// reads requests and writes responses with, in place of vanguard's own
// JSON codec. It differs from protojson where Google's front end and
// clients do:
//
//   - it reads timestamps and durations given as {"seconds", "nanos"}
//     (older ADK Python sent them so) and update masks in snake_case as
//     well as lowerCamelCase (Google's Node REST transport sends the paths
//     as written);
//   - it refuses, as Google's front end does, a member that neither
//     Google's Go types nor jsonOnly know (400 naming it: kioku.v1 refuses
//     unknown fields too), and keeps the JSON-only fields jsonOnly lists,
//     which the Vertex AI SDK and ADK send beyond Google's Go types (a
//     memory's topics and metadata, GenerateMemories' allowedTopics,
//     RetrieveMemories' filter...): those of the message it reads are
//     carried in the message itself (extras), for the handlers to use or
//     refuse, while those deeper down are dropped;
//   - it writes what handlers put in a message's extras back as members of
//     its JSON, leaves unpopulated fields out, as Google does, and writes
//     errors (google.rpc.Status) in Google's envelope (package httperr).

// extrasField is the field number under which a message carries its
// extras: a google.protobuf.Struct in the message's unknown fields, so
// that they travel with it through the transcoder's proto leg and every
// interceptor to the handler, and back. It is the largest field number,
// far from any Google assigns.
const extrasField = protowire.MaxValidNumber

// extras returns the extras a message carries (nil when none).
func extras(m proto.Message) (map[string]any, error) {
	if m == nil || !m.ProtoReflect().IsValid() {
		return nil, nil
	}
	var out map[string]any
	b := m.ProtoReflect().GetUnknown()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		if num != extrasField || typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return nil, protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		var st structpb.Struct
		if err := proto.Unmarshal(v, &st); err != nil {
			return nil, fmt.Errorf("the JSON fields beyond %s: %w", m.ProtoReflect().Descriptor().FullName(), err)
		}
		out = st.AsMap()
	}
	return out, nil
}

// setExtras replaces a message's extras (none when x is empty).
func setExtras(m proto.Message, x map[string]any) error {
	r := m.ProtoReflect()
	var keep []byte
	b := r.GetUnknown()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			break
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			break
		}
		if num != extrasField {
			keep = append(keep, b[:n+m]...)
		}
		b = b[n+m:]
	}
	if len(x) > 0 {
		st, err := structpb.NewStruct(x)
		if err != nil {
			return err
		}
		v, err := proto.Marshal(st)
		if err != nil {
			return err
		}
		keep = protowire.AppendTag(keep, extrasField, protowire.BytesType)
		keep = protowire.AppendBytes(keep, v)
	}
	r.SetUnknown(keep)
	return nil
}

// extrasTag is how an extras field begins on the wire.
var extrasTag = protowire.AppendTag(nil, extrasField, protowire.BytesType)

// jsonOnly are, by message, the members of Vertex AI's REST JSON that
// Google's Go types (the version go.mod pins) lack, as the clients send
// them: the Vertex AI SDK (memories' topics, metadata and revision
// settings, generation's settings, retrieval's filters) and ADK
// (eventActionsJSONOnly, which kioku drops). Any other
// member a message lacks is refused (unknownMember). A field Google adds
// that a client starts sending goes here until the pinned types have it.
var jsonOnly = map[protoreflect.FullName][]string{
	"google.cloud.aiplatform.v1beta1.Memory":                  {"topics", "metadata", "revisionLabels", "revisionTtl", "revisionExpireTime", "disableMemoryRevisions"},
	"google.cloud.aiplatform.v1beta1.GenerateMemoriesRequest": {"allowedTopics", "metadata", "metadataMergeStrategy", "revisionLabels", "revisionTtl", "revisionExpireTime", "disableMemoryRevisions"},
	"google.cloud.aiplatform.v1beta1.RetrieveMemoriesRequest": {"filter", "filterGroups", "memoryTypes"},
	"google.cloud.aiplatform.v1beta1.EventActions":            eventActionsJSONOnly,
	"google.cloud.aiplatform.v1.EventActions":                 eventActionsJSONOnly,
}

// eventActionsJSONOnly are the members of EventActions beyond Google's Go
// types that ADK sends (Python: rewindBeforeInvocationId; TypeScript
// copies its own EventActions whole).
var eventActionsJSONOnly = []string{"rewindBeforeInvocationId", "requestedToolConfirmations", "agentState", "endOfAgent"}

// geminiShaped are the messages that mirror Gemini's own types (content
// and its parts, grounding metadata, transcriptions), which ADK copies
// from a model's response as they come and which grow with every Gemini
// release: in them, at any depth, a member Google's Go types lack is
// dropped, as before, rather than refused, so that a client newer than
// the pinned types keeps working.
var geminiShaped = map[protoreflect.FullName]bool{
	"google.cloud.aiplatform.v1beta1.Content": true, "google.cloud.aiplatform.v1.Content": true,
	"google.cloud.aiplatform.v1beta1.GroundingMetadata": true, "google.cloud.aiplatform.v1.GroundingMetadata": true,
	"google.cloud.aiplatform.v1beta1.Transcription": true, "google.cloud.aiplatform.v1.Transcription": true,
}

// knownJSONOnly reports whether name (in lowerCamelCase or snake_case) is
// a JSON-only member of md (jsonOnly).
func knownJSONOnly(md protoreflect.MessageDescriptor, name string) bool {
	return slices.Contains(jsonOnly[md.FullName()], camelPaths(name))
}

// unknownMember is a member of a request's JSON body that its message
// does not have: at is where in the body, as Google's front end writes it
// ("actions", "event_metadata", "" at the top; a binding's body that is a
// field, such as UpdateSession's session, is the top).
type unknownMember struct{ name, at string }

func (e *unknownMember) Error() string {
	if e.at == "" {
		return fmt.Sprintf("Invalid JSON payload received. Unknown name %q: Cannot find field.", e.name)
	}
	return fmt.Sprintf("Invalid JSON payload received. Unknown name %q at '%s': Cannot find field.", e.name, e.at)
}

// field is the member's path, for a google.rpc.BadRequest.
func (e *unknownMember) field() string {
	if e.at == "" {
		return e.name
	}
	return e.at + "." + e.name
}

// invalidBody is the INVALID_ARGUMENT for a request body that does not
// decode as msg: an unknown member named as Google names it, with a
// field violation.
func invalidBody(err error, msg protoreflect.FullName) error {
	var u *unknownMember
	if !errors.As(err, &u) {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("the request body does not decode as %s: %w", msg, err))
	}
	ce := connect.NewError(connect.CodeInvalidArgument, u)
	if d, derr := connect.NewErrorDetail(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: u.field(), Description: u.Error()}}}); derr == nil {
		ce.AddDetail(d)
	}
	return ce
}

// codec is the JSON codec of the REST transcoder.
type codec struct {
	res       vanguard.TypeResolver
	marshal   protojson.MarshalOptions
	unmarshal protojson.UnmarshalOptions
	fields    *vanguard.JSONCodec // for single fields, as vanguard does
}

func newCodec(res vanguard.TypeResolver) vanguard.Codec {
	c := &codec{
		res:       res,
		marshal:   protojson.MarshalOptions{Resolver: res},
		unmarshal: protojson.UnmarshalOptions{Resolver: res, DiscardUnknown: true},
	}
	c.fields = &vanguard.JSONCodec{MarshalOptions: c.marshal, UnmarshalOptions: c.unmarshal}
	return c
}

var _ vanguard.RESTCodec = (*codec)(nil)

// restCodec is the REST codec, for JSON made outside the transcoder.
var restCodec = newCodec(types{})

func (c *codec) Name() string { return vanguard.CodecJSON }

// MarshalAppend writes a response, or an error in Google's envelope.
func (c *codec) MarshalAppend(base []byte, msg proto.Message) ([]byte, error) {
	if st, ok := msg.(*status.Status); ok {
		return append(base, httperr.GoogleBody(0, st, c.res)...), nil
	}
	out, err := c.marshal.MarshalAppend(base, msg)
	if err != nil {
		return nil, err
	}
	if wire, err := proto.Marshal(msg); err != nil || !bytes.Contains(wire, extrasTag) {
		return out, nil
	}
	var j map[string]any
	dec := json.NewDecoder(bytes.NewReader(out[len(base):]))
	dec.UseNumber()
	if err := dec.Decode(&j); err != nil {
		return nil, err
	}
	if err := c.inject(msg.ProtoReflect(), j); err != nil {
		return nil, err
	}
	b, err := json.Marshal(j)
	if err != nil {
		return nil, err
	}
	return append(base, b...), nil
}

// inject adds the extras of m and of the messages in it to their JSON, j.
func (c *codec) inject(m protoreflect.Message, j map[string]any) error {
	if j == nil {
		return nil
	}
	x, err := extras(m.Interface())
	if err != nil {
		return err
	}
	for k, v := range x {
		if _, ok := j[k]; !ok {
			j[k] = v
		}
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Message() == nil || fd.IsMap() || wellKnown(fd.Message().FullName()) {
			return true
		}
		sub := j[fd.JSONName()]
		if fd.IsList() {
			list, _ := sub.([]any)
			for i := 0; i < v.List().Len() && i < len(list); i++ {
				if err = c.injectOne(v.List().Get(i).Message(), list[i]); err != nil {
					return false
				}
			}
			return true
		}
		err = c.injectOne(v.Message(), sub)
		return err == nil
	})
	return err
}

// injectOne is inject for one message, looking into an Any.
func (c *codec) injectOne(m protoreflect.Message, j any) error {
	obj, _ := j.(map[string]any)
	if m.Descriptor().FullName() != "google.protobuf.Any" {
		return c.inject(m, obj)
	}
	url := m.Get(m.Descriptor().Fields().ByName("type_url")).String()
	mt, err := c.res.FindMessageByURL(url)
	if err != nil {
		return nil // protojson could not have written it either
	}
	inner := mt.New()
	if err := proto.Unmarshal(m.Get(m.Descriptor().Fields().ByName("value")).Bytes(), inner.Interface()); err != nil {
		return err
	}
	return c.inject(inner, obj)
}

// wellKnown reports whether a message has a JSON form of its own, which
// carries no extras.
func wellKnown(name protoreflect.FullName) bool {
	switch name {
	case "google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue",
		"google.protobuf.Timestamp", "google.protobuf.Duration", "google.protobuf.FieldMask", "google.protobuf.Empty":
		return true
	}
	return strings.HasPrefix(string(name), "google.protobuf.") && strings.HasSuffix(string(name), "Value")
}

// Unmarshal reads a request (or a message a binding's body is): see the
// top of this file. A body over package reqlimit's bounds is refused
// before anything decodes it. What does not decode is the caller's error.
func (c *codec) Unmarshal(data []byte, msg proto.Message) error {
	if err := reqlimit.JSON(data); err != nil {
		return connect.NewError(connect.CodeInvalidArgument, err)
	}
	if err := c.read(data, msg); err != nil {
		return invalidBody(err, msg.ProtoReflect().Descriptor().FullName())
	}
	return nil
}

// read reads a message that is a request's body.
func (c *codec) read(data []byte, msg proto.Message) error {
	if wellKnown(msg.ProtoReflect().Descriptor().FullName()) {
		return c.unmarshal.Unmarshal(data, msg)
	}
	var obj map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil || obj == nil {
		// protojson says what is wrong with it.
		return c.unmarshal.Unmarshal(data, msg)
	}
	x := map[string]any{}
	if err := normalize(msg.ProtoReflect().Descriptor(), obj, x, "", false); err != nil {
		return err
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	if err := c.unmarshal.Unmarshal(b, msg); err != nil {
		return err
	}
	if len(x) == 0 {
		return nil
	}
	return setExtras(msg, structValues(x).(map[string]any))
}

// MarshalAppendField implements vanguard.RESTCodec.
func (c *codec) MarshalAppendField(base []byte, msg proto.Message, field protoreflect.FieldDescriptor) ([]byte, error) {
	if field.Message() != nil && !field.IsList() && !field.IsMap() {
		return c.MarshalAppend(base, msg.ProtoReflect().Get(field).Message().Interface())
	}
	return c.fields.MarshalAppendField(base, msg, field)
}

// UnmarshalField implements vanguard.RESTCodec: a binding's body that is
// a message field is read as a message of its own.
func (c *codec) UnmarshalField(data []byte, msg proto.Message, field protoreflect.FieldDescriptor) error {
	if err := reqlimit.JSON(data); err != nil {
		return connect.NewError(connect.CodeInvalidArgument, err)
	}
	var err error
	if field.Message() != nil && !field.IsList() && !field.IsMap() {
		err = c.read(data, msg.ProtoReflect().Mutable(field).Message().Interface())
	} else {
		err = c.fields.UnmarshalField(data, msg, field)
	}
	if err != nil {
		return invalidBody(err, field.FullName())
	}
	return nil
}

// normalize rewrites a request's JSON object of message md, at the path
// at, in place into what protojson reads (timestamps and durations as
// strings, update masks in lowerCamelCase). A member md does not have is
// an unknownMember unless jsonOnly lists it: then it moves into x when x
// is not nil (the top level; deeper down it is dropped). Within a
// geminiShaped message (lenient), such members are dropped.
func normalize(md protoreflect.MessageDescriptor, obj map[string]any, x map[string]any, at string, lenient bool) error {
	lenient = lenient || geminiShaped[md.FullName()]
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		v := obj[k]
		fd := md.Fields().ByJSONName(k)
		if fd == nil {
			fd = md.Fields().ByName(protoreflect.Name(k))
		}
		if fd == nil {
			switch {
			case strings.HasPrefix(k, "@"):
			case !lenient && !knownJSONOnly(md, k):
				return &unknownMember{name: k, at: at}
			case x != nil:
				x[camelPaths(k)] = v
				delete(obj, k)
			default:
				delete(obj, k)
			}
			continue
		}
		if fd.Message() == nil {
			continue
		}
		here := join(at, string(fd.Name()))
		switch name := fd.Message().FullName(); {
		case name == "google.protobuf.Timestamp" || name == "google.protobuf.Duration":
			if m, ok := v.(map[string]any); ok && !fd.IsList() {
				obj[k] = secondsNanos(name, m)
			}
		case name == "google.protobuf.FieldMask":
			if s, ok := v.(string); ok {
				obj[k] = camelPaths(s)
			}
		case wellKnown(name) || name == "google.protobuf.Any":
		case fd.IsMap():
			if m, ok := v.(map[string]any); ok && fd.MapValue().Message() != nil {
				for _, key := range slices.Sorted(maps.Keys(m)) {
					if em, ok := m[key].(map[string]any); ok {
						if err := normalize(fd.MapValue().Message(), em, nil, fmt.Sprintf("%s[%q]", here, key), lenient); err != nil {
							return err
						}
					}
				}
			}
		case fd.IsList():
			list, _ := v.([]any)
			for i, e := range list {
				if em, ok := e.(map[string]any); ok {
					if err := normalize(fd.Message(), em, nil, fmt.Sprintf("%s[%d]", here, i), lenient); err != nil {
						return err
					}
				}
			}
		default:
			if m, ok := v.(map[string]any); ok {
				if err := normalize(fd.Message(), m, nil, here, lenient); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// join returns the path of a field within the path at.
func join(at, field string) string {
	if at == "" {
		return field
	}
	return at + "." + field
}

// secondsNanos turns {"seconds", "nanos"} into a Timestamp's or a
// Duration's JSON string, through the message itself; anything else is
// left for protojson to refuse.
func secondsNanos(name protoreflect.FullName, m map[string]any) any {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(name)
	if err != nil {
		return m
	}
	msg := mt.New()
	for k, v := range m {
		fd := msg.Descriptor().Fields().ByName(protoreflect.Name(k))
		n, ok := v.(json.Number)
		if fd == nil || !ok {
			return m
		}
		i, err := n.Int64()
		if err != nil {
			return m
		}
		if fd.Kind() == protoreflect.Int32Kind {
			msg.Set(fd, protoreflect.ValueOfInt32(int32(i)))
		} else {
			msg.Set(fd, protoreflect.ValueOfInt64(i))
		}
	}
	b, err := protojson.Marshal(msg.Interface())
	if err != nil {
		return m
	}
	var s string
	if json.Unmarshal(b, &s) != nil {
		return m
	}
	return s
}

// camelPaths rewrites a field mask's comma-separated paths in
// lowerCamelCase (display_name -> displayName), the form protojson and
// vanguard read; paths already in it are unchanged.
func camelPaths(s string) string {
	paths := strings.Split(s, ",")
	for i, p := range paths {
		var b strings.Builder
		up := false
		for _, r := range strings.TrimSpace(p) {
			switch {
			case r == '_':
				up = true
			case up && r >= 'a' && r <= 'z':
				b.WriteRune(r - 'a' + 'A')
				up = false
			default:
				b.WriteRune(r)
				up = false
			}
		}
		paths[i] = b.String()
	}
	return strings.Join(paths, ",")
}

// structValues turns decoded JSON with json.Numbers into values
// structpb takes.
func structValues(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = structValues(e)
		}
	case []any:
		for i, e := range x {
			x[i] = structValues(e)
		}
	}
	return v
}

// The Any types of the memory bank's purge operations, which the Vertex AI
// SDK reads over REST and Google's Go types lack. Their contents are
// messages of the same shape that Google's Go types have: {int64
// purge_count = 1} and {GenericOperationMetadata generic_metadata = 1}.
const (
	purgeResponseURL = "type.googleapis.com/google.cloud.aiplatform.v1beta1.PurgeMemoriesResponse"
	purgeMetadataURL = "type.googleapis.com/google.cloud.aiplatform.v1beta1.PurgeMemoriesOperationMetadata"
)

// types resolves the Any types of this API: the global registry, and the
// purge operations' types as their shapes.
type types struct{}

var typeAliases = map[string]protoreflect.MessageType{
	purgeResponseURL: (&aiplatformpb.PurgeArtifactsResponse{}).ProtoReflect().Type(),
	purgeMetadataURL: (&aiplatformpb.DeleteOperationMetadata{}).ProtoReflect().Type(),
}

func (types) FindMessageByName(name protoreflect.FullName) (protoreflect.MessageType, error) {
	return protoregistry.GlobalTypes.FindMessageByName(name)
}

func (types) FindMessageByURL(url string) (protoreflect.MessageType, error) {
	if mt, ok := typeAliases[url]; ok {
		return mt, nil
	}
	return protoregistry.GlobalTypes.FindMessageByURL(url)
}

func (types) FindExtensionByName(field protoreflect.FullName) (protoreflect.ExtensionType, error) {
	return protoregistry.GlobalTypes.FindExtensionByName(field)
}

func (types) FindExtensionByNumber(message protoreflect.FullName, field protoreflect.FieldNumber) (protoreflect.ExtensionType, error) {
	return protoregistry.GlobalTypes.FindExtensionByNumber(message, field)
}
