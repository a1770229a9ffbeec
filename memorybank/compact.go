package memorybank

import (
	"context"
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
