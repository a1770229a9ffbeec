package sessions

import (
	"context"
	"time"

	"github.com/kioku-ai/kioku/resource"
)

// Store persists sessions, events and state. Service validates every input
// and prepares every value before it reaches a Store, so a Store only stores,
// looks up and enforces what needs the stored data: existence, uniqueness,
// expiry, expected sequences and state sizes, each inside one transaction.
//
// All methods treat a session that has expired at the request's Now as
// absent. Errors are of package fault's kinds (NotFound, AlreadyExists,
// FailedPrecondition, ResourceExhausted); any other error is Internal.
type Store interface {
	// CreateSession stores a new session, the initial events of a fork, and
	// the "user:" and "app:" parts of its initial state, in one transaction.
	// A session with the same id in the same app is AlreadyExists, even under
	// another user (unless it has expired: then it is replaced).
	CreateSession(ctx context.Context, r *CreateRequest) error

	// GetSession returns the session with its merged state, and the events
	// the query selects in sequence order. It reads only what it returns.
	GetSession(ctx context.Context, key Key, q EventQuery) (*Session, []*Event, error)

	// SessionUser returns the user of the visible session with this id in
	// app, or NotFound: session ids are unique within an app, and a caller
	// that names a session by app and id alone (the Vertex AI API) learns
	// its key this way.
	SessionUser(ctx context.Context, app, id string, now time.Time) (string, error)

	// ListSessions returns up to q.Limit sessions of an app or of one of its
	// users, most recently updated first, starting after q.After.
	ListSessions(ctx context.Context, q ListQuery) ([]*Session, error)

	// UpdateSession changes a session's metadata.
	UpdateSession(ctx context.Context, key Key, u *SessionUpdate) (*Session, error)

	// DeleteSession deletes a session and its events. NotFound when absent.
	DeleteSession(ctx context.Context, key Key, now time.Time) error

	// AppendEvent appends r.Event (or finds an earlier append of the same
	// event id) in one transaction with its state deltas.
	AppendEvent(ctx context.Context, r *AppendRequest) (*AppendResult, error)

	// ListEvents returns up to q.Limit events of a session in sequence order
	// (descending when q.Descending), within the query's bounds.
	ListEvents(ctx context.Context, key Key, q EventQuery) ([]*Event, error)

	// FindEvent returns the event with the given id, or NotFound.
	FindEvent(ctx context.Context, key Key, id string, now time.Time) (*Event, error)

	// GetState returns a "user:" or "app:" scope's state and its last update
	// time (zero if it was never written).
	GetState(ctx context.Context, ref StateRef) (map[string]any, time.Time, error)

	// UpdateState applies a delta to a "user:" or "app:" scope.
	UpdateState(ctx context.Context, r *StateUpdate) (map[string]any, time.Time, error)

	// DeleteExpired deletes up to limit sessions that expired before now, with
	// their events, and returns how many it deleted.
	DeleteExpired(ctx context.Context, now time.Time, limit int) (int, error)

	// SearchEvents finds the candidates of a search: visible events of the
	// user (or of one session) within the query's filters that hold at
	// least one query term, at most q.Limit of them, chosen and ordered by
	// CandidateOrder, with the statistics that rank them (see
	// SearchCandidates). An appended or forked event is found by every
	// search that starts after its append returned (a store may index it
	// later, SearchIndexer, but then indexes it before such a search), a
	// deleted or expired session's events never are. It indexes the terms
	// IndexTerms gives.
	SearchEvents(ctx context.Context, q *SearchQuery) (*SearchCandidates, error)

	// Apps returns up to limit ids of the apps that hold sessions or shared
	// state, in ascending order, after the id after ("" for the first).
	Apps(ctx context.Context, after string, limit int) ([]string, error)

	// ScanSessions returns up to q.Limit sessions of an app (or of one of
	// its users) that are visible at q.Now, in id order after q.AfterID,
	// each with its own state (State, not merged) and InitialState. An
	// export reads a session's events (ListEvents) up to its LastSequence:
	// events are never changed once stored, so they agree with the state
	// ScanSessions returned.
	ScanSessions(ctx context.Context, q ScanQuery) ([]*Session, error)

	// ScanUserStates returns up to limit "user:" scopes of an app that were
	// ever written, in user order after the user after.
	ScanUserStates(ctx context.Context, app, after string, limit int) ([]*SharedState, error)

	// ImportSession stores a session as an archive has it (key, metadata,
	// own state, initial state, times, LastSequence, compaction), without
	// its events (ImportEvents) and without applying anything to the
	// shared scopes. A session absent from the store, or expired there at
	// now, is created. One of the same identity (user and create time) is
	// brought to s, unless it moved on past s (a later sequence or update
	// time: FailedPrecondition); any other session with the id in the app
	// is AlreadyExists. It reports whether it wrote anything.
	ImportSession(ctx context.Context, s *Session, now time.Time) (bool, error)

	// ImportEvents stores events of a session ImportSession stored, at
	// their sequences (1 to the session's LastSequence: Invalid
	// otherwise), with their search index entries, and returns how many it
	// wrote. An event already stored at its sequence under its id is left
	// as it is; another event there, or the id at another sequence, is
	// AlreadyExists. The session must be visible at now.
	ImportEvents(ctx context.Context, key Key, events []*Event, now time.Time) (int, error)

	// ImportState stores a shared scope's state and update time as they
	// are, unless the scope was updated after st.UpdateTime
	// (FailedPrecondition). It reports whether it wrote anything.
	ImportState(ctx context.Context, st *SharedState) (bool, error)

	// DeleteUserSessions deletes up to limit sessions of a user, expired
	// ones included, with their events and search index entries, and
	// returns their keys: an erasure of the user (Service.DeleteUser)
	// calls it until it returns none.
	DeleteUserSessions(ctx context.Context, app, user string, limit int) ([]Key, error)

	// DeleteUserData deletes what the store keeps of a user besides
	// sessions: the "user:" scope, the user's search statistics, and what
	// is left of the user's sessions deleted earlier whose removal was
	// interrupted. Afterwards nothing in the store names the user.
	DeleteUserData(ctx context.Context, app, user string) error
}

// ScanQuery selects sessions for ScanSessions.
type ScanQuery struct {
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

// CreateRequest is a Store.CreateSession request.
type CreateRequest struct {
	// Session holds the key, metadata, times and the session scope's state
	// (State). LastSequence equals len(Events).
	Session *Session
	// InitialState is the session-scope state the session started with,
	// kept so that a fork can replay its events.
	InitialState map[string]any
	// User and App are deltas for the shared scopes (keys with prefixes).
	User, App map[string]any
	// Events are stored as they are (ids, timestamps and sequences 1..n set).
	Events []*Event
	// MaxStateBytes bounds the encoded size of each scope after the deltas.
	MaxStateBytes int
}

// EventQuery selects a session's events.
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
	// caller tells a cut result by its total.
	MaxBytes int
}

// ListQuery selects sessions for ListSessions.
type ListQuery struct {
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

// SessionUpdate changes a session's metadata; nil fields stay as they are.
type SessionUpdate struct {
	Now         time.Time
	DisplayName *string
	Labels      *map[string]string
	ExpireTime  *time.Time // pointer to zero: never expires
}

// AppendRequest is a Store.AppendEvent request.
type AppendRequest struct {
	Key Key
	// Event is the event to store, with id and timestamp set, "temp:" keys
	// removed and Sequence zero (the Store assigns it).
	Event *Event
	// Body is Event.Marshal(), already computed to check the size; stores
	// that keep the JSON form store it as it is.
	Body []byte
	// ExpectedSequence, when set, must equal the session's LastSequence.
	ExpectedSequence *int64
	// Deltas are the event's state changes split by scope.
	Deltas Deltas
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
	Event *Event
	// Existing is true when an event with this id was already stored; then
	// nothing was written and Event is the stored one.
	Existing bool
}

// StateRef names a shared scope: the app's ("app:") when User is empty, the
// user's ("user:") otherwise.
type StateRef struct {
	App  string
	User string
}

// Name returns the scope's resource name: "apps/{app}/state" or
// "apps/{app}/users/{user}/state".
func (r StateRef) Name() string {
	if r.User == "" {
		return resource.AppStateName(r.App)
	}
	return resource.UserStateName(r.App, r.User)
}

// Prefix returns the key prefix of the scope.
func (r StateRef) Prefix() string {
	if r.User == "" {
		return PrefixApp
	}
	return PrefixUser
}

// StateUpdate is a Store.UpdateState request.
type StateUpdate struct {
	Ref           StateRef
	Delta         map[string]any
	Now           time.Time
	MaxStateBytes int
}
