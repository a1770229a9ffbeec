package memorybank

import (
	"context"
	"slices"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/jobs"
)

// ChangeRetention is how long the change feed keeps a change: a reader
// that resumes from a cursor older than that is told it missed changes
// (Service.Changes), never given a silent gap. The sweeper
// (SweepExpired) removes older changes.
const ChangeRetention = 7 * 24 * time.Hour

// MaxChangesPerRead bounds the changes one Service.Changes call returns.
const MaxChangesPerRead = 500

// ChangeRecord is one entry of an app's change feed: a memory created,
// updated or deleted by a committed Write, or (Event set) an event for the
// webhooks that is not a memory's change. A Store appends them in the
// transaction that commits what they record (Write.ChangeRecords), so an
// entry is in the feed if and only if what it records was committed. The
// feed is the webhooks' outbox; Service.Changes and WatchChanges, which
// report changes of memories, leave the events out.
type ChangeRecord struct {
	App string
	// Cursor numbers the app's changes: 1, 2, 3... in commit order, with
	// no gap (a store keeps a counter per app, raised in the Write).
	Cursor int64
	// Action is the revision's: Created, Updated or Deleted.
	Action   Action
	MemoryID string
	Scope    Scope
	// Revision is the number of the revision the change recorded.
	Revision int64
	// Operation is the resource name of the operation that made the
	// change; empty for a direct call.
	Operation string
	// Time is when the change was committed (the Write's Now).
	Time time.Time
	// Event is empty for a memory's change; EventOperationDone for an
	// operation that ended (Operation, OpKind, OpState say which and how;
	// Action is Unchanged), EventUserErased for the end of an erasure
	// (Scope holds the user_id; Action is Unchanged).
	Event string
	// OpKind and OpState are an operation.done's operation's kind and
	// final state (jobs.State's name: SUCCEEDED, FAILED, CANCELLED).
	OpKind, OpState string
}

// IsEvent reports whether the record is an event, not a memory's change.
func (c *ChangeRecord) IsEvent() bool { return c.Event != "" }

// ChangeQuery selects changes for ListChanges.
type ChangeQuery struct {
	App string
	// ScopeKey, when set, keeps the changes of one scope (Scope.Key).
	ScopeKey string
	// After is the cursor of the last change read (0: from the first).
	After int64
	Limit int
}

// ChangePage is a read of an app's change feed.
type ChangePage struct {
	// Changes are those after the query's cursor, in cursor order.
	Changes []*ChangeRecord
	// Last is the cursor of the app's latest change (0: none yet).
	Last int64
	// Swept is the highest cursor the retention sweep removed (0: none):
	// a reader at a cursor below it missed changes.
	Swept int64
	// More, from Service.Changes, says the read stopped at its limit with
	// Through the cursor of the last entry it read (an event it left out
	// included): a reader continues after Through.
	More    bool
	Through int64
}

// ChangeStore keeps the change feed that Write appends to.
type ChangeStore interface {
	// ListChanges returns up to q.Limit changes of an app after q.After
	// in cursor order, with the app's latest and swept cursors, all of
	// one snapshot: when it returns fewer than q.Limit changes, there is
	// no other change of the query up to Last.
	ListChanges(ctx context.Context, q ChangeQuery) (*ChangePage, error)

	// DeleteExpiredChanges deletes up to limit changes older than
	// ChangeRetention at now, raising their apps' swept cursors, and
	// returns how many.
	DeleteExpiredChanges(ctx context.Context, now time.Time, limit int) (int, error)
}

// ChangeRecords returns the records a store appends for w to its app's
// feed, the app's latest cursor before it being last, numbered from
// last+1: one per change with a revision, in the order of w.Changes, then
// an operation.done per update of w.Operations that ends its operation
// (into a final state from one that is not), then w.Events.
func (w *Write) ChangeRecords(last int64) []*ChangeRecord {
	var out []*ChangeRecord
	for _, c := range w.Changes {
		if c.Revision == nil {
			continue
		}
		last++
		out = append(out, &ChangeRecord{
			App: c.Memory.App, Cursor: last, Action: c.Revision.Action, MemoryID: c.Memory.ID,
			Scope: c.Memory.Scope, Revision: c.Revision.Number, Operation: c.Revision.Operation, Time: w.Now,
		})
	}
	for _, u := range w.Operations {
		if !u.Op.State.Done() || u.ExpectState.Done() {
			continue
		}
		last++
		out = append(out, &ChangeRecord{
			App: u.Op.App, Cursor: last, Action: Unchanged, Event: EventOperationDone, Operation: u.Op.Name(),
			OpKind: u.Op.Kind, OpState: u.Op.State.String(), Time: w.Now,
		})
	}
	for _, e := range w.Events {
		last++
		c := *e
		c.App, c.Cursor, c.Action, c.Time = w.App, last, Unchanged, w.Now
		out = append(out, &c)
	}
	return out
}

// ChangesRequest reads an app's change feed.
type ChangesRequest struct {
	App string
	// Scope, when set, keeps the changes of one scope.
	Scope Scope
	// After is the cursor of the last change received; 0 for the first
	// change kept. Negative: from now (the answer's Last is the cursor
	// to continue from).
	After int64
	// Limit bounds the changes returned (0 or over MaxChangesPerRead:
	// MaxChangesPerRead).
	Limit int
}

// Changes reads an app's change feed after a cursor. A cursor the
// retention sweep passed is FailedPrecondition, naming the oldest cursor
// to resume from; one beyond the app's latest change is Invalid.
func (s *Service) Changes(ctx context.Context, r ChangesRequest) (*ChangePage, error) {
	if err := validateApp(r.App); err != nil {
		return nil, err
	}
	if len(r.Scope) == 0 {
		r.Scope = nil
	} else if err := validateScope("scope", r.Scope); err != nil {
		return nil, err
	}
	if r.Limit <= 0 || r.Limit > MaxChangesPerRead {
		r.Limit = MaxChangesPerRead
	}
	q := ChangeQuery{App: r.App, After: max(r.After, 0), Limit: r.Limit}
	if r.Scope != nil {
		q.ScopeKey = r.Scope.Key()
	}
	if r.After < 0 {
		q.Limit = 0
	}
	p, err := s.store.ListChanges(ctx, q)
	if err != nil {
		return nil, err
	}
	switch {
	case r.After < 0:
		p.Changes = nil
	case r.After > p.Last:
		return nil, fault.InvalidField("start_cursor", "cursor %d is beyond the latest change of app %s (%d)", r.After, r.App, p.Last)
	case r.After < p.Swept:
		return nil, fault.New(fault.FailedPrecondition, "cursor %d is older than the change feed keeps (%v): changes up to cursor %d were removed; reread the memories (ListMemories) and watch from cursor %d", r.After, ChangeRetention, p.Swept, p.Swept)
	}
	if n := len(p.Changes); n > 0 {
		p.More, p.Through = n == q.Limit, p.Changes[n-1].Cursor
	}
	p.Changes = slices.DeleteFunc(p.Changes, (*ChangeRecord).IsEvent)
	return p, nil
}

// EndingWrites returns, per app, the Writes that append the
// operation.done events of updates (jobs.Store.UpdateOperations): those
// that end their operations, grouped by app in the order of updates.
func EndingWrites(now time.Time, updates []jobs.Update) []*Write {
	var out []*Write
	byApp := map[string]*Write{}
	for _, u := range updates {
		if !u.Op.State.Done() || u.ExpectState.Done() {
			continue
		}
		w := byApp[u.Op.App]
		if w == nil {
			w = &Write{App: u.Op.App, Now: now}
			byApp[u.Op.App] = w
			out = append(out, w)
		}
		w.Operations = append(w.Operations, u)
	}
	return out
}
