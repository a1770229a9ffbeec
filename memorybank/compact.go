package memorybank

import (
	"context"
	"strconv"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/sessions"
)

// Compacting a session is a session matter (package sessions writes the
// summary); it runs as an operation of this package so that it is durable
// like the others: queued at once, claimed with a lease by any server's
// worker, retried when the model is unavailable, resumed after a restart.
// A compaction is idempotent (sessions.Service.Compact), so running it
// again after a crash changes nothing that was done.

// Compactor compacts sessions; *sessions.Service implements it.
type Compactor interface {
	// CompactionReady checks what a compaction needs before it is queued.
	CompactionReady(ctx context.Context, key sessions.Key, r sessions.CompactRequest) error
	// Compact compacts the session.
	Compact(ctx context.Context, key sessions.Key, r sessions.CompactRequest) (*sessions.CompactResult, error)
	// EventsSinceCompaction returns how many events were appended to the
	// session after its latest compaction event (all of them when it has
	// none), for the triggers.
	EventsSinceCompaction(ctx context.Context, key sessions.Key) (int64, error)
}

// CompactionTrigger compacts an app's sessions without the caller asking:
// once EventCount events, or EventBytes bytes of events, have been appended
// to a session since its last compaction (0: off).
type CompactionTrigger struct {
	EventCount int
	// EventBytes is counted in memory by the server the appends went
	// through; a restart starts the count again.
	EventBytes int64
	// KeepRecent is the compaction's KeepRecent (0: its default).
	KeepRecent int
}

// CompactRequest is the input of CompactSession.
type CompactRequest struct {
	Session sessions.Key
	// UpTo and KeepRecent are sessions.CompactRequest's.
	UpTo       int64
	KeepRecent int
}

func (r *CompactRequest) request() sessions.CompactRequest {
	return sessions.CompactRequest{UpTo: r.UpTo, KeepRecent: r.KeepRecent}
}

// CompactOutcome is the result of a compaction operation.
type CompactOutcome struct {
	// Event is the session's latest compaction (nil: nothing to compact).
	Event *sessions.Event
	// Created reports that the operation appended compaction events.
	Created bool
}

// compactionScope is the scope key of a session's compactions: they run
// one at a time, and a key confined to the session's user reaches them.
func compactionScope(key sessions.Key) string {
	return Scope{"user_id": key.User, "session": key.ID}.Key()
}

// CompactSession queues the compaction of a session and returns its
// operation. Without a generation model it is FailedPrecondition; a
// session that does not exist is NotFound.
func (s *Service) CompactSession(ctx context.Context, r *CompactRequest) (*Operation, error) {
	if s.compactor == nil {
		return nil, fault.New(fault.FailedPrecondition, "this server does not compact sessions (the memory bank has no sessions.Service to compact)")
	}
	if err := s.compactor.CompactionReady(ctx, r.Session, r.request()); err != nil {
		return nil, err
	}
	op := &Operation{
		App: r.Session.App, ID: s.newID(), Method: MethodCompact, State: OpPending,
		ScopeKey: compactionScope(r.Session), Compact: r, CreateTime: s.now(), Progress: "queued",
	}
	return op, s.enqueue(ctx, op)
}

// compact runs a compaction and returns the write that completes it.
func (r *run) compact(ctx context.Context) (*Write, error) {
	s := r.s
	req := r.ops[0].Compact
	if s.compactor == nil || req == nil {
		return nil, fault.New(fault.FailedPrecondition, "this server cannot run compactions")
	}
	r.progress("summarising")
	res, err := s.compactor.Compact(ctx, req.Session, req.request())
	if err != nil {
		return nil, err
	}
	now := s.now()
	return &Write{App: r.ops[0].App, Now: now, Operations: r.updates(func(op *Operation) {
		op.State, op.EndTime, op.Progress = OpSucceeded, now, "done"
		op.ModelCalls += res.ModelCalls
		op.EventsProcessed = res.EventsRead
		op.Compacted = &CompactOutcome{Event: res.Event, Created: res.Created}
		op.LeaseOwner, op.LeaseExpiry = "", time.Time{}
	})}, nil
}

// compactionTracker is what the compaction triggers know of a session.
type compactionTracker struct {
	// bytes appended through this server since its last compaction.
	bytes int64
	// fired is the operation queued and not ended yet ("" when none), and
	// when it was queued.
	fired string
	at    time.Time
	// seen is when the tracker last changed, to forget idle sessions.
	seen time.Time
}

// compactionTrigger applies an app's compaction trigger to a notice of
// appends: once EventCount events (counted by the session service since
// the session's latest compaction) or EventBytes bytes (counted here) are
// reached, it queues a compaction, and none other for the session until
// that one ends. Problems are logged.
func (s *Service) compactionTrigger(ctx context.Context, t CompactionTrigger, n sessions.Notice) {
	if t.EventCount <= 0 && t.EventBytes <= 0 || s.compactor == nil || s.gen == nil {
		return
	}
	name := n.Key.Name()
	now := s.now()
	s.triggerMu.Lock()
	tr := s.compactions[name]
	if tr == nil {
		tr = &compactionTracker{}
		s.compactions[name] = tr
	}
	tr.bytes += n.Bytes
	tr.seen = now
	if tr.fired != "" && now.Sub(tr.at) < firedTTL {
		s.triggerMu.Unlock()
		return
	}
	bytes := tr.bytes
	s.triggerMu.Unlock()

	why := ""
	if t.EventBytes > 0 && bytes >= t.EventBytes {
		why = "every " + strconv.FormatInt(t.EventBytes, 10) + " bytes"
	} else if t.EventCount > 0 {
		since, err := s.compactor.EventsSinceCompaction(ctx, n.Key)
		if err != nil {
			s.log.WarnContext(ctx, "reading a session for the compaction trigger", "session", name, "error", err)
			return
		}
		if since >= int64(t.EventCount) {
			why = "every " + strconv.Itoa(t.EventCount) + " events"
		}
	}
	if why == "" {
		return
	}
	op, err := s.CompactSession(context.WithoutCancel(ctx), &CompactRequest{Session: n.Key, KeepRecent: t.KeepRecent})
	if err != nil {
		s.log.WarnContext(ctx, "queueing a triggered compaction", "session", name, "error", err)
		return
	}
	s.triggerMu.Lock()
	if tr := s.compactions[name]; tr != nil {
		tr.fired, tr.at, tr.bytes = op.Name(), now, 0
	}
	s.triggerMu.Unlock()
	s.log.InfoContext(ctx, "session compaction triggered", "session", name, "trigger", why, "operation", op.Name())
}

// compactionEnded lets the triggers queue the next compaction of the
// session of a compaction operation that ended.
func (s *Service) compactionEnded(op *Operation) {
	if op.Compact == nil {
		return
	}
	s.triggerMu.Lock()
	if tr := s.compactions[op.Compact.Session.Name()]; tr != nil && tr.fired == op.Name() {
		tr.fired, tr.bytes = "", 0
	}
	s.triggerMu.Unlock()
}

func (s *Service) forgetCompaction(session string) {
	s.triggerMu.Lock()
	delete(s.compactions, session)
	s.triggerMu.Unlock()
}

// pruneCompactions forgets sessions that have seen no append for firedTTL.
func (s *Service) pruneCompactions(now time.Time) {
	s.triggerMu.Lock()
	defer s.triggerMu.Unlock()
	for name, tr := range s.compactions {
		if now.Sub(tr.seen) >= firedTTL {
			delete(s.compactions, name)
		}
	}
}
