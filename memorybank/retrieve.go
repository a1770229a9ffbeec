package memorybank

import (
	"context"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/retrieval"
	"github.com/kioku-ai/kioku/model"
)

// Retrieved is a memory found by RetrieveMemories.
type Retrieved struct {
	Memory *memorytype.Memory
	// Distance is 1 minus the similarity score; 0 without a query.
	Distance float64
}

// RetrieveRequest is the input of RetrieveMemories.
type RetrieveRequest struct {
	App   string
	Scope memorytype.Scope
	// Query, when set, selects the TopK most similar memories (TopK 0
	// means 3); otherwise the scope is paged.
	Query string
	TopK  int32
	// PreferTime, when set, is the period whose memories a similarity
	// search prefers; otherwise the one the query names (QueryPeriod).
	PreferTime retrieval.TimeRange
	PageSize   int32
	PageToken  string
	Filter     string
	// Types are the types of memories retrieved; empty: NaturalLanguage
	// only (see memorytype.Filter.Types).
	Types []memorytype.MemoryType
}

// RetrieveMemories returns the memories of a scope most similar to a query,
// or a page of the scope without a query.
func (s *Service) RetrieveMemories(ctx context.Context, r RetrieveRequest) ([]Retrieved, string, error) {
	if err := validateApp(r.App); err != nil {
		return nil, "", err
	}
	if err := validateScope("scope", r.Scope); err != nil {
		return nil, "", err
	}
	f, err := memorytype.ParseFilter(r.Filter)
	if err != nil {
		return nil, "", err
	}
	f.Types = r.Types
	if r.Query == "" {
		size, err := aip.PageSize("simple_retrieval.page_size", r.PageSize)
		if err != nil {
			return nil, "", err
		}
		list, next, err := s.listPage(ctx, "retrieve", r.App, r.Scope, f, r.Filter, size, r.PageToken)
		if err != nil {
			return nil, "", err
		}
		out := make([]Retrieved, len(list))
		for i, m := range list {
			out[i] = Retrieved{Memory: m}
		}
		return out, next, nil
	}
	if len(r.Query) > MaxQueryBytes {
		return nil, "", fault.Invalidf("similarity_search.query is %d bytes; the limit is %d", len(r.Query), MaxQueryBytes)
	}
	k := int(r.TopK)
	switch {
	case k < 0 || k > MaxTopK:
		return nil, "", fault.Invalidf("similarity_search.top_k is %d; it must be 1 to %d (0 means %d)", k, MaxTopK, DefaultTopK)
	case k == 0:
		k = DefaultTopK
	}
	cfg, err := s.config(ctx, r.App)
	if err != nil {
		return nil, "", err
	}
	// The query is embedded, by a model if the embedder is one: it is
	// redacted like the memories it is compared with.
	red, err := s.Redactor(cfg)
	if err != nil {
		return nil, "", err
	}
	r.Query = red.Redact(r.Query)
	prefer := r.PreferTime
	if prefer.Empty() {
		prefer, _ = retrieval.QueryPeriod(r.Query)
	}
	out, err := s.search(ctx, r.App, r.Scope.Key(), r.Query, k, f, cfg.Retrieval.Fusion, prefer)
	if err != nil {
		return nil, "", err
	}
	return out, "", nil
}

// search embeds a query and retrieves the k memories of a scope closest to
// it: with the offline embedder by the lexical side alone, with a model
// embedder by both sides, fused (retrieval.Fuse).
func (s *Service) search(ctx context.Context, app, scopeKey, query string, k int, f memorytype.Filter, fusion retrieval.Fusion, prefer retrieval.TimeRange) ([]Retrieved, error) {
	vecs, err := s.emb.Embed(ctx, []string{query}, model.TaskQuery)
	if err != nil {
		return nil, err
	}
	lexicalOnly := model.IsOffline(s.emb)
	depth := k
	if !lexicalOnly || !prefer.Empty() {
		depth = max(2*k, retrieval.FusionDepth)
	}
	scored, err := s.store.SearchMemories(ctx, memorydriver.SearchQuery{
		App: app, ScopeKey: scopeKey, Vector: vecs[0], Model: s.emb.Name(), Terms: model.OfflineTerms(query),
		AsksWhen: retrieval.AsksWhen(query), K: depth, DenseFillsOnly: lexicalOnly, Filter: f, Now: s.now(),
	})
	if err != nil {
		return nil, err
	}
	var preferred func(*memorytype.Memory) bool
	if !prefer.Empty() {
		preferred = func(m *memorytype.Memory) bool { return prefer.Contains(m.Time()) }
	}
	fused := retrieval.Fuse(scored, k, lexicalOnly, fusion, preferred, func(m *memorytype.Memory) string { return m.ID })
	out := make([]Retrieved, len(fused))
	for i, r := range fused {
		out[i] = Retrieved{Memory: r.Item, Distance: r.Distance}
	}
	return out, nil
}
