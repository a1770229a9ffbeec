package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/resource"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// Compacting a session is a session matter (sessions.Service.Compact
// writes the summary); it runs as an operation so that it is durable like
// the memory bank's: queued at once, claimed with a lease by any server's
// worker, retried when the model is unavailable, resumed after a restart.
// A compaction is idempotent, so running it again after a crash changes
// nothing that was done. The apps' compaction triggers (package sessions'
// CompactionTrigger) are kept in the memory bank's configuration, where
// kioku.v1's MemoryBankConfig has them.

// KindCompact is the kind of a session's compaction.
const KindCompact = "CompactSession"

// CompactRequest is the input of CompactSession.
type CompactRequest struct {
	Session sessiontype.Key
	// UpTo and KeepRecent are sessions.CompactRequest's.
	UpTo       int64
	KeepRecent int
}

func (r *CompactRequest) request() sessions.CompactRequest {
	return sessions.CompactRequest{UpTo: r.UpTo, KeepRecent: r.KeepRecent}
}

// Compaction is a compaction operation's request and what it did.
type Compaction struct {
	CompactRequest
	// Event is the session's latest compaction (nil: nothing to compact,
	// or not done yet); Created reports that the operation appended
	// compaction events.
	Event   *sessiontype.Event
	Created bool
	// ModelCalls counts the summaries written, EventsProcessed the events
	// summarised.
	ModelCalls, EventsProcessed int
}

// compactRecord and compactResult are a compaction's request and result
// in its operation's record, in the shapes the memory bank's operation
// record held them (see memorybank/record).
type compactRecord struct {
	Session    string `json:"session"`
	UpTo       int64  `json:"up_to,omitempty"`
	KeepRecent int    `json:"keep_recent,omitempty"`
}

type compactResult struct {
	Compacted       *compactedRecord `json:"compacted,omitempty"`
	ModelCalls      int              `json:"model_calls,omitempty"`
	EventsProcessed int              `json:"events_processed,omitempty"`
}

type compactedRecord struct {
	Event   *sessiontype.Event `json:"event,omitempty"` // sessiontype.Event's own stored form
	Created bool               `json:"created,omitempty"`
}

// compactionKey is the key of a session's compactions: they run one at a
// time, and a key confined to the session's user reaches them.
func compactionKey(key sessiontype.Key) string {
	return memorytype.Scope{memorytype.ScopeUser: key.User, "session": key.ID}.Key()
}

func (a *App) registerCompaction() {
	a.jobs.Register(jobs.Kind{
		Name: KindCompact, Domain: "session", Run: a.compact,
		Describe: func(key string) string { return "scope " + memorytype.ParseScopeKey(key).String() },
		Owner:    func(key string) string { return memorytype.ParseScopeKey(key).User() },
		Ended: func(op *jobs.Operation) {
			if c, err := compactionOf(op); err == nil {
				a.triggers.Ended(c.Session, op.Name())
			}
		},
	})
}

// compactionTrigger is an app's compaction trigger, as the memory bank's
// configuration keeps it.
func (a *App) compactionTrigger(ctx context.Context, app string) (sessions.CompactionTrigger, error) {
	cfg, err := a.memories.AppConfig(ctx, app)
	if err != nil {
		return sessions.CompactionTrigger{}, err
	}
	return cfg.Compaction, nil
}

// CompactSession queues the compaction of a session and returns its
// operation. Without a generation model it is FailedPrecondition; a
// session that does not exist is NotFound.
func (a *App) CompactSession(ctx context.Context, r CompactRequest) (*Operation, error) {
	if err := a.sessions.CompactionReady(ctx, r.Session, r.request()); err != nil {
		return nil, err
	}
	op, err := a.jobs.Enqueue(ctx, r.Session.App, KindCompact, compactionKey(r.Session), encodeRecord(compactRecord{Session: r.Session.Name(), UpTo: r.UpTo, KeepRecent: r.KeepRecent}))
	if err != nil {
		return nil, err
	}
	return a.View(op)
}

// compact is the handler of KindCompact.
func (a *App) compact(ctx context.Context, b *jobs.Batch) (*jobs.Outcome, error) {
	op := b.Operations()[0]
	c, err := compactionOf(op)
	if err != nil {
		return nil, fault.Wrap(fault.Internal, err, "operation %s", op.Name())
	}
	// The app's redaction, read afresh: a compaction sends the session to
	// the model.
	cfg, err := a.memories.GetConfig(ctx, c.Session.App)
	if err != nil {
		return nil, err
	}
	req := c.request()
	if req.Redactor, err = a.memories.Redactor(cfg); err != nil {
		return nil, err
	}
	b.Progress("summarising")
	res, err := a.sessions.Compact(ctx, c.Session, req)
	if err != nil {
		return nil, err
	}
	return &jobs.Outcome{Result: encodeRecord(compactResult{
		Compacted:  &compactedRecord{Event: res.Event, Created: res.Created},
		ModelCalls: res.ModelCalls, EventsProcessed: res.EventsRead,
	})}, nil
}

// encodeRecord returns the JSON of a request or result record.
func encodeRecord(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // records hold nothing json cannot encode
	}
	return b
}

// compactionOf decodes a compaction operation.
func compactionOf(op *jobs.Operation) (*Compaction, error) {
	var req compactRecord
	if err := decodeStrict(op.Request, &req); err != nil {
		return nil, fmt.Errorf("decoding the request of operation %s: %w", op.Name(), err)
	}
	app, user, id, err := resource.ParseSession("compact.session", req.Session)
	if err != nil {
		return nil, err
	}
	c := &Compaction{CompactRequest: CompactRequest{Session: sessiontype.Key{App: app, User: user, ID: id}, UpTo: req.UpTo, KeepRecent: req.KeepRecent}}
	var res compactResult
	if err := decodeStrict(op.Result, &res); err != nil {
		return nil, fmt.Errorf("decoding the result of operation %s: %w", op.Name(), err)
	}
	if r := res.Compacted; r != nil {
		c.Event, c.Created = r.Event, r.Created
	}
	c.ModelCalls, c.EventsProcessed = res.ModelCalls, res.EventsProcessed
	return c, nil
}

// decodeStrict decodes a JSON object of a record (none: v stays zero),
// refusing fields it does not know.
func decodeStrict(b []byte, v any) error {
	if len(b) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
