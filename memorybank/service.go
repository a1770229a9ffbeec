package memorybank

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/sessions"
)

// SessionReader reads the sessions memories are generated from.
// *sessions.Service implements it.
type SessionReader interface {
	// EventsAfter returns up to limit events of a session with sequence
	// greater than after, within [from, to) when set, in order. NotFound
	// when the session does not exist.
	EventsAfter(ctx context.Context, key sessions.Key, after int64, from, to time.Time, limit int) ([]*sessions.Event, error)
	// ListSessions returns a page of sessions, most recently updated
	// first (for re-arming idle triggers after a start).
	ListSessions(ctx context.Context, r sessions.ListSessionsRequest) ([]*sessions.Session, string, error)
}

// Config configures a Service.
type Config struct {
	// Generator is the language model for extraction and consolidation;
	// nil means none: generation from events fails with
	// FailedPrecondition, direct facts still work.
	Generator model.Generator
	// Embedder embeds facts and queries. Required.
	Embedder model.Embedder
	// Sessions reads sessions for generation from a session. Required for
	// session sources.
	Sessions SessionReader
	// Compactor compacts sessions for CompactSession operations; nil means
	// none: CompactSession is FailedPrecondition.
	Compactor Compactor

	// Now and NewID are the clock and the id source (defaults: time.Now and
	// aip.NewID).
	Now   func() time.Time
	NewID func() string
	// Logger receives the workers' errors. Default slog.Default().
	Logger *slog.Logger

	// WorkerID names this process in operation leases. Default: a random id.
	WorkerID string
	// Workers is how many operations this process runs at once (Run).
	// Default 2.
	Workers int
	// Lease is how long a claimed operation stays claimed without renewal.
	// Default 60s.
	Lease time.Duration
	// PollInterval is how long idle workers first wait before they look
	// again for operations queued by other servers; the wait doubles while
	// nothing comes, up to MaxPollInterval. Defaults 500ms and 30s.
	PollInterval, MaxPollInterval time.Duration
	// LocalQueue says that no other process queues operations in the store
	// (the embedded SQLite store): idle workers then never poll. They wait
	// for this process's GenerateMemories and PurgeMemories, the end of a
	// run, and the due times of queued operations.
	LocalQueue bool
	// SweepInterval is how often expired memories, revisions and finished
	// operations are deleted. Default 1m.
	SweepInterval time.Duration
	// MaxAttempts is how often an operation is started before it fails
	// for good. Default 5.
	MaxAttempts int
	// OperationRetention is how long finished operations are kept.
	// Default 7 days.
	OperationRetention time.Duration
	// MaxReadBytes bounds the memories (their size in a response, see
	// Memory.responseBytes) one ListMemories or simple RetrieveMemories
	// page returns, and the revisions of a ListRevisions page: a page ends
	// early with the item that passes it, with a next page token. Default
	// 8 MiB, so that a response stays well under the 16 MiB message limit.
	MaxReadBytes int
	// MaxQueuedPerScope and MaxQueuedPerApp bound the operations waiting
	// to run for one scope (or session, for compactions) and for one app:
	// one more is RESOURCE_EXHAUSTED, so that no caller queues more work
	// than the workers take (concurrent requests may pass the bound by
	// their number). Defaults 20 and 1,000.
	MaxQueuedPerScope, MaxQueuedPerApp int
}

// Service is the memory bank. It is safe for concurrent use.
type Service struct {
	store     Store
	gen       model.Generator
	emb       model.Embedder
	sess      SessionReader
	compactor Compactor
	now       func() time.Time
	newID     func() string
	log       *slog.Logger
	cfg       Config

	wake    chan struct{} // a new operation was queued here, or a run ended
	heldMu  sync.Mutex
	held    map[*run]struct{} // runs whose leases the heartbeat renews
	waitMu  sync.Mutex
	waiters map[string][]chan struct{} // operation name → Wait calls
	ended   map[OperationCount]uint64  // operations ended here (N zero), for metrics

	configMu    sync.Mutex
	configCache map[string]cachedConfig

	triggerMu sync.Mutex
	triggered map[string]firedTrigger // session name → the trigger's generation not ended yet
	// compactions holds the compaction triggers' state per session.
	compactions map[string]*compactionTracker
	idle        idleSessions
}

type cachedConfig struct {
	cfg *BankConfig
	at  time.Time
}

// NewService returns a Service over store.
func NewService(store Store, cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewID == nil {
		cfg.NewID = aip.NewID
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.WorkerID == "" {
		cfg.WorkerID = "worker-" + aip.NewID()
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 60 * time.Second
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 500 * time.Millisecond
	}
	if cfg.MaxPollInterval < cfg.PollInterval {
		cfg.MaxPollInterval = max(cfg.PollInterval, 30*time.Second)
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = time.Minute
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 5
	}
	if cfg.OperationRetention <= 0 {
		cfg.OperationRetention = 7 * 24 * time.Hour
	}
	if cfg.MaxReadBytes <= 0 {
		cfg.MaxReadBytes = 8 << 20
	}
	if cfg.MaxQueuedPerScope <= 0 {
		cfg.MaxQueuedPerScope = 20
	}
	if cfg.MaxQueuedPerApp <= 0 {
		cfg.MaxQueuedPerApp = 1000
	}
	if cfg.Embedder == nil {
		cfg.Embedder = model.Offline{}
	}
	return &Service{
		store:       store,
		gen:         cfg.Generator,
		emb:         cfg.Embedder,
		sess:        cfg.Sessions,
		compactor:   cfg.Compactor,
		now:         cfg.Now,
		newID:       cfg.NewID,
		log:         cfg.Logger,
		cfg:         cfg,
		wake:        make(chan struct{}, 1),
		held:        map[*run]struct{}{},
		waiters:     map[string][]chan struct{}{},
		ended:       map[OperationCount]uint64{},
		configCache: map[string]cachedConfig{},
		triggered:   map[string]firedTrigger{},
		compactions: map[string]*compactionTracker{},
	}
}

// EmbedderName returns the name of the embedder in use.
func (s *Service) EmbedderName() string { return s.emb.Name() }

// MemoryInput is the input of CreateMemory.
type MemoryInput struct {
	// ID is the memory id; empty lets the service choose.
	ID         string
	Fact       string
	Scope      Scope
	Topics     []string
	Metadata   map[string]string
	ExpireTime time.Time
	TTL        time.Duration
	// EventTime and StatedTime, when set, say when the fact happened and
	// when it was stated (see Memory).
	EventTime, StatedTime time.Time
}

func validateApp(app string) error { return aip.ValidateID("app id", app, aip.AppIDChars) }

// expiry resolves an expire time or TTL (not both) against now, falling
// back to def (a TTL, 0 for none).
func expiry(now, at time.Time, ttl, def time.Duration) (time.Time, error) {
	switch {
	case !at.IsZero() && ttl != 0:
		return time.Time{}, fault.Invalidf("set expire_time or ttl, not both")
	case ttl < 0:
		return time.Time{}, fault.Invalidf("ttl must be positive")
	case ttl > 0:
		if at = now.Add(ttl); !unixnano.Storable(at) {
			return time.Time{}, fault.Invalidf("ttl %v puts the expiry in %d, past the times kioku stores (%s)", ttl, at.Year(), unixnano.Range)
		}
		return at, nil
	case !at.IsZero():
		if !unixnano.Storable(at) {
			return time.Time{}, fault.Invalidf("expire_time %v is out of range (%s)", at.UTC(), unixnano.Range)
		}
		if !at.After(now) {
			return time.Time{}, fault.Invalidf("expire_time %v is not in the future", at.UTC())
		}
		return at, nil
	case def > 0:
		return now.Add(def), nil
	}
	return time.Time{}, nil
}

// CreateMemory stores a memory directly: no model, no consolidation.
func (s *Service) CreateMemory(ctx context.Context, app string, in MemoryInput) (*Memory, error) {
	if err := validateApp(app); err != nil {
		return nil, err
	}
	if in.ID == "" {
		in.ID = s.newID()
	}
	if err := ValidateID("memory_id", in.ID); err != nil {
		return nil, err
	}
	if err := s.validateMemory("memory", in.Fact, in.Scope, in.Topics, in.Metadata); err != nil {
		return nil, err
	}
	if err := validateTimes("memory", in.EventTime, in.StatedTime); err != nil {
		return nil, err
	}
	cfg, err := s.config(ctx, app)
	if err != nil {
		return nil, err
	}
	now := s.now()
	exp, err := expiry(now, in.ExpireTime, in.TTL, cfg.MemoryTTL)
	if err != nil {
		return nil, err
	}
	vecs, err := s.emb.Embed(ctx, []string{in.Fact}, model.TaskDocument)
	if err != nil {
		return nil, err
	}
	// A fact given directly is stated when it is given, unless the caller
	// says when it was.
	stated := in.StatedTime
	if stated.IsZero() {
		stated = now
	}
	m := &Memory{
		App: app, ID: in.ID, Fact: in.Fact, Scope: in.Scope, Topics: in.Topics, Metadata: in.Metadata,
		CreateTime: now, UpdateTime: now, ExpireTime: exp, Revision: 1,
		EventTime: in.EventTime, StatedTime: stated,
		Embedding: vecs[0], EmbeddingModel: s.emb.Name(),
	}
	rev := s.revision(cfg, m, Created, now, "created directly", nil, "")
	if err := s.store.Write(ctx, &Write{App: app, Now: now, Changes: []Change{{Memory: m, Revision: rev}}}); err != nil {
		if fault.Is(err, fault.AlreadyExists) {
			return nil, fault.New(fault.AlreadyExists, "memory %s already exists", m.Name())
		}
		return nil, err
	}
	return m, nil
}

func (s *Service) validateMemory(field, fact string, scope Scope, topics []string, metadata map[string]string) error {
	if err := validateFact(field+".fact", fact); err != nil {
		return err
	}
	if err := ValidateScope(field+".scope", scope); err != nil {
		return err
	}
	if err := validateTopics(field+".topics", topics); err != nil {
		return err
	}
	return validateMetadata(field+".metadata", metadata)
}

// revision builds the revision recording m's new state.
func (s *Service) revision(cfg *BankConfig, m *Memory, action Action, now time.Time, reason string, extracted []string, op string) *Revision {
	r := &Revision{
		App: m.App, MemoryID: m.ID, Number: m.Revision, Action: action,
		Fact: m.Fact, Scope: m.Scope, Topics: slices.Clone(m.Topics), Metadata: cloneMap(m.Metadata),
		ExtractedFacts: extracted, Sources: mergeSources(nil, m.Sources), Operation: op, Reason: reason,
		CreateTime: now, EventTime: m.EventTime, StatedTime: m.StatedTime,
	}
	if cfg.RevisionTTL > 0 {
		r.ExpireTime = now.Add(cfg.RevisionTTL)
	}
	return r
}

// MemoryScope returns the scope of a memory, deleted or expired ones
// included (their revisions remain readable), for access checks.
func (s *Service) MemoryScope(ctx context.Context, app, id string) (Scope, error) {
	if err := validateApp(app); err != nil {
		return nil, err
	}
	if err := ValidateID("memory id", id); err != nil {
		return nil, err
	}
	m, err := s.store.GetMemory(ctx, app, id)
	if err != nil {
		return nil, err
	}
	return m.Scope, nil
}

// GetMemory returns a visible memory.
func (s *Service) GetMemory(ctx context.Context, app, id string) (*Memory, error) {
	if err := validateApp(app); err != nil {
		return nil, err
	}
	if err := ValidateID("memory id", id); err != nil {
		return nil, err
	}
	m, err := s.store.GetMemory(ctx, app, id)
	if err == nil && !m.Visible(s.now()) {
		err = fault.NotFoundf("memory apps/%s/memories/%s not found", app, id)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// ListMemoriesRequest is the input of ListMemories.
type ListMemoriesRequest struct {
	App       string
	Scope     Scope // empty: every scope
	Filter    string
	PageSize  int32
	PageToken string
}

// ListMemories returns a page of memories, most recently updated first.
func (s *Service) ListMemories(ctx context.Context, r ListMemoriesRequest) ([]*Memory, string, error) {
	if err := validateApp(r.App); err != nil {
		return nil, "", err
	}
	if len(r.Scope) > 0 {
		if err := ValidateScope("scope", r.Scope); err != nil {
			return nil, "", err
		}
	}
	f, err := ParseFilter(r.Filter)
	if err != nil {
		return nil, "", err
	}
	size, err := aip.PageSize("page_size", r.PageSize)
	if err != nil {
		return nil, "", err
	}
	return s.listPage(ctx, "memories", r.App, r.Scope, f, r.Filter, size, r.PageToken)
}

func (s *Service) listPage(ctx context.Context, kind, app string, scope Scope, f Filter, filter string, size int, token string) ([]*Memory, string, error) {
	scopeKey := ""
	if len(scope) > 0 {
		scopeKey = scope.Key()
	}
	digest := aip.QueryDigest(kind, app, scopeKey, filter)
	tok, err := aip.DecodePageToken(token, digest)
	if err != nil {
		return nil, "", err
	}
	q := ListQuery{App: app, ScopeKey: scopeKey, Filter: f, Now: s.now(), AfterID: tok.ID, Limit: size + 1}
	if tok.ID != "" {
		q.AfterUpdate = time.Unix(0, tok.Time)
	}
	list, err := s.store.ListMemories(ctx, q)
	if err != nil {
		return nil, "", err
	}
	size = aip.PageLen(list, size, s.cfg.MaxReadBytes, (*Memory).responseBytes)
	list, next := aip.Page(list, size, digest, func(last *Memory) aip.PageToken {
		return aip.PageToken{Time: last.UpdateTime.UnixNano(), ID: last.ID}
	})
	return list, next, nil
}

// MemoryUpdate lists the fields UpdateMemory changes; nil fields stay.
type MemoryUpdate struct {
	Fact       *string
	Topics     *[]string
	Metadata   *map[string]string
	ExpireTime *time.Time // pointer to zero: never expires
	TTL        *time.Duration
	// EventTime and StatedTime: pointers to zero clear them.
	EventTime, StatedTime *time.Time
}

// UpdateMemory changes a memory and records a revision.
func (s *Service) UpdateMemory(ctx context.Context, app, id string, u MemoryUpdate) (*Memory, error) {
	if u.Fact != nil {
		if err := validateFact("memory.fact", *u.Fact); err != nil {
			return nil, err
		}
	}
	if u.Topics != nil {
		if err := validateTopics("memory.topics", *u.Topics); err != nil {
			return nil, err
		}
	}
	if u.Metadata != nil {
		if err := validateMetadata("memory.metadata", *u.Metadata); err != nil {
			return nil, err
		}
	}
	var event, stated time.Time
	if u.EventTime != nil {
		event = *u.EventTime
	}
	if u.StatedTime != nil {
		stated = *u.StatedTime
	}
	if err := validateTimes("memory", event, stated); err != nil {
		return nil, err
	}
	return s.modify(ctx, app, id, func(m *Memory, now time.Time) (Action, string, error) {
		if u.EventTime != nil {
			m.EventTime = event
		}
		if u.StatedTime != nil {
			m.StatedTime = stated
		}
		if u.Fact != nil {
			m.Fact = *u.Fact
		}
		if u.Topics != nil {
			m.Topics = slices.Clone(*u.Topics)
		}
		if u.Metadata != nil {
			m.Metadata = maps.Clone(*u.Metadata)
		}
		if u.ExpireTime != nil || u.TTL != nil {
			var at time.Time
			var ttl time.Duration
			if u.ExpireTime != nil {
				at = *u.ExpireTime
			}
			if u.TTL != nil {
				if ttl = *u.TTL; ttl <= 0 {
					return 0, "", fault.Invalidf("ttl must be positive")
				}
			}
			if at.IsZero() && ttl == 0 {
				m.ExpireTime = time.Time{}
			} else {
				exp, err := expiry(now, at, ttl, 0)
				if err != nil {
					return 0, "", err
				}
				m.ExpireTime = exp
			}
		}
		return Updated, "updated directly", nil
	})
}

// DeleteMemory deletes a memory; its revisions remain.
func (s *Service) DeleteMemory(ctx context.Context, app, id string) error {
	_, err := s.modify(ctx, app, id, func(m *Memory, _ time.Time) (Action, string, error) {
		m.Deleted = true
		return Deleted, "deleted directly", nil
	})
	return err
}

// modify applies change to a visible memory with a new revision, retrying
// when a concurrent change won.
func (s *Service) modify(ctx context.Context, app, id string, change func(m *Memory, now time.Time) (Action, string, error)) (*Memory, error) {
	for attempt := 0; ; attempt++ {
		m, err := s.GetMemory(ctx, app, id)
		if err != nil {
			return nil, err
		}
		cfg, err := s.config(ctx, app)
		if err != nil {
			return nil, err
		}
		now := s.now()
		old := m.Revision
		oldFact := m.Fact
		action, reason, err := change(m, now)
		if err != nil {
			return nil, err
		}
		if err := s.writeRevision(ctx, cfg, m, old, m.Fact != oldFact, action, now, reason); fault.Is(err, fault.Aborted) && attempt < 3 {
			continue
		} else if err != nil {
			return nil, err
		}
		return m, nil
	}
}

// writeRevision stores m as revision old+1 with its revision record, if the
// memory is still at revision old; otherwise the error is Aborted and the
// caller reads the memory again. It embeds the fact first when
// factChanged, or when m has no vector of the current embedder.
func (s *Service) writeRevision(ctx context.Context, cfg *BankConfig, m *Memory, old int64, factChanged bool, action Action, now time.Time, reason string) error {
	if factChanged || len(m.Embedding) == 0 || m.EmbeddingModel != s.emb.Name() {
		vecs, err := s.emb.Embed(ctx, []string{m.Fact}, model.TaskDocument)
		if err != nil {
			return err
		}
		m.Embedding, m.EmbeddingModel = vecs[0], s.emb.Name()
	}
	m.Revision, m.UpdateTime = old+1, now
	rev := s.revision(cfg, m, action, now, reason, nil, "")
	return s.store.Write(ctx, &Write{App: m.App, Now: now, Changes: []Change{{Memory: m, Revision: rev, ExpectRevision: old}}})
}

// Retrieved is a memory found by RetrieveMemories.
type Retrieved struct {
	Memory *Memory
	// Distance is 1 minus the similarity score; 0 without a query.
	Distance float64
}

// RetrieveRequest is the input of RetrieveMemories.
type RetrieveRequest struct {
	App   string
	Scope Scope
	// Query, when set, selects the TopK most similar memories (TopK 0
	// means 3); otherwise the scope is paged.
	Query string
	TopK  int32
	// PreferTime, when set, is the period whose memories a similarity
	// search prefers; otherwise the one the query names (QueryPeriod).
	PreferTime TimeRange
	PageSize   int32
	PageToken  string
	Filter     string
}

// RetrieveMemories returns the memories of a scope most similar to a query,
// or a page of the scope without a query.
func (s *Service) RetrieveMemories(ctx context.Context, r RetrieveRequest) ([]Retrieved, string, error) {
	if err := validateApp(r.App); err != nil {
		return nil, "", err
	}
	if err := ValidateScope("scope", r.Scope); err != nil {
		return nil, "", err
	}
	f, err := ParseFilter(r.Filter)
	if err != nil {
		return nil, "", err
	}
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
	prefer := r.PreferTime
	if prefer.Empty() {
		prefer, _ = QueryPeriod(r.Query)
	}
	out, err := s.search(ctx, r.App, r.Scope.Key(), r.Query, k, f, cfg.Retrieval.Fusion, prefer)
	if err != nil {
		return nil, "", err
	}
	return out, "", nil
}

// search embeds a query and retrieves the k memories of a scope closest to
// it: with the offline embedder by the lexical side alone, with a model
// embedder by both sides, fused.
func (s *Service) search(ctx context.Context, app, scopeKey, query string, k int, f Filter, fusion Fusion, prefer TimeRange) ([]Retrieved, error) {
	vecs, err := s.emb.Embed(ctx, []string{query}, model.TaskQuery)
	if err != nil {
		return nil, err
	}
	lexicalOnly := model.IsOffline(s.emb)
	depth := k
	if !lexicalOnly || !prefer.Empty() {
		depth = max(2*k, fusionDepth)
	}
	scored, err := s.store.SearchMemories(ctx, SearchQuery{
		App: app, ScopeKey: scopeKey, Vector: vecs[0], Model: s.emb.Name(), Terms: model.OfflineTerms(query),
		AsksWhen: AsksWhen(query), K: depth, DenseFillsOnly: lexicalOnly, Filter: f, Now: s.now(),
	})
	if err != nil {
		return nil, err
	}
	return fuse(scored, k, lexicalOnly, fusion, prefer), nil
}

// ListRevisions returns a page of a memory's revisions, newest first. It
// works for deleted memories too.
func (s *Service) ListRevisions(ctx context.Context, app, id string, pageSize int32, token string) ([]*Revision, string, error) {
	if err := validateApp(app); err != nil {
		return nil, "", err
	}
	if err := ValidateID("memory id", id); err != nil {
		return nil, "", err
	}
	size, err := aip.PageSize("page_size", pageSize)
	if err != nil {
		return nil, "", err
	}
	if _, err := s.store.GetMemory(ctx, app, id); err != nil {
		return nil, "", err
	}
	digest := aip.QueryDigest("revisions", app, id)
	tok, err := aip.DecodePageToken(token, digest)
	if err != nil {
		return nil, "", err
	}
	revs, err := s.store.ListRevisions(ctx, app, id, tok.Seq, size+1, s.now())
	if err != nil {
		return nil, "", err
	}
	size = aip.PageLen(revs, size, s.cfg.MaxReadBytes, (*Revision).responseBytes)
	revs, next := aip.Page(revs, size, digest, func(last *Revision) aip.PageToken {
		return aip.PageToken{Seq: last.Number}
	})
	return revs, next, nil
}

// GetRevision returns one revision of a memory, deleted or not; an expired
// revision is NotFound.
func (s *Service) GetRevision(ctx context.Context, app, id string, number int64) (*Revision, error) {
	if err := validateApp(app); err != nil {
		return nil, err
	}
	if err := ValidateID("memory id", id); err != nil {
		return nil, err
	}
	r, err := s.store.GetRevision(ctx, app, id, number)
	if err == nil && !r.ExpireTime.IsZero() && !s.now().Before(r.ExpireTime) {
		err = fault.NotFoundf("revision %d of memory %s not found", number, aip.MemoryName(app, id))
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// RollbackMemory restores a memory, deleted or not, to a revision, and
// records the restoration as a new revision.
func (s *Service) RollbackMemory(ctx context.Context, app, id, revision string) (*Memory, error) {
	if err := validateApp(app); err != nil {
		return nil, err
	}
	if err := ValidateID("memory id", id); err != nil {
		return nil, err
	}
	n, err := strconv.ParseInt(revision, 10, 64)
	if err != nil || n < 1 {
		return nil, fault.Invalidf("target_revision_id %q is not a revision number", revision)
	}
	for attempt := 0; ; attempt++ {
		m, err := s.store.GetMemory(ctx, app, id)
		if err != nil {
			return nil, err
		}
		target, err := s.store.GetRevision(ctx, app, id, n)
		if err != nil {
			return nil, err
		}
		if target.Action == Deleted {
			return nil, fault.Invalidf("revision %d records a deletion; roll back to a revision that holds the fact", n)
		}
		cfg, err := s.config(ctx, app)
		if err != nil {
			return nil, err
		}
		now := s.now()
		old := m.Revision
		action, reason := Updated, "rollback to revision "+revision
		if m.Deleted || m.Expired(now) {
			action, reason = Created, "restored by rollback to revision "+revision
			m.Deleted = false
			m.ExpireTime = time.Time{}
			if cfg.MemoryTTL > 0 {
				m.ExpireTime = now.Add(cfg.MemoryTTL)
			}
		}
		m.Fact, m.Topics, m.Metadata, m.Sources = target.Fact, target.Topics, target.Metadata, target.Sources
		m.EventTime, m.StatedTime = target.EventTime, target.StatedTime
		if err := s.writeRevision(ctx, cfg, m, old, true, action, now, reason); fault.Is(err, fault.Aborted) && attempt < 3 {
			continue
		} else if err != nil {
			return nil, err
		}
		return m, nil
	}
}

// GetConfig returns an app's configuration.
func (s *Service) GetConfig(ctx context.Context, app string) (*BankConfig, error) {
	if err := validateApp(app); err != nil {
		return nil, err
	}
	return s.store.GetConfig(ctx, app)
}

// The fields of BankConfig an update mask may name.
var configFields = []string{"managed_topics", "custom_topics", "generation_examples", "memory_ttl", "revision_ttl", "generation_trigger", "retrieval", "compaction_trigger"}

// UpdateConfig changes the fields of an app's configuration named in mask
// (all of them when mask is empty) to those of c.
func (s *Service) UpdateConfig(ctx context.Context, c *BankConfig, mask []string) (*BankConfig, error) {
	if err := validateApp(c.App); err != nil {
		return nil, err
	}
	if len(mask) == 0 {
		mask = configFields
	}
	cur, err := s.store.GetConfig(ctx, c.App)
	if err != nil {
		return nil, err
	}
	next := *cur
	for _, f := range mask {
		switch f {
		case "managed_topics":
			next.ManagedTopics = c.ManagedTopics
		case "custom_topics":
			next.CustomTopics = c.CustomTopics
		case "generation_examples":
			next.Examples = c.Examples
		case "memory_ttl":
			next.MemoryTTL = c.MemoryTTL
		case "revision_ttl":
			next.RevisionTTL = c.RevisionTTL
		case "generation_trigger":
			next.Trigger = c.Trigger
		case "compaction_trigger":
			next.Compaction = c.Compaction
		case "retrieval":
			next.Retrieval = c.Retrieval
		default:
			return nil, fault.Invalidf("update_mask path %q is not a field of the memory bank configuration (%v)", f, configFields)
		}
	}
	if err := validateConfig(&next); err != nil {
		return nil, err
	}
	next.App = c.App
	next.UpdateTime = s.now()
	if err := s.store.PutConfig(ctx, &next); err != nil {
		return nil, err
	}
	s.configMu.Lock()
	delete(s.configCache, c.App)
	s.configMu.Unlock()
	return &next, nil
}

// configTTL is how long a configuration is cached for the hot paths
// (appends that may trigger generation).
const configTTL = 5 * time.Second

// config returns an app's configuration, cached briefly.
func (s *Service) config(ctx context.Context, app string) (*BankConfig, error) {
	now := s.now()
	s.configMu.Lock()
	c, ok := s.configCache[app]
	s.configMu.Unlock()
	if ok && now.Sub(c.at) < configTTL {
		return c.cfg, nil
	}
	cfg, err := s.store.GetConfig(ctx, app)
	if err != nil {
		return nil, err
	}
	s.configMu.Lock()
	s.configCache[app] = cachedConfig{cfg: cfg, at: now}
	s.configMu.Unlock()
	return cfg, nil
}

// ForgetSession deletes the memories derived only from a session and
// removes the session from the sources of the others, with revisions that
// say so.
func (s *Service) ForgetSession(ctx context.Context, key sessions.Key) error {
	name := key.Name()
	for attempt := 0; ; attempt++ {
		now := s.now()
		mems, err := s.store.MemoriesBySource(ctx, key.App, name, now)
		if err != nil {
			return err
		}
		if len(mems) == 0 {
			return nil
		}
		cfg, err := s.config(ctx, key.App)
		if err != nil {
			return err
		}
		w := &Write{App: key.App, Now: now}
		for _, m := range mems {
			old := m.Revision
			m.Sources = slices.DeleteFunc(m.Sources, func(src Source) bool { return src.Session == name })
			m.Revision, m.UpdateTime = old+1, now
			action := Updated
			if len(m.Sources) == 0 {
				m.Deleted, action = true, Deleted
			}
			w.Changes = append(w.Changes, Change{Memory: m, Revision: s.revision(cfg, m, action, now, "session forgotten: "+name, nil, ""), ExpectRevision: old})
		}
		err = s.store.Write(ctx, w)
		if fault.Is(err, fault.Aborted) && attempt < 5 {
			continue
		}
		return err
	}
}
