// Package firestore is the session store for deployments of several kioku
// servers: sessions, events and state in Cloud Firestore (native mode),
// shared by every server.
//
// # Document layout
//
// Under a root collection (kioku_apps by default), one document path per
// app, never written itself:
//
//	kioku_apps/{app}/kioku_sessions/{session}
//	    user, display_name, labels (map), state and initial_state (JSON
//	    text), create_ns, update_ns, expire_ns (Unix ns, 0 = never),
//	    last_seq, incarnation, search_v (the terms.Version of its events'
//	    search fields), compaction_seq and compaction_end (the latest
//	    compaction event and the last sequence it covers)
//	kioku_apps/{app}/kioku_session_data/{incarnation}/events/{seq, 20 digits}
//	    seq, id, ts_ns, body (the event's JSON without its sequence), and
//	    for search (see search.go) owner, session, author, terms, nterms
//	kioku_apps/{app}/kioku_session_data/{incarnation}/event_ids/{event id}
//	    seq: the idempotency index, read by id inside the append
//	kioku_apps/{app}/kioku_users/{user}          state (JSON), update_ns
//	kioku_apps/{app}/kioku_app_state/state       state (JSON), update_ns
//	kioku_apps/{app}/kioku_tombstones/{incarnation}
//	    the data of a deleted session, still to be removed
//
// A session's events live under its incarnation (a random id given at
// creation), not under its id: deleting a session removes its document at
// once (it is invisible from then on) and leaves a tombstone; the data is
// removed right after, or by the sweeper if the server stopped meanwhile. A
// new session with the same id gets a new incarnation, so it never sees the
// old events.
//
// # Transactions
//
// An append is one transaction: it reads the session document, the event
// id's index entry, and the user or app state document only when the event
// writes such keys, then writes the event, its index entry, the session
// (sequence, update time, state) and the touched shared scopes. An append
// that writes no "app:" key never touches the app's state document, so a
// busy app does not serialise its users' appends. Concurrent appends to one
// session conflict on the session document and are retried by Firestore's
// transaction protocol; every acknowledged one is committed.
//
// # Faults and deadlines
//
// An append keeps its caller's deadline throughout: appends to one session
// (or one shared state document) from this server queue on a lock whose
// wait ends with the caller's context, and the transaction's attempts
// (Options.MaxAttempts, with backoff) stop when it ends. Kioku keeps
// Firestore's pessimistic transactions, whose reads lock documents, rather
// than a design without such locks (optimistic writes guarded by update
// times), and makes sure no transaction stays abandoned holding its locks:
// the client is connected through a firestoredb.Guard, which sends a
// failed or abandoned transaction's rollback from a background queue, at
// once and again (each try bounded to 2 s, at most a second apart) until
// Firestore acknowledges it, instead of the client library's single
// rollback of 5 s after the caller's deadline, which an outage loses. So
// the caller is answered at its deadline, and a session written when
// Firestore went away takes appends again within about a second of its
// return rather than when Firestore expires the transaction (a minute).
// The guard also fails a call at once with UNAVAILABLE when no connection
// to Firestore can be made (it refuses them), instead of the library's
// retries until its 60-second timeout.
//
// Every error an append returns says what to do (firestoredb.Wrap): a
// commit whose connection broke after it was sent, Firestore's own
// failures and a transaction Firestore closed ("Transaction is invalid or
// closed") may have stored the event, and are UNAVAILABLE or ABORTED,
// which kioku's clients retry with the same event id; the retry finds the
// event by its id and returns it, so nothing is stored twice.
//
// # Reads
//
// GetSession reads the session, user and app documents in one batch and the
// selected events with one bounded query (ordered by seq, limited to
// num_recent_events). Listings use cursors (StartAfter), never offsets.
//
// # Indexes
//
// firestore.indexes.json at the repository root lists the composite indexes
// production needs; the emulator needs none. Session listings filtered on a
// label need an index per label key (labels.KEY, update_ns DESC), and one
// per other order they are listed in (create_ns, or ascending).
package firestore

import (
	"context"
	"fmt"
	"time"

	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/internal/unixnano"

	"cloud.google.com/go/firestore"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// Options configures a Store: its root collection and its transactions'
// tries.
type Options = firestoredb.StoreOptions

// Store is the Firestore session store.
type Store struct {
	c    *firestore.Client
	root string
	txn  []firestore.TransactionOption

	// Appends to one session (or one shared state document) from this
	// process queue on a lock instead of conflicting in Firestore; appends
	// from other servers still conflict and are retried.
	locks firestoredb.Locks
}

// lockAppend takes the locks of an append: its session's, then its user's
// and its app's state when it writes them (always in this order, so two
// appends cannot deadlock). A wait that outlasts ctx ends with ctx's error
// (as a domain error) and holds nothing.
func (s *Store) lockAppend(ctx context.Context, r *sessiondriver.AppendEventParams) (func(), error) {
	keys := []string{"s/" + r.Key.App + "/" + r.Key.ID}
	if len(r.Deltas.User) > 0 {
		keys = append(keys, "u/"+r.Key.App+"/"+r.Key.User)
	}
	if len(r.Deltas.App) > 0 {
		keys = append(keys, "a/"+r.Key.App)
	}
	return s.locks.Lock(ctx, "this server's earlier appends to the same session or state", keys...)
}

var (
	_ sessiondriver.Store      = (*Store)(nil)
	_ sessiondriver.Searcher   = (*Store)(nil)
	_ sessiondriver.Transferer = (*Store)(nil)
	_ sessiondriver.Eraser     = (*Store)(nil)
)

// New returns a Store on a Firestore client.
func New(c *firestore.Client, o Options) *Store {
	root, txn := o.Resolve()
	return &Store{c: c, root: root, txn: txn}
}

func (s *Store) app(app string) *firestore.DocumentRef { return s.c.Collection(s.root).Doc(app) }

func (s *Store) sessionRef(app, id string) *firestore.DocumentRef {
	return s.app(app).Collection("kioku_sessions").Doc(id)
}

func (s *Store) dataRef(app, incarnation string) *firestore.DocumentRef {
	return s.app(app).Collection("kioku_session_data").Doc(incarnation)
}

func (s *Store) eventRef(app, incarnation string, seq int64) *firestore.DocumentRef {
	return s.dataRef(app, incarnation).Collection("events").Doc(fmt.Sprintf("%020d", seq))
}

func (s *Store) eventIDRef(app, incarnation, id string) *firestore.DocumentRef {
	return s.dataRef(app, incarnation).Collection("event_ids").Doc(id)
}

func (s *Store) userRef(app, user string) *firestore.DocumentRef {
	return s.app(app).Collection("kioku_users").Doc(user)
}

func (s *Store) appStateRef(app string) *firestore.DocumentRef {
	return s.app(app).Collection("kioku_app_state").Doc("state")
}

func (s *Store) tombstoneRef(app, incarnation string) *firestore.DocumentRef {
	return s.app(app).Collection("kioku_tombstones").Doc(incarnation)
}

// sessionDoc is a session document.
type sessionDoc struct {
	User         string            `firestore:"user"`
	DisplayName  string            `firestore:"display_name"`
	Labels       map[string]string `firestore:"labels"`
	State        string            `firestore:"state"`
	InitialState string            `firestore:"initial_state"`
	CreateNS     int64             `firestore:"create_ns"`
	UpdateNS     int64             `firestore:"update_ns"`
	ExpireNS     int64             `firestore:"expire_ns"`
	LastSeq      int64             `firestore:"last_seq"`
	Incarnation  string            `firestore:"incarnation"`
	// SearchV is the terms.Version of its events' search fields.
	SearchV int `firestore:"search_v"`
	// CompactionSeq is the sequence of the latest compaction event,
	// CompactionEnd the last sequence it covers.
	CompactionSeq int64 `firestore:"compaction_seq"`
	CompactionEnd int64 `firestore:"compaction_end"`
}

func (d *sessionDoc) expired(now time.Time) bool {
	return d.ExpireNS != 0 && d.ExpireNS <= now.UnixNano()
}

// session converts a document to a Session with its own state.
func (d *sessionDoc) session(app, id string) (*sessiontype.Session, error) {
	st, err := sessiondriver.DecodeState([]byte(d.State))
	if err != nil {
		return nil, fmt.Errorf("decoding the state of session %s: %w", id, err)
	}
	initial, err := sessiondriver.DecodeState([]byte(d.InitialState))
	if err != nil {
		return nil, err
	}
	labels := d.Labels
	if len(labels) == 0 {
		labels = nil
	}
	return &sessiontype.Session{
		Key:          sessiontype.Key{App: app, User: d.User, ID: id},
		DisplayName:  d.DisplayName,
		Labels:       labels,
		State:        st,
		CreateTime:   unixnano.Time(d.CreateNS),
		UpdateTime:   unixnano.Time(d.UpdateNS),
		ExpireTime:   unixnano.Time(d.ExpireNS),
		LastSequence: d.LastSeq,
		InitialState: initial,

		CompactionSequence: d.CompactionSeq,
		CompactedThrough:   d.CompactionEnd,
	}, nil
}

// eventDoc is an event document.
type eventDoc struct {
	Seq  int64  `firestore:"seq"`
	ID   string `firestore:"id"`
	TSNS int64  `firestore:"ts_ns"`
	Body string `firestore:"body"`
}

func (d *eventDoc) event() (*sessiontype.Event, error) {
	e, err := sessiondriver.UnmarshalEvent([]byte(d.Body))
	if err != nil {
		return nil, fmt.Errorf("decoding event %s: %w", d.ID, err)
	}
	e.Sequence = d.Seq
	return e, nil
}

// stateDoc is a shared scope's state document.
type stateDoc struct {
	State    string `firestore:"state"`
	UpdateNS int64  `firestore:"update_ns"`
}

func notFound(key sessiontype.Key) error {
	return fault.NotFoundf("session %s not found", key.Name())
}
