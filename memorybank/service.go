package memorybank

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/wake"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/redact"
	"github.com/kioku-ai/kioku/resource"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// SessionReader reads the sessions memories are generated from.
// *sessions.Service implements it.
type SessionReader interface {
	// EventsAfter returns up to limit events of a session with sequence
	// greater than after, within [from, to) when set, in order. NotFound
	// when the session does not exist.
	EventsAfter(ctx context.Context, key sessiontype.Key, after int64, from, to time.Time, limit int) ([]*sessiontype.Event, error)
	// ListSessions returns a page of sessions, most recently updated
	// first (for re-arming idle triggers after a start).
	ListSessions(ctx context.Context, r sessions.ListSessionsRequest) ([]*sessiontype.Session, string, error)
}

// Config configures a Service.
type Config struct {
	// Generator is the language model for extraction and consolidation;
	// nil means none: generation from events fails with
	// FailedPrecondition, direct facts still work.
	Generator model.Generator
	// Embedder embeds facts and queries. Default model.Offline.
	Embedder model.Embedder
	// Sessions reads sessions for generation from a session. Required for
	// session sources.
	Sessions SessionReader
	// Jobs runs the memory bank's operations (generations and purges):
	// NewService registers their kinds on it. Nil means none:
	// GenerateMemories and PurgeMemories are FailedPrecondition.
	Jobs *jobs.Engine
	// Operations is the jobs store that Jobs keeps its operations in: the
	// memory store itself, given apart (see package memorydriver).
	// EraseUser deletes a user's operations from it. Required with Jobs
	// (NewService panics without it); nil when Jobs is.
	Operations jobs.Store

	// Now and NewID are the clock and the id source of memories (defaults:
	// time.Now and random ids of 20 lower-case letters and digits).
	Now   func() time.Time
	NewID func() string
	// Logger receives the background errors. Default slog.Default().
	Logger *slog.Logger

	// Quotas are each app's daily allowances of generations and model
	// tokens (quota.go). Zero fields: no quota.
	Quotas Quotas

	// AttemptTimeout bounds each attempt of a generation (jobs.Kind.Timeout),
	// whatever it waits for: past it the attempt fails with
	// DeadlineExceeded and is retried. Its model calls are bounded by the
	// model's own call limits (model.CallLimits); this is the backstop.
	// Default 15m.
	AttemptTimeout time.Duration

	// SweepInterval is how often Run deletes expired memories and
	// revisions. Default 1m.
	SweepInterval time.Duration
	// WatchPollInterval is how often WatchChanges looks for changes
	// committed by other servers sharing the store. Writes through this
	// Service wake watchers at once. Default 1s.
	WatchPollInterval time.Duration
	// WebhooksAllowLoopbackHTTP lets webhooks be http URLs to a loopback
	// address (for development and tests); otherwise they are https.
	WebhooksAllowLoopbackHTTP bool
	// MaxReadBytes bounds the memories (their size in a response, see
	// memoryBytes) one ListMemories or simple RetrieveMemories
	// page returns, and the revisions of a ListRevisions page: a page ends
	// early with the item that passes it, with a next page token. Default
	// 8 MiB, so that a response stays well under the 16 MiB message limit.
	MaxReadBytes int
	// MaxScan bounds the memories one ListMemories or simple
	// RetrieveMemories call reads when its filter leaves conditions to
	// check memory by memory (memorytype.Filter.Residual): past it the page ends
	// with the matches found so far and a token that continues after the
	// last memory read. Default 10 pages of the largest page size (1,000).
	MaxScan int
}

// defaultMaxScan is Config.MaxScan's default.
const defaultMaxScan = 10 * aip.MaxPageSize

// Service is the memory bank. It is safe for concurrent use.
type Service struct {
	store memorydriver.Store
	ops   jobs.Store
	parts storeParts
	gen   model.Generator
	emb   model.Embedder
	sess  SessionReader
	jobs  *jobs.Engine
	now   func() time.Time
	newID func() string
	log   *slog.Logger
	cfg   Config

	configMu    sync.Mutex
	configCache map[string]cachedConfig

	redactorMu sync.Mutex
	redactors  map[string]*redact.Redactor // by the rules' JSON

	triggerMu sync.Mutex
	triggered map[string]firedTrigger // session name → the trigger's generation not ended yet
	onTrigger TriggerFunc
	idle      idleSessions

	feed    *wake.Broker[string]   // wakes WatchChanges on this server's writes
	configs *wake.Broker[struct{}] // wakes the webhooks' dispatcher on UpdateConfig

	usage usageSeen // the apps' usage as this server last saw it
}

type cachedConfig struct {
	cfg *appconfig.Config
	at  time.Time
}

// NewService returns a Service over store, and registers the memory
// bank's kinds of operations on cfg.Jobs.
func NewService(store memorydriver.Store, cfg Config) *Service {
	cfg.Now, cfg.NewID = aip.Clock(cfg.Now, cfg.NewID)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = time.Minute
	}
	if cfg.MaxReadBytes <= 0 {
		cfg.MaxReadBytes = 8 << 20
	}
	if cfg.MaxScan <= 0 {
		cfg.MaxScan = defaultMaxScan
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = 15 * time.Minute
	}
	if cfg.Embedder == nil {
		cfg.Embedder = model.Offline{}
	}
	if cfg.WatchPollInterval <= 0 {
		cfg.WatchPollInterval = time.Second
	}
	if cfg.Jobs != nil && cfg.Operations == nil {
		panic("memorybank: Config.Jobs without Config.Operations, the jobs store it runs on")
	}
	feed := wake.New[string]()
	s := &Service{
		store:       wakingStore{Store: store, feed: feed},
		ops:         cfg.Operations,
		parts:       partsOf(store),
		feed:        feed,
		configs:     wake.New[struct{}](),
		gen:         cfg.Generator,
		emb:         cfg.Embedder,
		sess:        cfg.Sessions,
		jobs:        cfg.Jobs,
		now:         cfg.Now,
		newID:       cfg.NewID,
		log:         cfg.Logger,
		cfg:         cfg,
		configCache: map[string]cachedConfig{},
		redactors:   map[string]*redact.Redactor{},
		triggered:   map[string]firedTrigger{},
	}
	if s.jobs != nil {
		s.register(s.jobs)
	}
	return s
}

// EmbedderName returns the name of the embedder in use.
func (s *Service) EmbedderName() string { return s.emb.Name() }

func validateApp(app string) error { return resource.ValidateID("app id", app, resource.AppIDChars) }

// revision builds the revision recording m's new state.
func (s *Service) revision(cfg *appconfig.Config, m *memorytype.Memory, action memorytype.Action, now time.Time, reason string, extracted []string, op string) *memorytype.Revision {
	r := &memorytype.Revision{
		App: m.App, MemoryID: m.ID, Number: m.Revision, Action: action,
		Fact: m.Fact, Scope: m.Scope, Topics: slices.Clone(m.Topics), Metadata: m.Metadata.Clone(),
		ExtractedFacts: extracted, Sources: mergeSources(nil, m.Sources), Operation: op, Reason: reason,
		CreateTime: now, EventTime: m.EventTime, StatedTime: m.StatedTime, Profile: m.Profile.Clone(),
	}
	if cfg.RevisionTTL > 0 {
		r.ExpireTime = now.Add(cfg.RevisionTTL)
	}
	return r
}
