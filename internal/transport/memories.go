package transport

import (
	"context"
	"time"

	"connectrpc.com/connect"
	"github.com/kioku-ai/kioku/fault"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/internal/workflow"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/resource"
	"google.golang.org/protobuf/types/known/emptypb"
)

// MemoryHandler serves kioku.v1.MemoryBankService and
// kioku.v1.OperationService over the application layer: the memory bank
// for memories, the operations of every kind for operations.
type MemoryHandler struct {
	app *workflow.App
	svc *memorybank.Service
}

var (
	_ kiokuv1connect.MemoryBankServiceHandler = (*MemoryHandler)(nil)
	_ kiokuv1connect.OperationServiceHandler  = (*MemoryHandler)(nil)
)

// NewMemoryHandler returns the MemoryBankService and OperationService
// handler.
func NewMemoryHandler(a *workflow.App) *MemoryHandler {
	return &MemoryHandler{app: a, svc: a.Memories()}
}

// respond answers a call with v, or with err when making v failed, so that
// a handler can return respond(fooToProto(x)).
func respond[T any](v *T, err error) (*connect.Response[T], error) {
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(v), nil
}

// convertAll converts each element of in with conv (nil for none).
func convertAll[T, P any](in []T, conv func(T) P) []P {
	var out []P
	for _, v := range in {
		out = append(out, conv(v))
	}
	return out
}

// convertAllOrErr converts each element of in with conv (nil for none),
// which may fail: the first error ends it.
func convertAllOrErr[T, P any](in []T, conv func(T) (P, error)) ([]P, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]P, len(in))
	for i, v := range in {
		var err error
		if out[i], err = conv(v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// CreateMemory implements kiokuv1connect.MemoryBankServiceHandler.
func (h *MemoryHandler) CreateMemory(ctx context.Context, req *connect.Request[kiokuv1.CreateMemoryRequest]) (*connect.Response[kiokuv1.Memory], error) {
	app, err := resource.ParseApp("parent", req.Msg.GetParent())
	if err != nil {
		return nil, err
	}
	m := req.Msg.GetMemory()
	if m == nil {
		return nil, fault.Invalidf("memory is required")
	}
	in := memorybank.MemoryInput{
		ID: req.Msg.GetMemoryId(), Fact: m.GetFact(), Scope: m.GetScope(), Topics: m.GetTopics(),
		DisplayName: m.GetDisplayName(), Description: m.GetDescription(),
	}
	if in.Metadata, err = metadataFromProto("memory.metadata", m.GetMetadata(), "memory.typed_metadata", m.GetTypedMetadata()); err != nil {
		return nil, err
	}
	if in.ExpireTime, in.TTL, err = expirationFromProto("memory", m.GetExpireTime(), m.GetTtl()); err != nil {
		return nil, err
	}
	if in.EventTime, err = timeOrZero(m.GetEventTime()); err != nil {
		return nil, fault.Invalidf("memory.event_time: %v", err)
	}
	if in.StatedTime, err = timeOrZero(m.GetStatedTime()); err != nil {
		return nil, fault.Invalidf("memory.stated_time: %v", err)
	}
	created, err := h.svc.CreateMemory(ctx, app, in)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(memoryToProto(created)), nil
}

// GetMemory implements kiokuv1connect.MemoryBankServiceHandler.
func (h *MemoryHandler) GetMemory(ctx context.Context, req *connect.Request[kiokuv1.GetMemoryRequest]) (*connect.Response[kiokuv1.Memory], error) {
	app, id, err := resource.ParseMemory("name", req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	if err := h.checkMemory(ctx, app, id); err != nil {
		return nil, err
	}
	m, err := h.svc.GetMemory(ctx, app, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(memoryToProto(m)), nil
}

// ListMemories implements kiokuv1connect.MemoryBankServiceHandler.
func (h *MemoryHandler) ListMemories(ctx context.Context, req *connect.Request[kiokuv1.ListMemoriesRequest]) (*connect.Response[kiokuv1.ListMemoriesResponse], error) {
	app, err := resource.ParseApp("parent", req.Msg.GetParent())
	if err != nil {
		return nil, err
	}
	types, err := memoryTypesFromProto("memory_types", req.Msg.GetMemoryTypes())
	if err != nil {
		return nil, err
	}
	list, next, err := h.svc.ListMemories(ctx, memorybank.ListMemoriesRequest{
		App: app, Scope: req.Msg.GetScope(), Filter: req.Msg.GetFilter(), PageSize: req.Msg.GetPageSize(), PageToken: req.Msg.GetPageToken(), Types: types,
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&kiokuv1.ListMemoriesResponse{Memories: convertAll(list, memoryToProto), NextPageToken: next}), nil
}

// memoryPaths are the update_mask paths of UpdateMemory.
const memoryPaths = "fact, display_name, description, topics, metadata, typed_metadata, expire_time, ttl, event_time or stated_time"

// UpdateMemory implements kiokuv1connect.MemoryBankServiceHandler.
func (h *MemoryHandler) UpdateMemory(ctx context.Context, req *connect.Request[kiokuv1.UpdateMemoryRequest]) (*connect.Response[kiokuv1.Memory], error) {
	m := req.Msg.GetMemory()
	app, id, err := resource.ParseMemory("memory.name", m.GetName())
	if err != nil {
		return nil, err
	}
	if err := h.checkMemory(ctx, app, id); err != nil {
		return nil, err
	}
	paths := req.Msg.GetUpdateMask().GetPaths()
	if len(paths) == 0 {
		return nil, fault.Invalidf("update_mask is required: name the fields to change (%s)", memoryPaths)
	}
	var u memorybank.MemoryUpdate
	for _, p := range paths {
		switch p {
		case "fact":
			u.Fact = new(m.GetFact())
		case "topics":
			u.Topics = new(m.GetTopics())
		case "metadata", "typed_metadata":
			md, err := metadataFromProto("memory.metadata", m.GetMetadata(), "memory.typed_metadata", m.GetTypedMetadata())
			if err != nil {
				return nil, err
			}
			u.Metadata = &md
		case "display_name":
			u.DisplayName = new(m.GetDisplayName())
		case "description":
			u.Description = new(m.GetDescription())
		case "expire_time":
			t, err := timeOrZero(m.GetExpireTime())
			if err != nil {
				return nil, fault.Invalidf("memory.expire_time: %v", err)
			}
			u.ExpireTime = &t
		case "ttl":
			ttl, err := durationOf("memory.ttl", m.GetTtl())
			if err != nil {
				return nil, err
			}
			u.TTL = &ttl
		case "event_time":
			t, err := timeOrZero(m.GetEventTime())
			if err != nil {
				return nil, fault.Invalidf("memory.event_time: %v", err)
			}
			u.EventTime = &t
		case "stated_time":
			t, err := timeOrZero(m.GetStatedTime())
			if err != nil {
				return nil, fault.Invalidf("memory.stated_time: %v", err)
			}
			u.StatedTime = &t
		default:
			return nil, fault.Invalidf("update_mask path %q cannot be updated; use %s", p, memoryPaths)
		}
	}
	updated, err := h.svc.UpdateMemory(ctx, app, id, u)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(memoryToProto(updated)), nil
}

// DeleteMemory implements kiokuv1connect.MemoryBankServiceHandler.
func (h *MemoryHandler) DeleteMemory(ctx context.Context, req *connect.Request[kiokuv1.DeleteMemoryRequest]) (*connect.Response[emptypb.Empty], error) {
	app, id, err := resource.ParseMemory("name", req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	if err := h.checkMemory(ctx, app, id); err != nil {
		return nil, err
	}
	return respond(&emptypb.Empty{}, h.svc.DeleteMemory(ctx, app, id))
}

// GenerateMemories implements kiokuv1connect.MemoryBankServiceHandler.
func (h *MemoryHandler) GenerateMemories(ctx context.Context, req *connect.Request[kiokuv1.GenerateMemoriesRequest]) (*connect.Response[kiokuv1.Operation], error) {
	m := req.Msg
	app, err := resource.ParseApp("parent", m.GetParent())
	if err != nil {
		return nil, err
	}
	r := &memorybank.GenerateRequest{
		App: app, Scope: m.GetScope(), DisableConsolidation: m.GetDisableConsolidation(), AllowedTopics: m.GetAllowedTopics(),
	}
	if r.Metadata, err = metadataFromProto("metadata", nil, "metadata", m.GetMetadata()); err != nil {
		return nil, err
	}
	if r.MergeStrategy, err = mergeStrategyFromProto(m.GetMetadataMergeStrategy()); err != nil {
		return nil, err
	}
	switch src := m.GetSource().(type) {
	case *kiokuv1.GenerateMemoriesRequest_SessionSource:
		key, err := parseSessionKey("session_source.session", src.SessionSource.GetSession())
		if err != nil {
			return nil, err
		}
		r.Session = &key
		if r.From, r.To, err = timeRange("session_source.", src.SessionSource.GetStartTime(), src.SessionSource.GetEndTime()); err != nil {
			return nil, err
		}
	case *kiokuv1.GenerateMemoriesRequest_EventsSource:
		for i, pe := range src.EventsSource.GetEvents() {
			ev, err := eventFromProto(pe)
			if err != nil {
				return nil, fault.Invalidf("events_source.events[%d]: %v", i, err)
			}
			r.Events = append(r.Events, ev)
		}
		if len(r.Events) == 0 {
			return nil, fault.Invalidf("events_source.events is empty")
		}
	case *kiokuv1.GenerateMemoriesRequest_DirectMemoriesSource:
		for _, d := range src.DirectMemoriesSource.GetMemories() {
			r.Facts = append(r.Facts, memorybank.DirectFact{Fact: d.GetFact(), Topics: d.GetTopics()})
		}
		if len(r.Facts) == 0 {
			return nil, fault.Invalidf("direct_memories_source.memories is empty")
		}
		if s := src.DirectMemoriesSource.GetSource(); s != nil {
			k, err := parseSessionKey("direct_memories_source.source.session", s.GetSession())
			if err != nil {
				return nil, err
			}
			r.FactsSession, r.FactsEventIDs = &k, s.GetEventIds()
		}
	}
	op, err := h.app.GenerateMemories(ctx, r)
	if err != nil {
		return nil, err
	}
	return h.operation(ctx, op)
}

func (h *MemoryHandler) operation(ctx context.Context, op *workflow.Operation) (*connect.Response[kiokuv1.Operation], error) {
	return respond(operationToProto(op))
}

// RetrieveMemories implements kiokuv1connect.MemoryBankServiceHandler.
func (h *MemoryHandler) RetrieveMemories(ctx context.Context, req *connect.Request[kiokuv1.RetrieveMemoriesRequest]) (*connect.Response[kiokuv1.RetrieveMemoriesResponse], error) {
	m := req.Msg
	app, err := resource.ParseApp("parent", m.GetParent())
	if err != nil {
		return nil, err
	}
	r := memorybank.RetrieveRequest{App: app, Scope: m.GetScope(), Filter: m.GetFilter()}
	if r.Types, err = memoryTypesFromProto("memory_types", m.GetMemoryTypes()); err != nil {
		return nil, err
	}
	switch method := m.GetMethod().(type) {
	case *kiokuv1.RetrieveMemoriesRequest_SimilaritySearch:
		r.Query, r.TopK = method.SimilaritySearch.GetQuery(), method.SimilaritySearch.GetTopK()
		if r.Query == "" {
			return nil, fault.Invalidf("similarity_search.query is required")
		}
		if r.PreferTime, err = timeRangeFromProto("similarity_search.prefer_time", method.SimilaritySearch.GetPreferTime()); err != nil {
			return nil, err
		}
	case *kiokuv1.RetrieveMemoriesRequest_SimpleRetrieval:
		r.PageSize, r.PageToken = method.SimpleRetrieval.GetPageSize(), method.SimpleRetrieval.GetPageToken()
	}
	found, next, err := h.svc.RetrieveMemories(ctx, r)
	if err != nil {
		return nil, err
	}
	out := &kiokuv1.RetrieveMemoriesResponse{NextPageToken: next}
	for _, f := range found {
		out.RetrievedMemories = append(out.RetrievedMemories, &kiokuv1.RetrievedMemory{Memory: memoryToProto(f.Memory), Distance: f.Distance})
	}
	return connect.NewResponse(out), nil
}

// RetrieveProfiles implements kiokuv1connect.MemoryBankServiceHandler.
func (h *MemoryHandler) RetrieveProfiles(ctx context.Context, req *connect.Request[kiokuv1.RetrieveProfilesRequest]) (*connect.Response[kiokuv1.RetrieveProfilesResponse], error) {
	app, err := resource.ParseApp("parent", req.Msg.GetParent())
	if err != nil {
		return nil, err
	}
	profiles, err := h.svc.RetrieveProfiles(ctx, app, req.Msg.GetScope())
	if err != nil {
		return nil, err
	}
	return respond(profilesToProto(profiles))
}

// ListMemoryRevisions implements kiokuv1connect.MemoryBankServiceHandler.
func (h *MemoryHandler) ListMemoryRevisions(ctx context.Context, req *connect.Request[kiokuv1.ListMemoryRevisionsRequest]) (*connect.Response[kiokuv1.ListMemoryRevisionsResponse], error) {
	app, id, err := resource.ParseMemory("parent", req.Msg.GetParent())
	if err != nil {
		return nil, err
	}
	if err := h.checkMemory(ctx, app, id); err != nil {
		return nil, err
	}
	revs, next, err := h.svc.ListRevisions(ctx, app, id, req.Msg.GetPageSize(), req.Msg.GetPageToken())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&kiokuv1.ListMemoryRevisionsResponse{MemoryRevisions: convertAll(revs, revisionToProto), NextPageToken: next}), nil
}

// RollbackMemory implements kiokuv1connect.MemoryBankServiceHandler.
func (h *MemoryHandler) RollbackMemory(ctx context.Context, req *connect.Request[kiokuv1.RollbackMemoryRequest]) (*connect.Response[kiokuv1.Memory], error) {
	app, id, err := resource.ParseMemory("name", req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	if err := h.checkMemory(ctx, app, id); err != nil {
		return nil, err
	}
	rev := req.Msg.GetTargetRevisionId()
	if v, ok := resource.Revision.Match(rev); ok {
		// A revision's full name is accepted too.
		if v[0] != app || v[1] != id {
			return nil, fault.Invalidf("target_revision_id %q is a revision of another memory", rev)
		}
		rev = v[2]
	}
	m, err := h.svc.RollbackMemory(ctx, app, id, rev)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(memoryToProto(m)), nil
}

// PurgeMemories implements kiokuv1connect.MemoryBankServiceHandler.
func (h *MemoryHandler) PurgeMemories(ctx context.Context, req *connect.Request[kiokuv1.PurgeMemoriesRequest]) (*connect.Response[kiokuv1.Operation], error) {
	app, err := resource.ParseApp("parent", req.Msg.GetParent())
	if err != nil {
		return nil, err
	}
	op, err := h.app.PurgeMemories(ctx, &memorybank.PurgeRequest{App: app, Scope: req.Msg.GetScope(), Filter: req.Msg.GetFilter(), Force: req.Msg.GetForce()})
	if err != nil {
		return nil, err
	}
	return h.operation(ctx, op)
}

// GetMemoryBankConfig implements kiokuv1connect.MemoryBankServiceHandler.
func (h *MemoryHandler) GetMemoryBankConfig(ctx context.Context, req *connect.Request[kiokuv1.GetMemoryBankConfigRequest]) (*connect.Response[kiokuv1.MemoryBankConfig], error) {
	app, err := resource.ParseMemoryBankConfig("name", req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	c, err := h.svc.GetConfig(ctx, app)
	if err != nil {
		return nil, err
	}
	return respond(bankConfigToProto(c))
}

// GetQuotaUsage implements kiokuv1connect.MemoryBankServiceHandler.
func (h *MemoryHandler) GetQuotaUsage(ctx context.Context, req *connect.Request[kiokuv1.GetQuotaUsageRequest]) (*connect.Response[kiokuv1.QuotaUsage], error) {
	app, err := resource.ParseQuotaUsage("name", req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	u, end, err := h.svc.Usage(ctx, app)
	if err != nil {
		return nil, err
	}
	q := h.svc.Quotas()
	return connect.NewResponse(&kiokuv1.QuotaUsage{
		Name: resource.QuotaUsageName(app), Day: end.AddDate(0, 0, -1).Format(time.DateOnly),
		Generations: u.Generations, Tokens: u.Tokens,
		GenerationQuota: q.Generations, TokenQuota: q.Tokens,
		ResetTime: timestampOrNil(end),
	}), nil
}

// UpdateMemoryBankConfig implements kiokuv1connect.MemoryBankServiceHandler.
func (h *MemoryHandler) UpdateMemoryBankConfig(ctx context.Context, req *connect.Request[kiokuv1.UpdateMemoryBankConfigRequest]) (*connect.Response[kiokuv1.MemoryBankConfig], error) {
	p := req.Msg.GetMemoryBankConfig()
	app, err := resource.ParseMemoryBankConfig("memory_bank_config.name", p.GetName())
	if err != nil {
		return nil, err
	}
	c, err := bankConfigFromProto(app, p)
	if err != nil {
		return nil, err
	}
	updated, err := h.svc.UpdateConfig(ctx, c, req.Msg.GetUpdateMask().GetPaths())
	if err != nil {
		return nil, err
	}
	return respond(bankConfigToProto(updated))
}

// GetOperation implements kiokuv1connect.OperationServiceHandler.
func (h *MemoryHandler) GetOperation(ctx context.Context, req *connect.Request[kiokuv1.GetOperationRequest]) (*connect.Response[kiokuv1.Operation], error) {
	app, id, err := resource.ParseOperation("name", req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	if err := h.checkOperation(ctx, app, id); err != nil {
		return nil, err
	}
	op, err := h.app.GetOperation(ctx, app, id)
	if err != nil {
		return nil, err
	}
	return h.operation(ctx, op)
}

// ListOperations implements kiokuv1connect.OperationServiceHandler.
func (h *MemoryHandler) ListOperations(ctx context.Context, req *connect.Request[kiokuv1.ListOperationsRequest]) (*connect.Response[kiokuv1.ListOperationsResponse], error) {
	app, err := resource.ParseApp("parent", req.Msg.GetParent())
	if err != nil {
		return nil, err
	}
	states, err := parseOpFilter(req.Msg.GetFilter())
	if err != nil {
		return nil, err
	}
	ops, next, err := h.app.ListOperations(ctx, app, states, req.Msg.GetPageSize(), req.Msg.GetPageToken())
	if err != nil {
		return nil, err
	}
	out, err := convertAllOrErr(ops, operationToProto)
	return respond(&kiokuv1.ListOperationsResponse{Operations: out, NextPageToken: next}, err)
}

// maxWait bounds WaitOperation's timeout.
const maxWait = 10 * time.Minute

// WaitOperation implements kiokuv1connect.OperationServiceHandler.
func (h *MemoryHandler) WaitOperation(ctx context.Context, req *connect.Request[kiokuv1.WaitOperationRequest]) (*connect.Response[kiokuv1.Operation], error) {
	app, id, err := resource.ParseOperation("name", req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	if err := h.checkOperation(ctx, app, id); err != nil {
		return nil, err
	}
	timeout := 60 * time.Second
	if t := req.Msg.GetTimeout(); t != nil {
		if err := t.CheckValid(); err != nil || t.AsDuration() < 0 || t.AsDuration() > maxWait {
			return nil, fault.Invalidf("timeout must be between 0 and %v", maxWait)
		}
		timeout = t.AsDuration()
	}
	if deadline, ok := ctx.Deadline(); ok {
		// Answer a little before the call's deadline rather than fail it.
		timeout = min(timeout, time.Until(deadline)-50*time.Millisecond)
	}
	op, err := h.app.WaitOperation(ctx, app, id, max(timeout, 0))
	if err != nil {
		return nil, err
	}
	return h.operation(ctx, op)
}

// CancelOperation implements kiokuv1connect.OperationServiceHandler.
func (h *MemoryHandler) CancelOperation(ctx context.Context, req *connect.Request[kiokuv1.CancelOperationRequest]) (*connect.Response[kiokuv1.Operation], error) {
	app, id, err := resource.ParseOperation("name", req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	if err := h.checkOperation(ctx, app, id); err != nil {
		return nil, err
	}
	op, err := h.app.CancelOperation(ctx, app, id)
	if err != nil {
		return nil, err
	}
	return h.operation(ctx, op)
}

// checkMemory is the check of a memory named by id (auth.CheckLoaded):
// when the caller's key is confined to a user, a memory outside that
// user's scope answers NOT_FOUND, as one that does not exist.
func (h *MemoryHandler) checkMemory(ctx context.Context, app, id string) error {
	if !auth.LoadCheckNeeded(ctx) {
		return nil
	}
	scope, err := h.svc.MemoryScope(ctx, app, id)
	if err != nil {
		return err
	}
	return auth.CheckLoaded(ctx, scope["user_id"], fault.NotFoundf("memory %s not found", resource.MemoryName(app, id)))
}

// checkOperation is checkMemory for operations: a user key reaches only
// operations on its user's scope.
func (h *MemoryHandler) checkOperation(ctx context.Context, app, id string) error {
	if !auth.LoadCheckNeeded(ctx) {
		return nil
	}
	op, err := h.app.Jobs().Get(ctx, app, id)
	if err != nil {
		return err
	}
	return auth.CheckLoaded(ctx, memorytype.ParseScopeKey(op.Key).User(), fault.NotFoundf("operation %s not found", resource.OperationName(app, id)))
}
