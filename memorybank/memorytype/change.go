package memorytype

import (
	"time"
)

// ChangeRecord is one entry of an app's change feed: a memory created,
// updated or deleted by a committed Write, or (Event set) an event for the
// webhooks that is not a memory's change. A Store appends them in the
// transaction that commits what they record (Write.ChangeRecords), so an
// entry is in the feed if and only if what it records was committed. The
// feed is the webhooks' outbox; memorybank.Service.Changes and WatchChanges, which
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

// ChangePage is a read of an app's change feed.
type ChangePage struct {
	// Changes are those after the query's cursor, in cursor order.
	Changes []*ChangeRecord
	// Last is the cursor of the app's latest change (0: none yet).
	Last int64
	// Swept is the highest cursor the retention sweep removed (0: none):
	// a reader at a cursor below it missed changes.
	Swept int64
	// More, from memorybank.Service.Changes, says the read stopped at its limit with
	// Through the cursor of the last entry it read (an event it left out
	// included): a reader continues after Through.
	More    bool
	Through int64
}

// The webhook event types (appconfig.Webhook.Events).
const (
	EventMemoryCreated = "memory.created"
	EventMemoryUpdated = "memory.updated"
	EventMemoryDeleted = "memory.deleted"
	EventOperationDone = "operation.done"
	EventUserErased    = "user.erased"
)

// EventTypes are the webhook event types, in the API's order.
var EventTypes = []string{EventMemoryCreated, EventMemoryUpdated, EventMemoryDeleted, EventOperationDone, EventUserErased}

// EventOfAction returns the webhook event type of a change's action.
func EventOfAction(a Action) string {
	switch a {
	case Created:
		return EventMemoryCreated
	case Deleted:
		return EventMemoryDeleted
	}
	return EventMemoryUpdated
}
