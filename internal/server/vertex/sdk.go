package vertex

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/app"
	"github.com/kioku-ai/kioku/internal/content"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/sessions"
)

// The Vertex AI SDK (Python) calls memory bank methods over REST that
// Google's Go types do not have: memories:ingestEvents, memories:purge,
// memories:retrieveProfiles, {memory}:rollback, {memory}/revisions and
// {memory}/revisions/{revision}. kioku serves them as procedures of an
// internal service, SdkService, whose request is the resource name and the
// call's JSON body as a google.protobuf.Struct, and whose response is a
// Struct: so they pass the same interceptors as every other call (keys,
// logs, metrics, errors), and the REST routes (rest.go) reach them as they
// reach the others. The service's descriptor is built here, at start; it is
// kioku's own, not Google's, and kioku's REST routes are its only intended
// caller.

// SdkService is the internal service of the Vertex AI SDK's REST-only
// methods.
const SdkService = "kioku.internal.vertexsdk.v1beta1.SdkService"

// The methods of SdkService.
const (
	sdkIngestEvents        = "IngestEvents"
	sdkPurgeMemories       = "PurgeMemories"
	sdkRetrieveProfiles    = "RetrieveProfiles"
	sdkRollbackMemory      = "RollbackMemory"
	sdkListMemoryRevisions = "ListMemoryRevisions"
	sdkGetMemoryRevision   = "GetMemoryRevision"
)

var sdkMethods = []string{sdkIngestEvents, sdkPurgeMemories, sdkRetrieveProfiles, sdkRollbackMemory, sdkListMemoryRevisions, sdkGetMemoryRevision}

func sdkProcedure(method string) string { return "/" + SdkService + "/" + method }

// sdkRequest is the descriptor of SdkService's request, {string name = 1;
// google.protobuf.Struct body = 2;}.
var sdkRequest protoreflect.MessageDescriptor

func init() {
	str, msg, opt := descriptorpb.FieldDescriptorProto_TYPE_STRING, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL
	svc := &descriptorpb.ServiceDescriptorProto{Name: proto.String("SdkService")}
	for _, m := range sdkMethods {
		svc.Method = append(svc.Method, &descriptorpb.MethodDescriptorProto{
			Name: proto.String(m), InputType: proto.String(".kioku.internal.vertexsdk.v1beta1.Request"), OutputType: proto.String(".google.protobuf.Struct"),
		})
	}
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:       proto.String("kioku/internal/vertexsdk/v1beta1/sdk.proto"),
		Package:    proto.String("kioku.internal.vertexsdk.v1beta1"),
		Syntax:     proto.String("proto3"),
		Dependency: []string{"google/protobuf/struct.proto"},
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("Request"),
			Field: []*descriptorpb.FieldDescriptorProto{
				{Name: proto.String("name"), JsonName: proto.String("name"), Number: proto.Int32(1), Type: &str, Label: &opt},
				{Name: proto.String("body"), JsonName: proto.String("body"), Number: proto.Int32(2), Type: &msg, Label: &opt, TypeName: proto.String(".google.protobuf.Struct")},
			},
		}},
		Service: []*descriptorpb.ServiceDescriptorProto{svc},
	}, protoregistry.GlobalFiles)
	if err != nil {
		panic("vertex: the SDK service's descriptor: " + err.Error())
	}
	if err := protoregistry.GlobalFiles.RegisterFile(fd); err != nil {
		panic("vertex: registering the SDK service: " + err.Error())
	}
	sdkRequest = fd.Messages().ByName("Request")
}

func (s *Surface) mountSDK(mux *http.ServeMux, opts []connect.HandlerOption) {
	desc, _ := protoregistry.GlobalFiles.FindDescriptorByName(SdkService)
	svc := desc.(protoreflect.ServiceDescriptor)
	handlers := map[string]func(ctx context.Context, name string, body map[string]any) (map[string]any, error){
		sdkIngestEvents:        s.ingestEvents,
		sdkPurgeMemories:       s.purgeMemories,
		sdkRetrieveProfiles:    s.retrieveProfiles,
		sdkRollbackMemory:      s.rollbackMemory,
		sdkListMemoryRevisions: s.listMemoryRevisions,
		sdkGetMemoryRevision:   s.getMemoryRevision,
	}
	for _, m := range sdkMethods {
		fn := handlers[m]
		proc := sdkProcedure(m)
		o := append(opts[:len(opts):len(opts)],
			connect.WithSchema(svc.Methods().ByName(protoreflect.Name(m))),
			connect.WithRequestInitializer(func(_ connect.Spec, msg any) error {
				*msg.(*dynamicpb.Message) = *dynamicpb.NewMessage(sdkRequest)
				return nil
			}))
		mux.Handle(proc, connect.NewUnaryHandler(proc, func(ctx context.Context, r *connect.Request[dynamicpb.Message]) (*connect.Response[structpb.Struct], error) {
			name := r.Msg.Get(sdkRequest.Fields().ByName("name")).String()
			var body map[string]any
			if r.Msg.Has(sdkRequest.Fields().ByName("body")) {
				b, err := proto.Marshal(r.Msg.Get(sdkRequest.Fields().ByName("body")).Message().Interface())
				if err != nil {
					return nil, err
				}
				var st structpb.Struct
				if err := proto.Unmarshal(b, &st); err != nil {
					return nil, err
				}
				body = st.AsMap()
			}
			out, err := fn(ctx, name, body)
			if err != nil {
				return nil, err
			}
			st, err := structpb.NewStruct(out)
			if err != nil {
				return nil, fault.Wrap(fault.Internal, err, "encoding the response")
			}
			return connect.NewResponse(st), nil
		}, o...))
	}
}

// jsonOf returns m's JSON form as a map, for responses built from Google's
// messages.
func jsonOf(m proto.Message) (map[string]any, error) {
	out, err := jsonMap(m)
	if err != nil {
		return nil, fault.Wrap(fault.Internal, err, "encoding %s", m.ProtoReflect().Descriptor().FullName())
	}
	return out, nil
}

// ingestEvents serves memories:ingestEvents ({streamId,
// directContentsSource: {events: [{content, eventId, eventTime}]}, scope,
// generationTriggerConfig, forceFlush}): kioku generates memories from the
// events at once, as if forceFlush were set, and answers the memory
// bank's operation. Streams and trigger configurations are not kept.
func (s *Surface) ingestEvents(ctx context.Context, name string, body map[string]any) (map[string]any, error) {
	e, err := s.memoryEngine("name", name)
	if err != nil {
		return nil, err
	}
	scope, err := stringMap("scope", body["scope"])
	if err != nil {
		return nil, err
	}
	if len(scope) == 0 {
		return nil, fault.InvalidField("scope", "Required field is not set.")
	}
	if err := owned(ctx, scope["user_id"], onlyUser(ctx, "scope user_id", scope["user_id"])); err != nil {
		return nil, err
	}
	src, _ := body["directContentsSource"].(map[string]any)
	events, _ := src["events"].([]any)
	if len(events) == 0 {
		return nil, fault.InvalidField("direct_contents_source.events", "direct_contents_source.events is empty")
	}
	req := &memorybank.GenerateRequest{App: e.app, Scope: scope}
	for i, raw := range events {
		ev, _ := raw.(map[string]any)
		field := fmt.Sprintf("direct_contents_source.events[%d]", i)
		c, err := contentFromJSON(field+".content", ev["content"])
		if err != nil {
			return nil, err
		}
		se := &sessions.Event{Author: c.Role, Content: c}
		if id, ok := ev["eventId"].(string); ok {
			se.ID = id
		}
		if t, ok := ev["eventTime"].(string); ok {
			if se.Timestamp, err = time.Parse(time.RFC3339Nano, t); err != nil {
				return nil, fault.InvalidField(field+".event_time", "%s.event_time %q is not an RFC 3339 time", field, t)
			}
		}
		req.Events = append(req.Events, se)
	}
	return bankOperationJSON(ctx, e)(s.app.GenerateMemories(ctx, req))
}

// purgeMemories serves memories:purge ({filter, filterGroups, force}): the
// filter selects a scope (scope="{json}" or scope.KEY="v", as ListMemories
// takes), force deletes (without it the operation only counts), and the
// operation's response is {"purgeCount": n}.
func (s *Surface) purgeMemories(ctx context.Context, name string, body map[string]any) (map[string]any, error) {
	e, err := s.memoryEngine("name", name)
	if err != nil {
		return nil, err
	}
	if _, ok := body["filterGroups"]; ok {
		return nil, fault.InvalidField("filter_groups", "filter_groups is not supported by kioku: give filter")
	}
	filter, _ := body["filter"].(string)
	scope, err := memoryFilter(filter)
	if err != nil {
		return nil, err
	}
	if err := owned(ctx, scope["user_id"], onlyUser(ctx, "filter scope user_id", scope["user_id"])); err != nil {
		return nil, err
	}
	force, _ := body["force"].(bool)
	return bankOperationJSON(ctx, e)(s.app.PurgeMemories(ctx, &memorybank.PurgeRequest{App: e.app, Scope: scope, Force: force}))
}

// bankOperationJSON returns the function that answers a memory bank
// operation just started (or its error) in JSON.
func bankOperationJSON(ctx context.Context, e engine) func(*app.Operation, error) (map[string]any, error) {
	return func(op *app.Operation, err error) (map[string]any, error) {
		if err != nil {
			return nil, err
		}
		vop, err := bankOperationToVertex(ctx, e, e.name()+"/operations/"+op.ID, op)
		if err != nil {
			return nil, err
		}
		return jsonOf(vop)
	}
}

func (s *Surface) retrieveProfiles(ctx context.Context, name string, _ map[string]any) (map[string]any, error) {
	if _, err := s.memoryEngine("name", name); err != nil {
		return nil, err
	}
	return nil, fault.New(fault.Unimplemented, "memories:retrieveProfiles is not supported by kioku: it keeps no memory profiles (structured memories); use memories:retrieve")
}

// rollbackMemory serves {memory}:rollback ({targetRevisionId}): done at
// once, answering the memory as restored.
func (s *Surface) rollbackMemory(ctx context.Context, name string, body map[string]any) (map[string]any, error) {
	e, id, err := s.memoryName(ctx, "name", name)
	if err != nil {
		return nil, err
	}
	rev, _ := body["targetRevisionId"].(string)
	if rev == "" {
		return nil, fault.InvalidField("target_revision_id", "Required field is not set.")
	}
	// A revision's full name is accepted too.
	if i := strings.LastIndex(rev, "/revisions/"); i >= 0 {
		if rev[:i] != e.memoryName(id) {
			return nil, fault.InvalidField("target_revision_id", "target_revision_id %q is a revision of another memory", aip.Truncate(rev, 200))
		}
		rev = rev[i+len("/revisions/"):]
	}
	m, err := s.mem.RollbackMemory(ctx, e.app, id, rev)
	if err != nil {
		return nil, err
	}
	op, err := s.doneOperation(e.memoryName(id)+"/operations/"+aip.NewID(), v1beta1, "UpdateMemoryOperationMetadata", memoryOut(ctx, e, m))
	if err != nil {
		return nil, err
	}
	return jsonOf(op)
}

// revisionJSON is a memory revision as the Vertex AI SDK reads it.
func revisionJSON(e engine, r *memorybank.Revision) map[string]any {
	out := map[string]any{
		"name":       e.memoryName(r.MemoryID) + "/revisions/" + strconv.FormatInt(r.Number, 10),
		"createTime": r.CreateTime.UTC().Format(time.RFC3339Nano),
		"fact":       r.Fact,
	}
	if !r.ExpireTime.IsZero() {
		out["expireTime"] = r.ExpireTime.UTC().Format(time.RFC3339Nano)
	}
	if len(r.ExtractedFacts) > 0 {
		var ex []any
		for _, f := range r.ExtractedFacts {
			ex = append(ex, map[string]any{"fact": f})
		}
		out["extractedMemories"] = ex
	}
	return out
}

// listMemoryRevisions serves {memory}/revisions?pageSize&pageToken:
// {memoryRevisions, nextPageToken}, newest first.
func (s *Surface) listMemoryRevisions(ctx context.Context, name string, body map[string]any) (map[string]any, error) {
	e, id, err := s.memoryName(ctx, "name", name)
	if err != nil {
		return nil, err
	}
	size := 0
	if v, ok := body["pageSize"].(string); ok {
		if size, err = strconv.Atoi(v); err != nil {
			return nil, fault.InvalidField("page_size", "page_size %q is not a number", v)
		}
	}
	token, _ := body["pageToken"].(string)
	revs, next, err := s.mem.ListRevisions(ctx, e.app, id, int32(size), token)
	if err != nil {
		return nil, err
	}
	list := []any{}
	for _, r := range revs {
		list = append(list, revisionJSON(e, r))
	}
	out := map[string]any{"memoryRevisions": list}
	if next != "" {
		out["nextPageToken"] = next
	}
	return out, nil
}

// getMemoryRevision serves {memory}/revisions/{revision}.
func (s *Surface) getMemoryRevision(ctx context.Context, name string, _ map[string]any) (map[string]any, error) {
	i := strings.LastIndex(name, "/revisions/")
	if i < 0 {
		return nil, fault.InvalidField("name", "name %q is not a memory revision's", aip.Truncate(name, 200))
	}
	e, id, err := s.memoryName(ctx, "name", name[:i])
	if err != nil {
		return nil, err
	}
	absent := fault.NotFoundf("Memory revision %s not found.", name)
	n, err := strconv.ParseInt(name[i+len("/revisions/"):], 10, 64)
	if err != nil || n < 1 {
		return nil, absent
	}
	r, err := s.mem.GetRevision(ctx, e.app, id, n)
	if fault.Is(err, fault.NotFound) {
		return nil, absent
	}
	if err != nil {
		return nil, err
	}
	return revisionJSON(e, r), nil
}

// stringMap reads a JSON object of strings.
func stringMap(field string, v any) (map[string]string, error) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fault.InvalidField(field, "%s must be an object of strings", field)
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		s, ok := x.(string)
		if !ok {
			return nil, fault.InvalidField(field, "%s[%q] must be a string", field, k)
		}
		out[k] = s
	}
	return out, nil
}

// contentFromJSON reads content in its JSON form ({"role", "parts"}, as
// genai and Vertex AI write it).
func contentFromJSON(field string, v any) (*sessions.Content, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fault.InvalidField(field, "%s is required: {\"role\", \"parts\"}", field)
	}
	role, _ := m["role"].(string)
	out := &sessions.Content{Role: role}
	parts, _ := m["parts"].([]any)
	for i, p := range parts {
		pm, ok := p.(map[string]any)
		if !ok {
			return nil, fault.InvalidField(field, "%s.parts[%d] is not an object", field, i)
		}
		out.Parts = append(out.Parts, content.PartFromJSON(pm))
	}
	return out, nil
}
