package vertex

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"
	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/app"
	"github.com/kioku-ai/kioku/internal/content/vertexcontent"
	"github.com/kioku-ai/kioku/internal/server/auth"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/sessions"
)

// Memories. A Vertex AI memory is a kioku memory of the engine's app, with
// the same id, fact, scope and expiry. kioku keeps no display_name or
// description; the Vertex AI SDK's JSON-only topics and metadata map to
// kioku's (rest.go). Every change records a revision, as through kioku.v1.

// maxDirectMemories is how many facts Vertex AI takes in one
// direct_memories_source.
const maxDirectMemories = 5

// defaultRetrieveSize is Vertex AI's default top_k and page_size of
// RetrieveMemories.
const defaultRetrieveSize = 3

func (s *Surface) mountMemories(mux *http.ServeMux, opts []connect.HandlerOption) {
	unary(mux, aiplatformpb.MemoryBankService_CreateMemory_FullMethodName, s.createMemoryRPC, opts)
	unary(mux, aiplatformpb.MemoryBankService_GetMemory_FullMethodName, s.getMemoryRPC, opts)
	unary(mux, aiplatformpb.MemoryBankService_UpdateMemory_FullMethodName, s.updateMemoryRPC, opts)
	unary(mux, aiplatformpb.MemoryBankService_ListMemories_FullMethodName, s.listMemoriesRPC, opts)
	unary(mux, aiplatformpb.MemoryBankService_DeleteMemory_FullMethodName, s.deleteMemoryRPC, opts)
	unary(mux, aiplatformpb.MemoryBankService_GenerateMemories_FullMethodName, s.generateMemoriesRPC, opts)
	unary(mux, aiplatformpb.MemoryBankService_RetrieveMemories_FullMethodName, s.retrieveMemoriesRPC, opts)
}

// memoryExtras are the fields of a memory that only the Vertex AI SDK's
// JSON carries; nil fields are not given.
type memoryExtras struct {
	topics   *[]string
	metadata *map[string]string
}

func memoryToVertex(e engine, m *memorybank.Memory) *aiplatformpb.Memory {
	out := &aiplatformpb.Memory{
		Name:       e.memoryName(m.ID),
		CreateTime: timestamppb.New(m.CreateTime),
		UpdateTime: timestamppb.New(m.UpdateTime),
		Fact:       m.Fact,
		Scope:      m.Scope,
	}
	if !m.ExpireTime.IsZero() {
		out.Expiration = &aiplatformpb.Memory_ExpireTime{ExpireTime: timestamppb.New(m.ExpireTime)}
	}
	return out
}

// memoryName parses a memory's name and checks that the caller may reach
// it: a memory of another user than the key's is NOT_FOUND, as one that is
// not there.
func (s *Surface) memoryName(ctx context.Context, field, name string) (engine, string, error) {
	if s.mem == nil {
		return engine{}, "", errNoMemoryBank
	}
	e, ids, err := s.policy.parse(field, name, "memories", "*")
	if err != nil {
		return engine{}, "", err
	}
	absent := fault.NotFoundf("Memory %s not found.", e.memoryName(ids[0]))
	user := ""
	if auth.LoadCheckNeeded(ctx) {
		scope, err := s.mem.MemoryScope(ctx, e.app, ids[0])
		if fault.Is(err, fault.NotFound) {
			return engine{}, "", absent
		}
		if err != nil {
			return engine{}, "", err
		}
		user = scope["user_id"]
	}
	if err := owned(ctx, user, absent); err != nil {
		return engine{}, "", err
	}
	return e, ids[0], nil
}

// memoryEngine parses the parent of memories.
func (s *Surface) memoryEngine(field, name string) (engine, error) {
	if s.mem == nil {
		return engine{}, errNoMemoryBank
	}
	e, _, err := s.policy.parse(field, name)
	return e, err
}

func (s *Surface) createMemory(ctx context.Context, r *aiplatformpb.CreateMemoryRequest, x memoryExtras) (engine, *memorybank.Memory, error) {
	e, err := s.memoryEngine("parent", r.GetParent())
	if err != nil {
		return engine{}, nil, err
	}
	m := r.GetMemory()
	switch {
	case m == nil:
		return engine{}, nil, fault.InvalidField("memory", "Required field is not set.")
	case m.GetFact() == "":
		return engine{}, nil, fault.InvalidField("memory.fact", "Required field is not set.")
	case len(m.GetScope()) == 0:
		return engine{}, nil, fault.InvalidField("memory.scope", "Required field is not set.")
	}
	if id := r.GetMemoryId(); id != "" && !validVertexID(id) {
		return engine{}, nil, fault.InvalidField("memory_id", "memory_id %q is not valid: use up to 63 characters of [a-z0-9-], starting and ending with a letter or a digit", aip.Truncate(id, 200))
	}
	in := memorybank.MemoryInput{ID: r.GetMemoryId(), Fact: m.GetFact(), Scope: m.GetScope()}
	if x.topics != nil {
		in.Topics = *x.topics
	}
	if x.metadata != nil {
		in.Metadata = *x.metadata
	}
	if in.ExpireTime, in.TTL, err = expiration("memory", m.GetExpireTime(), m.GetTtl(), m.GetTtl() != nil); err != nil {
		return engine{}, nil, err
	}
	created, err := s.mem.CreateMemory(ctx, e.app, in)
	if err != nil {
		return engine{}, nil, err
	}
	return e, created, nil
}

func (s *Surface) createMemoryRPC(ctx context.Context, r *aiplatformpb.CreateMemoryRequest) (*longrunningpb.Operation, error) {
	e, m, err := s.createMemory(ctx, r, restExtras(ctx))
	if err != nil {
		return nil, err
	}
	return s.doneOperation(e.memoryName(m.ID)+"/operations/"+aip.NewID(), v1beta1, "CreateMemoryOperationMetadata", memoryOut(ctx, e, m))
}

func (s *Surface) getMemory(ctx context.Context, name string) (engine, *memorybank.Memory, error) {
	e, id, err := s.memoryName(ctx, "name", name)
	if err != nil {
		return engine{}, nil, err
	}
	m, err := s.mem.GetMemory(ctx, e.app, id)
	if fault.Is(err, fault.NotFound) {
		err = fault.NotFoundf("Memory %s not found.", e.memoryName(id))
	}
	return e, m, err
}

func (s *Surface) getMemoryRPC(ctx context.Context, r *aiplatformpb.GetMemoryRequest) (*aiplatformpb.Memory, error) {
	e, m, err := s.getMemory(ctx, r.GetName())
	if err != nil {
		return nil, err
	}
	return memoryOut(ctx, e, m), nil
}

func (s *Surface) listMemories(ctx context.Context, r *aiplatformpb.ListMemoriesRequest) (engine, []*memorybank.Memory, string, error) {
	e, err := s.memoryEngine("parent", r.GetParent())
	if err != nil {
		return engine{}, nil, "", err
	}
	scope, err := memoryFilter(r.GetFilter())
	if err != nil {
		return engine{}, nil, "", err
	}
	if err := owned(ctx, scope["user_id"], onlyUser(ctx, "filter scope user_id", scope["user_id"])); err != nil {
		return engine{}, nil, "", err
	}
	list, next, err := s.mem.ListMemories(ctx, memorybank.ListMemoriesRequest{
		App: e.app, Scope: scope, PageSize: r.GetPageSize(), PageToken: r.GetPageToken(),
	})
	return e, list, next, err
}

func (s *Surface) listMemoriesRPC(ctx context.Context, r *aiplatformpb.ListMemoriesRequest) (*aiplatformpb.ListMemoriesResponse, error) {
	e, list, next, err := s.listMemories(ctx, r)
	if err != nil {
		return nil, err
	}
	out := &aiplatformpb.ListMemoriesResponse{NextPageToken: next}
	for _, m := range list {
		out.Memories = append(out.Memories, memoryOut(ctx, e, m))
	}
	return out, nil
}

// memoryFilter parses a ListMemories filter: scope equal to a JSON object,
// scope="{\"user_id\": \"123\"}", or each of its keys, scope.user_id="123",
// joined by AND; together they give the exact scope listed.
func memoryFilter(filter string) (memorybank.Scope, error) {
	conds, err := sessions.ParseFilter(filter)
	if err != nil {
		return nil, fault.InvalidField("filter", "%v", err)
	}
	var scope memorybank.Scope
	set := func(k, v string) error {
		if scope == nil {
			scope = memorybank.Scope{}
		}
		if old, ok := scope[k]; ok && old != v {
			return fault.InvalidField("filter", "filter gives scope key %q two values", k)
		}
		scope[k] = v
		return nil
	}
	for _, c := range conds {
		switch {
		case c.Field == "scope":
			var m map[string]string
			if err := json.Unmarshal([]byte(c.Value), &m); err != nil {
				return nil, fault.InvalidField("filter", "filter: scope must equal a JSON object of strings, as in scope=\"{\\\"user_id\\\": \\\"123\\\"}\"")
			}
			for k, v := range m {
				if err := set(k, v); err != nil {
					return nil, err
				}
			}
		case strings.HasPrefix(c.Field, "scope."):
			if err := set(strings.TrimPrefix(c.Field, "scope."), c.Value); err != nil {
				return nil, err
			}
		default:
			return nil, fault.InvalidField("filter", "filter field %q is not supported: ListMemories filters on scope", c.Field)
		}
	}
	return scope, nil
}

func (s *Surface) updateMemory(ctx context.Context, r *aiplatformpb.UpdateMemoryRequest, x memoryExtras) (engine, *memorybank.Memory, error) {
	m := r.GetMemory()
	if m == nil {
		return engine{}, nil, fault.InvalidField("memory", "Required field is not set.")
	}
	e, id, err := s.memoryName(ctx, "memory.name", m.GetName())
	if err != nil {
		return engine{}, nil, err
	}
	paths := r.GetUpdateMask().GetPaths()
	if len(paths) == 0 {
		// No mask: every field the request sets.
		if m.GetFact() != "" {
			paths = append(paths, "fact")
		}
		if m.GetExpiration() != nil {
			paths = append(paths, "expiration")
		}
		if x.topics != nil {
			paths = append(paths, "topics")
		}
		if x.metadata != nil {
			paths = append(paths, "metadata")
		}
	}
	var u memorybank.MemoryUpdate
	for _, p := range paths {
		switch p {
		case "fact":
			if m.GetFact() == "" {
				return engine{}, nil, fault.InvalidField("memory.fact", "fact must not be empty")
			}
			u.Fact = new(m.GetFact())
		case "expire_time", "ttl", "expiration":
			at, ttl, err := expiration("memory", m.GetExpireTime(), m.GetTtl(), m.GetTtl() != nil)
			if err != nil {
				return engine{}, nil, err
			}
			if ttl != 0 {
				u.TTL = &ttl
			} else {
				u.ExpireTime = &at
			}
		case "topics":
			u.Topics = new([]string{})
			if x.topics != nil {
				u.Topics = x.topics
			}
		case "metadata":
			u.Metadata = new(map[string]string{})
			if x.metadata != nil {
				u.Metadata = x.metadata
			}
		case "scope":
			return engine{}, nil, fault.InvalidField("memory.scope", "scope is immutable")
		default:
			return engine{}, nil, fault.InvalidField("update_mask", "update_mask path %q cannot be updated; use fact, expire_time, ttl, topics or metadata", p)
		}
	}
	updated, err := s.mem.UpdateMemory(ctx, e.app, id, u)
	if fault.Is(err, fault.NotFound) {
		err = fault.NotFoundf("Memory %s not found.", e.memoryName(id))
	}
	return e, updated, err
}

func (s *Surface) updateMemoryRPC(ctx context.Context, r *aiplatformpb.UpdateMemoryRequest) (*longrunningpb.Operation, error) {
	e, m, err := s.updateMemory(ctx, r, restExtras(ctx))
	if err != nil {
		return nil, err
	}
	return s.doneOperation(e.memoryName(m.ID)+"/operations/"+aip.NewID(), v1beta1, "UpdateMemoryOperationMetadata", memoryOut(ctx, e, m))
}

func (s *Surface) deleteMemoryRPC(ctx context.Context, r *aiplatformpb.DeleteMemoryRequest) (*longrunningpb.Operation, error) {
	e, id, err := s.memoryName(ctx, "name", r.GetName())
	if err != nil {
		return nil, err
	}
	if err := s.mem.DeleteMemory(ctx, e.app, id); err != nil {
		if fault.Is(err, fault.NotFound) {
			err = fault.NotFoundf("Memory %s not found.", e.memoryName(id))
		}
		return nil, err
	}
	return s.doneOperation(e.memoryName(id)+"/operations/"+aip.NewID(), v1beta1, "DeleteMemoryOperationMetadata", nil)
}

// memoryOperation answers GetOperation for the operations of CreateMemory,
// UpdateMemory and DeleteMemory (see operations.go).
func (s *Surface) memoryOperation(ctx context.Context, ref opRef) (*longrunningpb.Operation, error) {
	if s.mem == nil {
		return nil, errNoMemoryBank
	}
	// Deleted memories keep their scope: it tells whose the operation was.
	scope, err := s.mem.MemoryScope(ctx, ref.engine.app, ref.target)
	if err != nil {
		return nil, s.opNotFound(err, ref)
	}
	if err := owned(ctx, scope["user_id"], fault.NotFoundf("Operation %s not found.", ref.name)); err != nil {
		return nil, err
	}
	m, err := s.mem.GetMemory(ctx, ref.engine.app, ref.target)
	if err == nil {
		return s.doneOperation(ref.name, v1beta1, "UpdateMemoryOperationMetadata", memoryOut(ctx, ref.engine, m))
	}
	if !fault.Is(err, fault.NotFound) {
		return nil, err
	}
	return s.doneOperation(ref.name, v1beta1, "DeleteMemoryOperationMetadata", nil)
}

func (s *Surface) generateMemories(ctx context.Context, r *aiplatformpb.GenerateMemoriesRequest) (engine, *app.Operation, error) {
	e, err := s.memoryEngine("parent", r.GetParent())
	if err != nil {
		return engine{}, nil, err
	}
	req := &memorybank.GenerateRequest{App: e.app, Scope: r.GetScope(), DisableConsolidation: r.GetDisableConsolidation()}
	if st := restStateFrom(ctx); st != nil {
		req.AllowedTopics = st.allowedTopics
	}
	switch src := r.GetSource().(type) {
	case *aiplatformpb.GenerateMemoriesRequest_VertexSessionSource_:
		v := src.VertexSessionSource
		_, key, err := s.session(ctx, "vertex_session_source.session", v.GetSession())
		if err != nil {
			return engine{}, nil, err
		}
		if key.App != e.app {
			return engine{}, nil, fault.InvalidField("vertex_session_source.session", "session %s is not of reasoning engine %s", v.GetSession(), e.name())
		}
		req.Session = &key
		for _, t := range []struct {
			field string
			ts    *timestamppb.Timestamp
			dst   *time.Time
		}{{"start_time", v.GetStartTime(), &req.From}, {"end_time", v.GetEndTime(), &req.To}} {
			if t.ts != nil {
				if err := t.ts.CheckValid(); err != nil {
					return engine{}, nil, fault.InvalidField("vertex_session_source."+t.field, "vertex_session_source.%s: %v", t.field, err)
				}
				*t.dst = t.ts.AsTime()
			}
		}
	case *aiplatformpb.GenerateMemoriesRequest_DirectContentsSource_:
		for i, ev := range src.DirectContentsSource.GetEvents() {
			c, err := vertexcontent.FromVertex(ev.GetContent())
			if err != nil {
				return engine{}, nil, fault.InvalidField("direct_contents_source.events", "direct_contents_source.events[%d].%v", i, err)
			}
			if c == nil {
				return engine{}, nil, fault.InvalidField("direct_contents_source.events", "direct_contents_source.events[%d].content is required", i)
			}
			req.Events = append(req.Events, &sessions.Event{Author: c.Role, Content: c})
		}
		if len(req.Events) == 0 {
			return engine{}, nil, fault.InvalidField("direct_contents_source.events", "direct_contents_source.events is empty")
		}
	case *aiplatformpb.GenerateMemoriesRequest_DirectMemoriesSource_:
		facts := src.DirectMemoriesSource.GetDirectMemories()
		if len(facts) == 0 {
			return engine{}, nil, fault.InvalidField("direct_memories_source.direct_memories", "direct_memories_source.direct_memories is empty")
		}
		if len(facts) > maxDirectMemories {
			return engine{}, nil, fault.InvalidField("direct_memories_source.direct_memories", "direct_memories_source has %d memories; the limit is %d", len(facts), maxDirectMemories)
		}
		for _, f := range facts {
			req.Facts = append(req.Facts, memorybank.DirectFact{Fact: f.GetFact()})
		}
	default:
		return engine{}, nil, fault.InvalidField("source", "give a source: vertex_session_source, direct_contents_source or direct_memories_source")
	}
	if len(req.Scope) == 0 && req.Session == nil {
		return engine{}, nil, fault.InvalidField("scope", "scope is required unless the source is a session")
	}
	op, err := s.app.GenerateMemories(ctx, req)
	return e, op, err
}

func (s *Surface) generateMemoriesRPC(ctx context.Context, r *aiplatformpb.GenerateMemoriesRequest) (*longrunningpb.Operation, error) {
	e, op, err := s.generateMemories(ctx, r)
	if err != nil {
		return nil, err
	}
	return bankOperationToVertex(ctx, e, e.name()+"/operations/"+op.ID, op)
}

// bankResponse is the response of a memory bank operation that succeeded.
func bankResponse(ctx context.Context, e engine, op *app.Operation) (*anypb.Any, error) {
	if op.Kind == memorybank.KindPurge {
		return anypb.New(&structpb.Struct{Fields: map[string]*structpb.Value{"purgeCount": structpb.NewNumberValue(float64(op.Memory.PurgeCount))}})
	}
	out := &aiplatformpb.GenerateMemoriesResponse{}
	if op.Memory == nil {
		// An operation of another kind (a session's compaction) read by
		// its name here: no memories.
		return anyOf(v1beta1, "GenerateMemoriesResponse", out)
	}
	for _, g := range op.Memory.Generated {
		out.GeneratedMemories = append(out.GeneratedMemories, &aiplatformpb.GenerateMemoriesResponse_GeneratedMemory{
			Memory: memoryOut(ctx, e, g.Memory), Action: actions[g.Action],
		})
	}
	return anyOf(v1beta1, "GenerateMemoriesResponse", out)
}

var actions = map[memorybank.Action]aiplatformpb.GenerateMemoriesResponse_GeneratedMemory_Action{
	memorybank.Created: aiplatformpb.GenerateMemoriesResponse_GeneratedMemory_CREATED,
	memorybank.Updated: aiplatformpb.GenerateMemoriesResponse_GeneratedMemory_UPDATED,
	memorybank.Deleted: aiplatformpb.GenerateMemoriesResponse_GeneratedMemory_DELETED,
}

func (s *Surface) retrieveMemories(ctx context.Context, r *aiplatformpb.RetrieveMemoriesRequest, filter string) (engine, []memorybank.Retrieved, string, error) {
	e, err := s.memoryEngine("parent", r.GetParent())
	if err != nil {
		return engine{}, nil, "", err
	}
	if len(r.GetScope()) == 0 {
		return engine{}, nil, "", fault.InvalidField("scope", "Required field is not set.")
	}
	req := memorybank.RetrieveRequest{App: e.app, Scope: r.GetScope(), Filter: filter}
	switch p := r.GetRetrievalParams().(type) {
	case *aiplatformpb.RetrieveMemoriesRequest_SimilaritySearchParams_:
		req.Query, req.TopK = p.SimilaritySearchParams.GetSearchQuery(), p.SimilaritySearchParams.GetTopK()
		if req.Query == "" {
			return engine{}, nil, "", fault.InvalidField("similarity_search_params.search_query", "Required field is not set.")
		}
		if req.TopK == 0 {
			req.TopK = defaultRetrieveSize
		}
	case *aiplatformpb.RetrieveMemoriesRequest_SimpleRetrievalParams_:
		req.PageSize, req.PageToken = p.SimpleRetrievalParams.GetPageSize(), p.SimpleRetrievalParams.GetPageToken()
	}
	if req.Query == "" && req.PageSize == 0 {
		req.PageSize = defaultRetrieveSize
	}
	found, next, err := s.mem.RetrieveMemories(ctx, req)
	return e, found, next, err
}

func (s *Surface) retrieveMemoriesRPC(ctx context.Context, r *aiplatformpb.RetrieveMemoriesRequest) (*aiplatformpb.RetrieveMemoriesResponse, error) {
	e, found, next, err := s.retrieveMemories(ctx, r, "")
	if err != nil {
		return nil, err
	}
	out := &aiplatformpb.RetrieveMemoriesResponse{NextPageToken: next}
	for _, f := range found {
		out.RetrievedMemories = append(out.RetrievedMemories, &aiplatformpb.RetrieveMemoriesResponse_RetrievedMemory{Memory: memoryOut(ctx, e, f.Memory), Distance: f.Distance})
	}
	return out, nil
}
