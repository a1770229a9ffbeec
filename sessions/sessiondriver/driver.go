// Package sessiondriver is the contract between package sessions and the
// stores that keep sessions: what a backend implements, the values it is
// handed, and the helpers that make every backend behave alike. Callers
// use package sessions; only backends (and the stores' own tools, such as
// package archive) need this one. The data model both sides share is
// package sessions/sessiontype.
//
// A backend implements Store, the twelve methods a session service cannot
// do without. The rest are parts it may leave out, each found by a type
// assertion; the service answers the calls that need a missing part with
// fault.Unimplemented:
//
//   - Searcher: searching a user's events (Service.SearchEvents);
//   - Transferer: the primitives of export and import (package archive);
//   - Eraser: erasing a user (Service.DeleteUser);
//   - SearchIndexer and SearchReindexer: indexing for search after the
//     append, in batches, and rebuilding an index in the background, for
//     a store that does not index in the append's transaction.
//
// The service validates every input and prepares every value before it
// reaches a Store, so a Store only stores, looks up and enforces what needs
// the stored data: existence, uniqueness, expiry, expected sequences and
// state sizes, each inside one transaction. All methods treat a session
// that has expired at the request's time as absent. Errors are of package
// fault's kinds (NotFound, AlreadyExists, FailedPrecondition,
// ResourceExhausted); any other error is Internal.
//
// Every backend passes the conformance suite in package
// sessions/sessiondriver/sessiondrivertest. docs/backends.md walks
// through the in-memory backend (internal/sessionstore/memstore) as the
// worked example.
package sessiondriver

import (
	"context"
	"time"

	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// Store is what every session backend implements.
type Store interface {
	// CreateSession stores a new session, the initial events of a fork, and
	// the "user:" and "app:" parts of its initial state, in one transaction.
	// A session with the same id in the same app is AlreadyExists, even under
	// another user (unless it has expired: then it is replaced).
	CreateSession(ctx context.Context, p *CreateSessionParams) error

	// GetSession returns the session with its merged state, and the events
	// the query selects in sequence order. It reads only what it returns.
	GetSession(ctx context.Context, key sessiontype.Key, q EventQuery) (*sessiontype.Session, []*sessiontype.Event, error)

	// SessionUser returns the user of the visible session with this id in
	// app, or NotFound: session ids are unique within an app, and a caller
	// that names a session by app and id alone (the Vertex AI API) learns
	// its key this way.
	SessionUser(ctx context.Context, app, id string, now time.Time) (string, error)

	// ListSessions returns up to p.Limit sessions of an app or of one of its
	// users, in p.Order, starting after the cursor.
	ListSessions(ctx context.Context, p ListSessionsParams) ([]*sessiontype.Session, error)

	// UpdateSession changes a session's metadata.
	UpdateSession(ctx context.Context, key sessiontype.Key, p *UpdateSessionParams) (*sessiontype.Session, error)

	// DeleteSession deletes a session and its events. NotFound when absent.
	DeleteSession(ctx context.Context, key sessiontype.Key, now time.Time) error

	// AppendEvent appends p.Event (or finds an earlier append of the same
	// event id) in one transaction with its state deltas.
	AppendEvent(ctx context.Context, p *AppendEventParams) (*AppendResult, error)

	// ListEvents returns up to q.Limit events of a session in sequence order
	// (descending when q.Descending), within the query's bounds.
	ListEvents(ctx context.Context, key sessiontype.Key, q EventQuery) ([]*sessiontype.Event, error)

	// FindEvent returns the event with the given id, or NotFound: a fork
	// names the last event it copies by id.
	FindEvent(ctx context.Context, key sessiontype.Key, id string, now time.Time) (*sessiontype.Event, error)

	// GetState returns a "user:" or "app:" scope's state and its last update
	// time (zero if it was never written).
	GetState(ctx context.Context, ref sessiontype.StateRef) (map[string]any, time.Time, error)

	// UpdateState applies a delta to a "user:" or "app:" scope.
	UpdateState(ctx context.Context, p *UpdateStateParams) (map[string]any, time.Time, error)

	// DeleteExpired deletes up to limit sessions that expired before now, with
	// their events, and returns how many it deleted.
	DeleteExpired(ctx context.Context, now time.Time, limit int) (int, error)
}

// Searcher is a Store that searches a user's events by text.
type Searcher interface {
	// SearchEvents finds the candidates of a search: visible events of the
	// user (or of one session) within the query's filters that hold at
	// least one query term, at most p.Limit of them, chosen and ordered by
	// CandidateOrder, with the statistics that rank them (see
	// SearchCandidates). An appended or forked event is found by every
	// search that starts after its append returned (a store may index it
	// later, SearchIndexer, but then indexes it before such a search), a
	// deleted or expired session's events never are. It indexes the terms
	// IndexTerms gives.
	SearchEvents(ctx context.Context, p *SearchEventsParams) (*SearchCandidates, error)
}

// Transferer is a Store that can be exported and imported (package
// archive): it lists what it holds, and stores sessions, events and
// shared state as an archive has them.
type Transferer interface {
	// Apps returns up to limit ids of the apps that hold sessions or shared
	// state, in ascending order, after the id after ("" for the first).
	Apps(ctx context.Context, after string, limit int) ([]string, error)

	// ScanSessions returns up to p.Limit sessions of an app (or of one of
	// its users) that are visible at p.Now, in id order after p.AfterID,
	// each with its own state (State, not merged) and InitialState. An
	// export reads a session's events (ListEvents) up to its LastSequence:
	// events are never changed once stored, so they agree with the state
	// ScanSessions returned.
	ScanSessions(ctx context.Context, p ScanSessionsParams) ([]*sessiontype.Session, error)

	// ScanUserStates returns up to limit "user:" scopes of an app that were
	// ever written, in user order after the user after.
	ScanUserStates(ctx context.Context, app, after string, limit int) ([]*sessiontype.SharedState, error)

	// ImportSession stores a session as an archive has it (key, metadata,
	// own state, initial state, times, LastSequence, compaction), without
	// its events (ImportEvents) and without applying anything to the
	// shared scopes. A session absent from the store, or expired there at
	// now, is created. One of the same identity (user and create time) is
	// brought to s, unless it moved on past s (a later sequence or update
	// time: FailedPrecondition); any other session with the id in the app
	// is AlreadyExists. It reports whether it wrote anything.
	ImportSession(ctx context.Context, s *sessiontype.Session, now time.Time) (bool, error)

	// ImportEvents stores events of a session ImportSession stored, at
	// their sequences (1 to the session's LastSequence: Invalid
	// otherwise), with their search index entries, and returns how many it
	// wrote. An event already stored at its sequence under its id is left
	// as it is; another event there, or the id at another sequence, is
	// AlreadyExists. The session must be visible at now.
	ImportEvents(ctx context.Context, key sessiontype.Key, events []*sessiontype.Event, now time.Time) (int, error)

	// ImportState stores a shared scope's state and update time as they
	// are, unless the scope was updated after st.UpdateTime
	// (FailedPrecondition). It reports whether it wrote anything.
	ImportState(ctx context.Context, st *sessiontype.SharedState) (bool, error)
}

// Eraser is a Store that can erase a user.
type Eraser interface {
	// EraseUser deletes up to limit sessions of a user, expired ones
	// included, with their events and search index entries, and returns
	// their keys. When it finds no session left, it deletes the rest of
	// what it keeps of the user instead (the "user:" scope, the user's
	// search statistics, what is left of sessions whose removal was
	// interrupted) and returns none: afterwards nothing in the store names
	// the user. An erasure (Service.DeleteUser) calls it until it returns
	// none.
	EraseUser(ctx context.Context, app, user string, limit int) ([]sessiontype.Key, error)
}

// SearchIndexer is a Store that indexes appended (and forked) events for
// search after their transaction, many at a time, instead of in it: the
// append does less, and the index is written in batches, which cost a
// fraction of what they cost one event at a time. Such a store still finds
// every event appended before a search (it indexes the searching user's
// waiting events first) and keeps what waits in its durable records, so a
// crash loses nothing of it. The service's indexer (Service.RunIndexer)
// calls it.
type SearchIndexer interface {
	// IndexSearch indexes up to limit of the events waiting to be indexed
	// and returns how many it took (fewer than limit when none are left).
	IndexSearch(ctx context.Context, limit int) (int, error)
}

// SearchReindexer is a Store whose search index may hold terms of an older
// terms.Version, or miss events stored before it existed, and is rebuilt
// in the background (Service.RunSweeper), a batch of sessions at a time.
type SearchReindexer interface {
	// ReindexSearch indexes with the current terms the events of up to
	// limit sessions that need it, and returns how many it did (fewer than
	// limit when no more do).
	ReindexSearch(ctx context.Context, limit int) (int, error)
}
