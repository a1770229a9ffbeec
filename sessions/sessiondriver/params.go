package sessiondriver

import (
	"time"

	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// CreateSessionParams is the input of Store.CreateSession.
type CreateSessionParams struct {
	// Session holds the key, metadata, times and the session scope's state
	// (State). LastSequence equals len(Events).
	Session *sessiontype.Session
	// InitialState is the session-scope state the session started with,
	// kept so that a fork can replay its events.
	InitialState map[string]any
	// User and App are deltas for the shared scopes (keys with prefixes).
	User, App map[string]any
	// Events are stored as they are (ids, timestamps and sequences 1..n set).
	Events []*sessiontype.Event
	// MaxStateBytes bounds the encoded size of each scope after the deltas.
	MaxStateBytes int
}

// EventQuery selects a session's events for Store.GetSession and
// Store.ListEvents.
type EventQuery struct {
	// Now is the time that decides expiry.
	Now time.Time
	// Skip selects no events at all (GetSession only).
	Skip bool
	// Limit is the most events to return; 0 means no limit. With
	// GetSession (ascending order), the last Limit of the selected events.
	Limit int
	// From and To bound the event timestamps: From <= t < To (zero: open).
	From, To time.Time
	// AfterSeq and BeforeSeq bound the sequences: AfterSeq < s < BeforeSeq
	// (zero: open).
	AfterSeq, BeforeSeq int64
	// Descending returns the newest first (ListEvents only).
	Descending bool
	// MaxBytes, when positive, ends the result with the first event that
	// brings the total size of the events returned (Event.Size) past it,
	// so that a read holds little more than a response may carry; the
	// caller tells a cut result by its total. GetSession with a Limit
	// counts from the newest event, every other read from its first.
	MaxBytes int
}

// ListSessionsParams is the input of Store.ListSessions.
type ListSessionsParams struct {
	App  string
	User string // empty: every user of the app
	Now  time.Time
	// Filter conditions: all must hold.
	DisplayName *string
	Labels      map[string]string
	// Order is the listing's order: most recently updated first by default.
	Order SessionOrder
	// AfterTime and AfterID are the cursor: the time in the listing's
	// order (update or create time) and the id of the last session of the
	// previous page; zero for the first page.
	AfterTime time.Time
	AfterID   string
	Limit     int
	// IncludeState returns each session's own state.
	IncludeState bool
}

// SessionOrder is the order of a session listing: by last update time or
// by creation time, newest or oldest first, then by id the same way.
type SessionOrder struct {
	ByCreateTime bool
	Ascending    bool
}

// UpdateSessionParams is the input of Store.UpdateSession; nil fields
// stay as they are.
type UpdateSessionParams struct {
	Now         time.Time
	DisplayName *string
	Labels      *map[string]string
	ExpireTime  *time.Time // pointer to zero: never expires
}

// AppendEventParams is the input of Store.AppendEvent.
type AppendEventParams struct {
	Key sessiontype.Key
	// Event is the event to store, with id and timestamp set, "temp:" keys
	// removed and Sequence zero (the Store assigns it).
	Event *sessiontype.Event
	// Body is Event.Marshal(), already computed to check the size; stores
	// that keep the JSON form store it as it is.
	Body []byte
	// ExpectedSequence, when set, must equal the session's LastSequence.
	ExpectedSequence *int64
	// Deltas are the event's state changes split by scope.
	Deltas sessiontype.Deltas
	// Now is the time of the append: the session's new update time, and the
	// time that decides expiry.
	Now time.Time
	// MaxStateBytes bounds the encoded size of each scope after the deltas.
	MaxStateBytes int
}

// AppendResult is what Store.AppendEvent did.
type AppendResult struct {
	// Event is the stored event: the new one, or the earlier append of the
	// same id.
	Event *sessiontype.Event
	// Existing is true when an event with this id was already stored; then
	// nothing was written and Event is the stored one.
	Existing bool
}

// UpdateStateParams is the input of Store.UpdateState.
type UpdateStateParams struct {
	Ref           sessiontype.StateRef
	Delta         map[string]any
	Now           time.Time
	MaxStateBytes int
}

// ScanSessionsParams is the input of Transferer.ScanSessions.
type ScanSessionsParams struct {
	App string
	// User, when set, selects one user's sessions.
	User string
	// Now decides expiry: expired sessions are skipped.
	Now time.Time
	// AfterID is the cursor: the id of the last session of the previous
	// page; empty for the first page.
	AfterID string
	Limit   int
}
