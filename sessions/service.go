package sessions

import (
	"log/slog"
	"sync"
	"time"

	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/wake"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// Config configures a Service. Every field is optional.
type Config struct {
	// Limits bound the inputs; zero fields take DefaultLimits.
	Limits Limits
	// Now returns the current time. Default time.Now.
	Now func() time.Time
	// NewID returns a random id for sessions and events. Default aip.NewID.
	NewID func() string
	// WatchPollInterval is how often a watch looks for events appended by
	// other servers sharing the store. Appends through this Service wake
	// watchers at once. Default 1s.
	WatchPollInterval time.Duration
	// Logger receives background errors (the expiry sweeper). Default
	// slog.Default().
	Logger *slog.Logger
	// Generator writes the summaries of compactions (Compact); nil means
	// none: Compact fails with FailedPrecondition.
	Generator model.Generator
	// SearchIndexDelay is how long the indexer (RunIndexer) lets appends
	// gather before it indexes them for search, with a store that defers
	// indexing (SearchIndexer). Longer gathers bigger, cheaper batches;
	// searches find every appended event whatever it is. Default
	// DefaultSearchIndexDelay.
	SearchIndexDelay time.Duration
}

// Service implements the session rules over a Store. It is safe for
// concurrent use.
type Service struct {
	store  sessiondriver.Store
	limits Limits
	now    func() time.Time
	newID  func() string
	poll   time.Duration
	log    *slog.Logger
	gen    model.Generator
	broker *wake.Broker[sessiontype.Key]

	obsMu     sync.Mutex
	observers []*observation

	// indexKick wakes RunIndexer (nil unless the store is a
	// SearchIndexer); indexDelay is Config.SearchIndexDelay.
	indexKick  chan struct{}
	indexDelay time.Duration
}

// NewService returns a Service over store.
func NewService(store sessiondriver.Store, cfg Config) *Service {
	s := &Service{
		store:  store,
		limits: cfg.Limits.withDefaults(),
		now:    cfg.Now,
		newID:  cfg.NewID,
		poll:   cfg.WatchPollInterval,
		log:    cfg.Logger,
		gen:    cfg.Generator,
		broker: wake.New[sessiontype.Key](),

		indexDelay: cfg.SearchIndexDelay,
	}
	if _, ok := store.(sessiondriver.SearchIndexer); ok {
		s.indexKick = make(chan struct{}, 1)
	}
	if s.indexDelay <= 0 {
		s.indexDelay = DefaultSearchIndexDelay
	}
	s.now, s.newID = aip.Clock(s.now, s.newID)
	if s.poll <= 0 {
		s.poll = time.Second
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s
}

// Limits returns the limits in force.
func (s *Service) Limits() Limits { return s.limits }
