package vertex

import (
	"context"
	"time"

	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"
	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/content/vertexcontent"
	"github.com/kioku-ai/kioku/internal/workflow"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Memory generation and retrieval: GenerateMemories starts a memory bank
// operation (stored and run in the background, as through kioku.v1);
// RetrieveMemories reads at once.

// maxDirectMemories is how many facts Vertex AI takes in one
// direct_memories_source.
const maxDirectMemories = 5

// defaultRetrieveSize is Vertex AI's default top_k and page_size of
// RetrieveMemories; maxRetrieveSize its maximum (larger values are
// coerced).
const (
	defaultRetrieveSize = 3
	maxRetrieveSize     = 100
)

func (s *Surface) generateMemories(ctx context.Context, r *aiplatformpb.GenerateMemoriesRequest) (*longrunningpb.Operation, error) {
	e, req, err := s.generateRequest(ctx, r)
	if err != nil {
		return nil, err
	}
	op, err := s.app.GenerateMemories(ctx, req)
	if err != nil {
		return nil, err
	}
	return bankOperationToVertex(e, e.operationName(op.ID), op)
}

// generateRequest reads a GenerateMemories request.
func (s *Surface) generateRequest(ctx context.Context, r *aiplatformpb.GenerateMemoriesRequest) (engine, *memorybank.GenerateRequest, error) {
	e, err := s.memoryEngine("parent", r.GetParent())
	if err != nil {
		return engine{}, nil, err
	}
	g, err := generateFromVertex(r)
	if err != nil {
		return engine{}, nil, err
	}
	req := &memorybank.GenerateRequest{
		App: e.app, Scope: r.GetScope(), DisableConsolidation: r.GetDisableConsolidation(),
		AllowedTopics: g.allowedTopics, Metadata: g.metadata, MergeStrategy: g.strategy,
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
			req.Events = append(req.Events, &sessiontype.Event{Author: c.Role, Content: c})
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
	return e, req, nil
}

// bankResponse is the response of a memory bank operation that succeeded.
func bankResponse(e engine, op *workflow.Operation) (*anypb.Any, error) {
	if op.Kind == memorybank.KindPurge {
		// Google's Go types have no PurgeMemoriesResponse: its shape's
		// (codec.go).
		b, err := proto.Marshal(&aiplatformpb.PurgeArtifactsResponse{PurgeCount: op.Memory.PurgeCount})
		if err != nil {
			return nil, fault.Wrap(fault.Internal, err, "encoding the purge's response")
		}
		return &anypb.Any{TypeUrl: purgeResponseURL, Value: b}, nil
	}
	out := &aiplatformpb.GenerateMemoriesResponse{}
	if op.Memory == nil {
		// An operation of another kind (a session's compaction) read by
		// its name here: no memories.
		return anyOf(v1beta1, "GenerateMemoriesResponse", out)
	}
	for _, g := range op.Memory.Generated {
		vm, err := memoryToVertex(e, g.Memory)
		if err != nil {
			return nil, err
		}
		out.GeneratedMemories = append(out.GeneratedMemories, &aiplatformpb.GenerateMemoriesResponse_GeneratedMemory{
			Memory: vm, Action: actions[g.Action],
		})
	}
	return anyOf(v1beta1, "GenerateMemoriesResponse", out)
}

var actions = map[memorytype.Action]aiplatformpb.GenerateMemoriesResponse_GeneratedMemory_Action{
	memorytype.Created: aiplatformpb.GenerateMemoriesResponse_GeneratedMemory_CREATED,
	memorytype.Updated: aiplatformpb.GenerateMemoriesResponse_GeneratedMemory_UPDATED,
	memorytype.Deleted: aiplatformpb.GenerateMemoriesResponse_GeneratedMemory_DELETED,
}

func (s *Surface) retrieveMemories(ctx context.Context, r *aiplatformpb.RetrieveMemoriesRequest) (*aiplatformpb.RetrieveMemoriesResponse, error) {
	e, err := s.memoryEngine("parent", r.GetParent())
	if err != nil {
		return nil, err
	}
	if len(r.GetScope()) == 0 {
		return nil, fault.InvalidField("scope", "Required field is not set.")
	}
	f, err := retrieveFromVertex(r)
	if err != nil {
		return nil, err
	}
	req := memorybank.RetrieveRequest{App: e.app, Scope: r.GetScope(), Filter: f}
	switch p := r.GetRetrievalParams().(type) {
	case *aiplatformpb.RetrieveMemoriesRequest_SimilaritySearchParams_:
		req.Query, req.TopK = p.SimilaritySearchParams.GetSearchQuery(), p.SimilaritySearchParams.GetTopK()
		if req.Query == "" {
			return nil, fault.InvalidField("similarity_search_params.search_query", "Required field is not set.")
		}
		if req.TopK < 0 {
			return nil, fault.InvalidField("similarity_search_params.top_k", "top_k must not be negative")
		}
		if req.TopK == 0 {
			req.TopK = defaultRetrieveSize
		}
		req.TopK = min(req.TopK, maxRetrieveSize)
	case *aiplatformpb.RetrieveMemoriesRequest_SimpleRetrievalParams_:
		size, err := aip.PageSizeWithin("simple_retrieval_params.page_size", p.SimpleRetrievalParams.GetPageSize(), defaultRetrieveSize, maxRetrieveSize)
		if err != nil {
			return nil, err
		}
		req.PageSize, req.PageToken = int32(size), p.SimpleRetrievalParams.GetPageToken()
	}
	if req.Query == "" && req.PageSize == 0 {
		req.PageSize = defaultRetrieveSize
	}
	found, next, err := s.mem.RetrieveMemories(ctx, req)
	if err != nil {
		return nil, err
	}
	out := &aiplatformpb.RetrieveMemoriesResponse{NextPageToken: next}
	for _, f := range found {
		vm, err := memoryToVertex(e, f.Memory)
		if err != nil {
			return nil, err
		}
		out.RetrievedMemories = append(out.RetrievedMemories, &aiplatformpb.RetrieveMemoriesResponse_RetrievedMemory{Memory: vm, Distance: f.Distance})
	}
	return out, nil
}
