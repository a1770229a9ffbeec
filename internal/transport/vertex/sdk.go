package vertex

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/fault"
	vertexv1beta1 "github.com/kioku-ai/kioku/gen/kioku/vertex/v1beta1"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/content"
	"github.com/kioku-ai/kioku/internal/workflow"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// The Vertex AI SDK (Python, and its TypeScript port in
// @google-cloud/vertexai) calls memory bank methods over REST that Google's
// published protos lack: memories:ingestEvents, memories:purge,
// memories:retrieveProfiles, {memory}:rollback, {memory}/revisions and
// {memory}/revisions/{revision}. kioku describes them as a service of its
// own, kioku.vertex.v1beta1.SdkService (proto/kioku/vertex), whose requests
// are the resource name and the JSON body as a google.protobuf.Struct (or
// the query's fields), and whose responses are the JSON the SDK reads: so
// they are served and transcoded like every other method, through the same
// interceptors (keys, logs, metrics, errors).

// jsonStruct returns m's JSON form as a Struct, for the SDK methods'
// responses built from Google's messages (with this API's Any types). It
// is the REST codec's, so the members Google's Go types lack (a memory's
// topics and metadata, carried as extras) are written too, also inside an
// operation's response.
func jsonStruct(m proto.Message) (*structpb.Struct, error) {
	b, err := restCodec.MarshalAppend(nil, m)
	if err != nil {
		return nil, fault.Wrap(fault.Internal, err, "encoding %s", m.ProtoReflect().Descriptor().FullName())
	}
	st := &structpb.Struct{}
	if err := protojson.Unmarshal(b, st); err != nil {
		return nil, fault.Wrap(fault.Internal, err, "encoding %s", m.ProtoReflect().Descriptor().FullName())
	}
	return st, nil
}

// newStruct returns a response built as a map.
func newStruct(m map[string]any) (*structpb.Struct, error) {
	st, err := structpb.NewStruct(m)
	if err != nil {
		return nil, fault.Wrap(fault.Internal, err, "encoding the response")
	}
	return st, nil
}

// ingestEvents serves memories:ingestEvents ({streamId,
// directContentsSource: {events: [{content, eventId, eventTime}]}, scope,
// generationTriggerConfig, forceFlush}): kioku generates memories from the
// events at once, as if forceFlush were set, and answers the memory
// bank's operation. Streams and trigger configurations are not kept.
func (s *Surface) ingestEvents(ctx context.Context, r *vertexv1beta1.IngestEventsRequest) (*structpb.Struct, error) {
	body := r.GetBody().AsMap()
	e, err := s.memoryEngine("name", r.GetName())
	if err != nil {
		return nil, err
	}
	scope, err := requiredScope(ctx, body["scope"])
	if err != nil {
		return nil, err
	}
	src, _ := body["directContentsSource"].(map[string]any)
	events, _ := src["events"].([]any)
	if len(events) == 0 {
		return nil, fault.InvalidField("direct_contents_source.events", "direct_contents_source.events is empty")
	}
	g, err := generationFromJSON(body)
	if err != nil {
		return nil, err
	}
	req := &memorybank.GenerateRequest{App: e.app, Scope: scope, Metadata: g.metadata, MergeStrategy: g.strategy}
	for i, raw := range events {
		ev, _ := raw.(map[string]any)
		field := fmt.Sprintf("direct_contents_source.events[%d]", i)
		c, err := contentFromJSON(field+".content", ev["content"])
		if err != nil {
			return nil, err
		}
		se := &sessiontype.Event{Author: c.Role, Content: c}
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
	return bankOperationJSON(e)(s.app.GenerateMemories(ctx, req))
}

// purgeMemories serves memories:purge ({filter, filterGroups, force}): the
// filter selects a scope (scope="{json}" or scope.KEY="v", as ListMemories
// takes) and the memories of it (the rest of the filter and filterGroups,
// as RetrieveMemories takes them), force deletes (without it the
// operation only counts), and the operation's response is {"purgeCount":
// n}.
func (s *Surface) purgeMemories(ctx context.Context, r *vertexv1beta1.PurgeMemoriesRequest) (*structpb.Struct, error) {
	body := r.GetBody().AsMap()
	e, err := s.memoryEngine("name", r.GetName())
	if err != nil {
		return nil, err
	}
	filter, _ := body["filter"].(string)
	scope, f, err := scopedFilter(filter, body["filterGroups"])
	if err != nil {
		return nil, err
	}
	if err := owned(ctx, scope["user_id"], onlyUser(ctx, "filter scope user_id", scope["user_id"])); err != nil {
		return nil, err
	}
	force, _ := body["force"].(bool)
	return bankOperationJSON(e)(s.app.PurgeMemories(ctx, &memorybank.PurgeRequest{App: e.app, Scope: scope, Filter: f, Force: force}))
}

// bankOperationJSON returns the function that answers a memory bank
// operation just started (or its error) in JSON.
func bankOperationJSON(e engine) func(*workflow.Operation, error) (*structpb.Struct, error) {
	return func(op *workflow.Operation, err error) (*structpb.Struct, error) {
		if err != nil {
			return nil, err
		}
		vop, err := bankOperationToVertex(e, e.operationName(op.ID), op)
		if err != nil {
			return nil, err
		}
		return jsonStruct(vop)
	}
}

// retrieveProfiles serves memories:retrieveProfiles ({scope}): {profiles:
// {schemaId: {schemaId, profile}}}, one profile per schema of the memory
// bank's configuration that applies to the scope and has a field filled
// ({} when none has).
func (s *Surface) retrieveProfiles(ctx context.Context, r *vertexv1beta1.RetrieveProfilesRequest) (*structpb.Struct, error) {
	e, err := s.memoryEngine("name", r.GetName())
	if err != nil {
		return nil, err
	}
	scope, err := requiredScope(ctx, r.GetBody().AsMap()["scope"])
	if err != nil {
		return nil, err
	}
	profiles, err := s.mem.RetrieveProfiles(ctx, e.app, scope)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for _, p := range profiles {
		out[p.SchemaID] = map[string]any{"schemaId": p.SchemaID, "profile": p.Values}
	}
	return newStruct(map[string]any{"profiles": out})
}

// rollbackMemory serves {memory}:rollback ({targetRevisionId}): done at
// once, answering the memory as restored.
func (s *Surface) rollbackMemory(ctx context.Context, r *vertexv1beta1.RollbackMemoryRequest) (*structpb.Struct, error) {
	e, id, err := s.memoryName(ctx, "name", r.GetName())
	if err != nil {
		return nil, err
	}
	rev, _ := r.GetBody().AsMap()["targetRevisionId"].(string)
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
	vm, err := memoryToVertex(e, m)
	if err != nil {
		return nil, err
	}
	op, err := s.doneOperation(e.build(memoryOpKind, id, aip.NewID()), v1beta1, "UpdateMemoryOperationMetadata", vm)
	if err != nil {
		return nil, err
	}
	return jsonStruct(op)
}

// revisionJSON is a memory revision as the Vertex AI SDK reads it.
func revisionJSON(e engine, r *memorytype.Revision) map[string]any {
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
func (s *Surface) listMemoryRevisions(ctx context.Context, r *vertexv1beta1.ListMemoryRevisionsRequest) (*structpb.Struct, error) {
	e, id, err := s.memoryName(ctx, "name", r.GetName())
	if err != nil {
		return nil, err
	}
	if r.GetFilter() != "" {
		return nil, fault.InvalidField("filter", "filter is not supported on memory revisions by kioku: list them all (newest first)")
	}
	size, err := aip.PageSize("page_size", r.GetPageSize())
	if err != nil {
		return nil, err
	}
	revs, next, err := s.mem.ListRevisions(ctx, e.app, id, int32(size), r.GetPageToken())
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
	return newStruct(out)
}

// getMemoryRevision serves {memory}/revisions/{revision}.
func (s *Surface) getMemoryRevision(ctx context.Context, r *vertexv1beta1.GetMemoryRevisionRequest) (*structpb.Struct, error) {
	name := r.GetName()
	_, ids, err := s.policy.parse("name", name, revisionKind)
	if err != nil {
		return nil, err
	}
	i := strings.LastIndex(name, "/revisions/")
	e, id, err := s.memoryName(ctx, "name", name[:i])
	if err != nil {
		return nil, err
	}
	absent := fault.NotFoundf("Memory revision %s not found.", name)
	n, err := strconv.ParseInt(ids[1], 10, 64)
	if err != nil || n < 1 {
		return nil, absent
	}
	rev, err := s.mem.GetRevision(ctx, e.app, id, n)
	if fault.Is(err, fault.NotFound) {
		return nil, absent
	}
	if err != nil {
		return nil, err
	}
	return newStruct(revisionJSON(e, rev))
}

// requiredScope reads a request body's scope, which must be there and may
// name only the user of a user's key.
func requiredScope(ctx context.Context, v any) (map[string]string, error) {
	scope, err := stringMap("scope", v)
	if err != nil {
		return nil, err
	}
	if len(scope) == 0 {
		return nil, fault.InvalidField("scope", "Required field is not set.")
	}
	if err := owned(ctx, scope["user_id"], onlyUser(ctx, "scope user_id", scope["user_id"])); err != nil {
		return nil, err
	}
	return scope, nil
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
func contentFromJSON(field string, v any) (*sessiontype.Content, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fault.InvalidField(field, "%s is required: {\"role\", \"parts\"}", field)
	}
	role, _ := m["role"].(string)
	out := &sessiontype.Content{Role: role}
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
