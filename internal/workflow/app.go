package workflow

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/kioku-ai/kioku/blocks"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memoryfiles"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// Config is what an App composes.
type Config struct {
	Sessions *sessions.Service
	Memories *memorybank.Service
	// Files is the memory file tool's service; nil on a server that serves
	// no memory files (DeleteUser then has none to remove).
	Files *memoryfiles.Service
	// Blocks is the core memory blocks' service; nil on a server that
	// serves none (DeleteUser then has none to remove, and no rewrite of
	// blocks is queued).
	Blocks *blocks.Service
	// Generator is the model of the background rewrite of blocks
	// (KindRewrite): the memory bank's generation model, the offline
	// extractor included. Nil: no rewrite is queued.
	Generator model.Generator
	// AttemptTimeout bounds each attempt of a rewrite (jobs.Kind.Timeout).
	// Default 15m.
	AttemptTimeout time.Duration
	// Jobs runs the operations; New registers the compaction of sessions
	// on it (the memory bank registered its kinds when it was built on
	// it).
	Jobs *jobs.Engine
	// SweepInterval is how often Start's sweeper deletes expired sessions.
	// Default 1m.
	SweepInterval time.Duration
	Logger        *slog.Logger
}

// App is kioku's application layer. It is safe for concurrent use.
type App struct {
	sessions *sessions.Service
	memories *memorybank.Service
	files    *memoryfiles.Service
	blocks   *blocks.Service
	gen      model.Generator
	jobs     *jobs.Engine
	cfg      Config
	triggers *sessions.CompactionTriggers
	wg       sync.WaitGroup
}

// New returns the App of the given services, registers the kinds of
// operations it runs itself (KindCompact, KindRewrite) on cfg.Jobs, and
// has the memory bank's triggers queue the rewrite of blocks.
func New(cfg Config) *App {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = time.Minute
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = 15 * time.Minute
	}
	a := &App{sessions: cfg.Sessions, memories: cfg.Memories, files: cfg.Files, blocks: cfg.Blocks, gen: cfg.Generator, jobs: cfg.Jobs, cfg: cfg}
	a.triggers = a.sessions.CompactionTriggers(a.compactionTrigger, func(ctx context.Context, key sessiontype.Key, keepRecent int) (string, error) {
		op, err := a.CompactSession(ctx, CompactRequest{Session: key, KeepRecent: keepRecent})
		if err != nil {
			return "", err
		}
		return op.Name(), nil
	})
	a.registerCompaction()
	a.registerRewrite()
	a.memories.OnTrigger(a.rewriteTrigger)
	return a
}

// Memories returns the memory bank.
func (a *App) Memories() *memorybank.Service { return a.memories }

// Jobs returns the operations engine.
func (a *App) Jobs() *jobs.Engine { return a.jobs }

// Observe implements sessions.Observer: the triggers of both domains
// follow the appends and deletions of sessions, the app's compaction
// trigger (sessions.CompactionTriggers) and then the memory bank's
// generation triggers (memorybank.Service.Observe).
func (a *App) Observe(ctx context.Context, n sessions.Notice) {
	a.triggers.Observe(ctx, n)
	a.memories.Observe(ctx, n)
}

// Start makes the domains follow each other and starts the background
// work, until ctx ends (Wait waits for it to stop): the triggers observe
// every append made through the session service, off the append's path
// (Observe, as the observer "memory_triggers"); the engine's workers run
// the operations; the memory bank's maintenance and the sessions' sweeper
// delete what expired; the sessions' indexer indexes appended events for
// search, in batches after their appends (sessions.Service.RunIndexer).
func (a *App) Start(ctx context.Context) {
	a.sessions.Observe(ctx, "memory_triggers", a, sessions.ObserveOptions{})
	a.wg.Go(func() { a.sessions.RunSweeper(ctx, a.cfg.SweepInterval) })
	a.wg.Go(func() { a.sessions.RunIndexer(ctx) })
	a.wg.Go(func() { a.memories.Run(ctx) })
	a.wg.Go(func() { a.jobs.Run(ctx) })
}

// Wait waits until the background work Start started has stopped: the
// engine's workers have handed their operations back.
func (a *App) Wait() { a.wg.Wait() }

// DeleteSession deletes a session; with forgetMemories it first deletes
// what the memory bank derived from that session only (and removes the
// session from the sources of the other memories), so that a failure
// leaves the session in place to retry. The session must exist (and be
// the caller's) before anything is forgotten; with allowMissing a session
// that does not exist is no error.
func (a *App) DeleteSession(ctx context.Context, key sessiontype.Key, forgetMemories, allowMissing bool) error {
	if forgetMemories {
		if _, _, err := a.sessions.GetSession(ctx, key, sessions.GetSessionRequest{SkipEvents: true}); err != nil {
			if fault.Is(err, fault.NotFound) && allowMissing {
				return nil
			}
			return err
		}
		if err := a.memories.ForgetSession(ctx, key); err != nil {
			return err
		}
	}
	err := a.sessions.DeleteSession(ctx, key)
	if fault.Is(err, fault.NotFound) && allowMissing {
		return nil
	}
	return err
}

// UserErasure is what DeleteUser deleted: the user's sessions, what the
// memory bank held about the user, the user's memory files and the
// user's blocks.
type UserErasure struct {
	Sessions int
	memorybank.Erasure
	Files  int
	Blocks int
}

// DeleteUser erases a user of an app: the user's sessions first (so that
// no generation can read them any more), then what the memory bank holds
// about the user (the operations about the user first, of every kind,
// which stops a generation under way from writing; then the user's
// memories with their revisions, and the watermarks of the user's
// sessions), then the user's memory files (deleted ones too) with their
// revisions, then the user's blocks with theirs (the app's shared blocks
// stay), and last appends the webhooks' user.erased event. Calling it
// again finishes an erasure that stopped.
func (a *App) DeleteUser(ctx context.Context, app, user string) (*UserErasure, error) {
	n, err := a.sessions.DeleteUser(ctx, app, user)
	if err != nil {
		return nil, err
	}
	er, err := a.memories.EraseUser(ctx, app, user)
	if err != nil {
		return nil, err
	}
	var files int
	if a.files != nil {
		if files, err = a.files.EraseUser(ctx, app, user); err != nil {
			return nil, err
		}
	}
	var bl int
	if a.blocks != nil {
		if bl, err = a.blocks.EraseUser(ctx, app, user); err != nil {
			return nil, err
		}
	}
	if err := a.memories.UserErased(ctx, app, user); err != nil {
		return nil, err
	}
	return &UserErasure{Sessions: n, Erasure: *er, Files: files, Blocks: bl}, nil
}
