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
	"maps"
	"sync"
	"time"

	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/internal/terms"
	"github.com/kioku-ai/kioku/internal/unixnano"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/sessions"
)

// Options configures a Store.
type Options struct {
	// Root is the root collection. Default "kioku_apps".
	Root string
	// MaxAttempts bounds the tries of one transaction under contention.
	// Default 30.
	MaxAttempts int
}

// Store is the Firestore session store.
type Store struct {
	c    *firestore.Client
	root string
	txn  []firestore.TransactionOption

	// Appends to one session (or one shared state document) from this
	// process queue on a lock instead of conflicting in Firestore; appends
	// from other servers still conflict and are retried.
	locksMu sync.Mutex
	locks   map[string]*sessionLock
}

type sessionLock struct {
	mu   sync.Mutex
	refs int
}

// lockAppend takes the locks of an append: its session's, then its user's
// and its app's state when it writes them (always in this order, so two
// appends cannot deadlock).
func (s *Store) lockAppend(r *sessions.AppendRequest) func() {
	unlock := []func(){s.lock("s/" + r.Key.App + "/" + r.Key.ID)}
	if len(r.Deltas.User) > 0 {
		unlock = append(unlock, s.lock("u/"+r.Key.App+"/"+r.Key.User))
	}
	if len(r.Deltas.App) > 0 {
		unlock = append(unlock, s.lock("a/"+r.Key.App))
	}
	return func() {
		for i := len(unlock) - 1; i >= 0; i-- {
			unlock[i]()
		}
	}
}

// lock serialises this process's writes to one document.
func (s *Store) lock(k string) func() {
	s.locksMu.Lock()
	l := s.locks[k]
	if l == nil {
		l = &sessionLock{}
		s.locks[k] = l
	}
	l.refs++
	s.locksMu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		s.locksMu.Lock()
		if l.refs--; l.refs == 0 {
			delete(s.locks, k)
		}
		s.locksMu.Unlock()
	}
}

var _ sessions.Store = (*Store)(nil)

// New returns a Store on a Firestore client.
func New(c *firestore.Client, o Options) *Store {
	if o.Root == "" {
		o.Root = "kioku_apps"
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 30
	}
	return &Store{c: c, root: o.Root, txn: []firestore.TransactionOption{firestore.MaxAttempts(o.MaxAttempts)}, locks: map[string]*sessionLock{}}
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
func (d *sessionDoc) session(app, id string) (*sessions.Session, error) {
	st, err := sessions.DecodeState([]byte(d.State))
	if err != nil {
		return nil, fmt.Errorf("decoding the state of session %s: %w", id, err)
	}
	initial, err := sessions.DecodeState([]byte(d.InitialState))
	if err != nil {
		return nil, err
	}
	labels := d.Labels
	if len(labels) == 0 {
		labels = nil
	}
	return &sessions.Session{
		Key:          sessions.Key{App: app, User: d.User, ID: id},
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

func (d *eventDoc) event() (*sessions.Event, error) {
	e, err := sessions.UnmarshalEvent([]byte(d.Body))
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

func notFound(key sessions.Key) error {
	return fault.NotFoundf("session %s not found", key.Name())
}

// SessionUser implements sessions.Store.
func (s *Store) SessionUser(ctx context.Context, app, id string, now time.Time) (string, error) {
	snap, err := s.sessionRef(app, id).Get(ctx)
	if firestoredb.IsNotFound(err) {
		return "", fault.NotFoundf("session %s not found in app %s", id, app)
	}
	if err != nil {
		return "", firestoredb.Wrap(err)
	}
	var d sessionDoc
	if err := snap.DataTo(&d); err != nil {
		return "", err
	}
	if d.expired(now) {
		return "", fault.NotFoundf("session %s not found in app %s", id, app)
	}
	return d.User, nil
}

// readSession reads a visible session document.
func readSession(get func(*firestore.DocumentRef) (*firestore.DocumentSnapshot, error), ref *firestore.DocumentRef, key sessions.Key, now time.Time) (*sessionDoc, error) {
	snap, err := get(ref)
	if firestoredb.IsNotFound(err) {
		return nil, notFound(key)
	}
	if err != nil {
		return nil, err
	}
	var d sessionDoc
	if err := snap.DataTo(&d); err != nil {
		return nil, err
	}
	if d.User != key.User || d.expired(now) {
		return nil, notFound(key)
	}
	return &d, nil
}

func readState(snap *firestore.DocumentSnapshot, err error) (map[string]any, int64, error) {
	if firestoredb.IsNotFound(err) || err == nil && !snap.Exists() {
		return map[string]any{}, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var d stateDoc
	if err := snap.DataTo(&d); err != nil {
		return nil, 0, err
	}
	st, err := sessions.DecodeState([]byte(d.State))
	return st, d.UpdateNS, err
}

// newIncarnation returns a random id for a session's data.
func newIncarnation() string { return aip.NewID() }

// CreateSession implements sessions.Store. A fork's events are written
// under the new incarnation first, where nothing points at them yet; the
// session document that makes them visible is then created in a
// transaction. If that fails, the events are removed again.
func (s *Store) CreateSession(ctx context.Context, r *sessions.CreateRequest) error {
	sess := r.Session
	inc := newIncarnation()
	if len(r.Events) > 0 {
		if err := s.writeEvents(ctx, sess.App, sess.User, sess.ID, inc, r.Events); err != nil {
			s.purgeData(context.WithoutCancel(ctx), sess.App, inc)
			return firestoredb.Wrap(err)
		}
	}
	state, err := sessions.EncodeState(sess.State)
	if err != nil {
		return err
	}
	initial, err := sessions.EncodeState(r.InitialState)
	if err != nil {
		return err
	}
	doc := sessionDoc{
		User: sess.User, DisplayName: sess.DisplayName, Labels: nonNilLabels(sess.Labels),
		State: string(state), InitialState: string(initial),
		CreateNS: unixnano.From(sess.CreateTime), UpdateNS: unixnano.From(sess.UpdateTime), ExpireNS: unixnano.From(sess.ExpireTime),
		LastSeq: sess.LastSequence, Incarnation: inc, SearchV: terms.Version,
		CompactionSeq: sess.CompactionSequence, CompactionEnd: sess.CompactedThrough,
	}
	ref := s.sessionRef(sess.App, sess.ID)
	var replaced string
	err = s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		replaced = ""
		snap, err := tx.Get(ref)
		if err != nil && !firestoredb.IsNotFound(err) {
			return err
		}
		if err == nil {
			var old sessionDoc
			if err := snap.DataTo(&old); err != nil {
				return err
			}
			if !old.expired(sess.CreateTime) {
				return fault.New(fault.AlreadyExists, "session id %q already exists in app %q", sess.ID, sess.App)
			}
			replaced = old.Incarnation
		}
		w, err := s.sharedWrites(tx, sess.App, sess.User, r.User, r.App, sess.CreateTime, r.MaxStateBytes)
		if err != nil {
			return err
		}
		if replaced != "" {
			if err := tx.Set(s.tombstoneRef(sess.App, replaced), map[string]any{"create_ns": unixnano.From(sess.CreateTime)}); err != nil {
				return err
			}
		}
		if err := tx.Set(ref, doc); err != nil {
			return err
		}
		return w()
	}, s.txn...)
	if err != nil {
		if len(r.Events) > 0 {
			s.purgeData(context.WithoutCancel(ctx), sess.App, inc)
		}
		return firestoredb.Wrap(err)
	}
	if replaced != "" {
		s.purge(context.WithoutCancel(ctx), sess.App, replaced)
	}
	return nil
}

func nonNilLabels(l map[string]string) map[string]string {
	if l == nil {
		return map[string]string{}
	}
	return l
}

// writeEvents writes a session's events under an incarnation, in batches.
func (s *Store) writeEvents(ctx context.Context, app, user, session, inc string, events []*sessions.Event) error {
	bw := s.c.BulkWriter(ctx)
	var jobs []*firestore.BulkWriterJob
	for _, e := range events {
		c := *e
		c.Sequence = 0
		body, err := c.Marshal()
		if err != nil {
			bw.End()
			return err
		}
		j1, err := bw.Create(s.eventRef(app, inc, e.Sequence), s.eventData(app, user, session, e, string(body)))
		if err != nil {
			bw.End()
			return err
		}
		j2, err := bw.Create(s.eventIDRef(app, inc, e.ID), map[string]any{"seq": e.Sequence})
		if err != nil {
			bw.End()
			return err
		}
		jobs = append(jobs, j1, j2)
	}
	bw.End()
	for _, j := range jobs {
		if _, err := j.Results(); err != nil {
			return err
		}
	}
	return nil
}

// sharedWrites reads the user and app state documents a change touches (in
// the transaction, before any write) and returns the function that writes
// them. Untouched scopes are not read.
func (s *Store) sharedWrites(tx *firestore.Transaction, app, user string, userDelta, appDelta map[string]any, now time.Time, max int) (func() error, error) {
	type pending struct {
		ref   *firestore.DocumentRef
		state []byte
	}
	var out []pending
	for _, scope := range []struct {
		name  string
		ref   *firestore.DocumentRef
		delta map[string]any
	}{
		{"user", s.userRef(app, user), userDelta},
		{"app", s.appStateRef(app), appDelta},
	} {
		if len(scope.delta) == 0 {
			continue
		}
		old, _, err := readState(tx.Get(scope.ref))
		if err != nil {
			return nil, err
		}
		_, enc, err := sessions.UpdatedState(old, scope.delta, scope.name, max)
		if err != nil {
			return nil, err
		}
		out = append(out, pending{scope.ref, enc})
	}
	return func() error {
		for _, p := range out {
			if err := tx.Set(p.ref, stateDoc{State: string(p.state), UpdateNS: unixnano.From(now)}); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// GetSession implements sessions.Store.
func (s *Store) GetSession(ctx context.Context, key sessions.Key, q sessions.EventQuery) (*sessions.Session, []*sessions.Event, error) {
	snaps, err := s.c.GetAll(ctx, []*firestore.DocumentRef{s.sessionRef(key.App, key.ID), s.userRef(key.App, key.User), s.appStateRef(key.App)})
	if err != nil {
		return nil, nil, firestoredb.Wrap(err)
	}
	d, err := readSession(func(*firestore.DocumentRef) (*firestore.DocumentSnapshot, error) {
		if !snaps[0].Exists() {
			return nil, status.Error(codes.NotFound, "no session")
		}
		return snaps[0], nil
	}, nil, key, q.Now)
	if err != nil {
		return nil, nil, err
	}
	sess, err := d.session(key.App, key.ID)
	if err != nil {
		return nil, nil, err
	}
	user, _, err := readState(snaps[1], nil)
	if err != nil {
		return nil, nil, err
	}
	app, _, err := readState(snaps[2], nil)
	if err != nil {
		return nil, nil, err
	}
	sess.State = sessions.Merge(sess.State, user, app)
	if q.Skip {
		return sess, nil, nil
	}
	// The most recent Limit events, read newest first and reversed.
	q.Descending = q.Limit > 0
	events, err := s.queryEvents(ctx, key.App, d.Incarnation, q)
	if err != nil {
		return nil, nil, err
	}
	if q.Descending {
		for i, j := 0, len(events)-1; i < j; i, j = i+1, j-1 {
			events[i], events[j] = events[j], events[i]
		}
	}
	return sess, events, nil
}

// queryEvents runs one bounded query over a session's events.
func (s *Store) queryEvents(ctx context.Context, app, inc string, q sessions.EventQuery) ([]*sessions.Event, error) {
	query := s.dataRef(app, inc).Collection("events").Query
	if q.AfterSeq > 0 {
		query = query.Where("seq", ">", q.AfterSeq)
	}
	if q.BeforeSeq > 0 {
		query = query.Where("seq", "<", q.BeforeSeq)
	}
	if !q.From.IsZero() {
		query = query.Where("ts_ns", ">=", q.From.UnixNano())
	}
	if !q.To.IsZero() {
		query = query.Where("ts_ns", "<", q.To.UnixNano())
	}
	dir := firestore.Asc
	if q.Descending {
		dir = firestore.Desc
	}
	query = query.OrderBy("seq", dir)
	if q.Limit > 0 {
		query = query.Limit(q.Limit)
	}
	it := query.Documents(ctx)
	defer it.Stop()
	var out []*sessions.Event
	total := 0
	for {
		if q.MaxBytes > 0 && total > q.MaxBytes {
			return out, nil
		}
		snap, err := it.Next()
		if err == iterator.Done {
			return out, nil
		}
		if err != nil {
			return nil, firestoredb.Wrap(err)
		}
		var d eventDoc
		if err := snap.DataTo(&d); err != nil {
			return nil, err
		}
		e, err := d.event()
		if err != nil {
			return nil, err
		}
		out = append(out, e)
		total += e.Size
	}
}

// visible reads a visible session document.
func (s *Store) visible(ctx context.Context, key sessions.Key, now time.Time) (*sessionDoc, error) {
	d, err := readSession(func(r *firestore.DocumentRef) (*firestore.DocumentSnapshot, error) { return r.Get(ctx) }, s.sessionRef(key.App, key.ID), key, now)
	return d, firestoredb.Wrap(err)
}

// ListEvents implements sessions.Store.
func (s *Store) ListEvents(ctx context.Context, key sessions.Key, q sessions.EventQuery) ([]*sessions.Event, error) {
	d, err := s.visible(ctx, key, q.Now)
	if err != nil {
		return nil, err
	}
	return s.queryEvents(ctx, key.App, d.Incarnation, q)
}

// FindEvent implements sessions.Store.
func (s *Store) FindEvent(ctx context.Context, key sessions.Key, id string, now time.Time) (*sessions.Event, error) {
	d, err := s.visible(ctx, key, now)
	if err != nil {
		return nil, err
	}
	idSnap, err := s.eventIDRef(key.App, d.Incarnation, id).Get(ctx)
	if firestoredb.IsNotFound(err) {
		return nil, fault.NotFoundf("event %q not found in session %s", id, key.Name())
	}
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	seq, err := idSnap.DataAt("seq")
	if err != nil {
		return nil, err
	}
	snap, err := s.eventRef(key.App, d.Incarnation, seq.(int64)).Get(ctx)
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	var ed eventDoc
	if err := snap.DataTo(&ed); err != nil {
		return nil, err
	}
	return ed.event()
}

// ListSessions implements sessions.Store. Expired sessions (not swept yet)
// are skipped, reading further pages until the limit is reached.
func (s *Store) ListSessions(ctx context.Context, q sessions.ListQuery) ([]*sessions.Session, error) {
	base := s.app(q.App).Collection("kioku_sessions").Query
	if q.User != "" {
		base = base.Where("user", "==", q.User)
	}
	if q.DisplayName != nil {
		base = base.Where("display_name", "==", *q.DisplayName)
	}
	for k, v := range q.Labels {
		base = base.WherePath(firestore.FieldPath{"labels", k}, "==", v)
	}
	field, dir := "update_ns", firestore.Desc
	if q.Order.ByCreateTime {
		field = "create_ns"
	}
	if q.Order.Ascending {
		dir = firestore.Asc
	}
	base = base.OrderBy(field, dir).OrderBy(firestore.DocumentID, dir)
	cursorNS, cursorID := q.AfterTime.UnixNano(), q.AfterID
	var out []*sessions.Session
	for len(out) < q.Limit {
		want := q.Limit - len(out)
		query := base.Limit(want)
		if cursorID != "" {
			query = query.StartAfter(cursorNS, cursorID)
		}
		it := query.Documents(ctx)
		n := 0
		for {
			snap, err := it.Next()
			if err == iterator.Done {
				break
			}
			if err != nil {
				it.Stop()
				return nil, firestoredb.Wrap(err)
			}
			n++
			var d sessionDoc
			if err := snap.DataTo(&d); err != nil {
				it.Stop()
				return nil, err
			}
			cursorNS, cursorID = d.UpdateNS, snap.Ref.ID
			if q.Order.ByCreateTime {
				cursorNS = d.CreateNS
			}
			if d.expired(q.Now) {
				continue
			}
			sess, err := d.session(q.App, snap.Ref.ID)
			if err != nil {
				it.Stop()
				return nil, err
			}
			sess.InitialState = nil
			if !q.IncludeState {
				sess.State = nil
			}
			out = append(out, sess)
		}
		it.Stop()
		if n < want {
			break // no more documents
		}
	}
	return out, nil
}

// UpdateSession implements sessions.Store.
func (s *Store) UpdateSession(ctx context.Context, key sessions.Key, u *sessions.SessionUpdate) (*sessions.Session, error) {
	ref := s.sessionRef(key.App, key.ID)
	var out *sessions.Session
	err := s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		d, err := readSession(tx.Get, ref, key, u.Now)
		if err != nil {
			return err
		}
		if u.DisplayName != nil {
			d.DisplayName = *u.DisplayName
		}
		if u.Labels != nil {
			d.Labels = nonNilLabels(maps.Clone(*u.Labels))
		}
		if u.ExpireTime != nil {
			d.ExpireNS = unixnano.From(*u.ExpireTime)
		}
		d.UpdateNS = unixnano.From(u.Now)
		if out, err = d.session(key.App, key.ID); err != nil {
			return err
		}
		return tx.Set(ref, *d)
	}, s.txn...)
	return out, firestoredb.Wrap(err)
}

// DeleteSession implements sessions.Store.
func (s *Store) DeleteSession(ctx context.Context, key sessions.Key, now time.Time) error {
	ref := s.sessionRef(key.App, key.ID)
	var inc string
	err := s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		d, err := readSession(tx.Get, ref, key, now)
		if err != nil {
			return err
		}
		inc = d.Incarnation
		if err := tx.Set(s.tombstoneRef(key.App, inc), map[string]any{"create_ns": unixnano.From(now)}); err != nil {
			return err
		}
		return tx.Delete(ref)
	}, s.txn...)
	if err != nil {
		return firestoredb.Wrap(err)
	}
	s.purge(context.WithoutCancel(ctx), key.App, inc)
	return nil
}

// purge removes a deleted session's data, then its tombstone. A failure
// leaves the tombstone for the sweeper.
func (s *Store) purge(ctx context.Context, app, inc string) {
	if s.purgeData(ctx, app, inc) == nil {
		s.tombstoneRef(app, inc).Delete(ctx)
	}
}

// purgeData deletes everything under an incarnation.
func (s *Store) purgeData(ctx context.Context, app, inc string) error {
	for _, col := range []string{"events", "event_ids"} {
		for {
			snaps, err := s.dataRef(app, inc).Collection(col).Select().Limit(300).Documents(ctx).GetAll()
			if err != nil {
				return err
			}
			if len(snaps) == 0 {
				break
			}
			bw := s.c.BulkWriter(ctx)
			for _, snap := range snaps {
				if _, err := bw.Delete(snap.Ref); err != nil {
					bw.End()
					return err
				}
			}
			bw.End()
		}
	}
	return nil
}

// AppendEvent implements sessions.Store.
func (s *Store) AppendEvent(ctx context.Context, r *sessions.AppendRequest) (*sessions.AppendResult, error) {
	key := r.Key
	ref := s.sessionRef(key.App, key.ID)
	defer s.lockAppend(r)()
	// The event's search terms are found once, outside the transaction,
	// which may run more than once.
	indexed := sessions.IndexTerms(r.Event)
	var res *sessions.AppendResult
	err := s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		res = nil
		d, err := readSession(tx.Get, ref, key, r.Now)
		if err != nil {
			return err
		}
		idSnap, err := tx.Get(s.eventIDRef(key.App, d.Incarnation, r.Event.ID))
		switch {
		case err == nil:
			seq, err := idSnap.DataAt("seq")
			if err != nil {
				return err
			}
			snap, err := tx.Get(s.eventRef(key.App, d.Incarnation, seq.(int64)))
			if err != nil {
				return err
			}
			var ed eventDoc
			if err := snap.DataTo(&ed); err != nil {
				return err
			}
			e, err := ed.event()
			if err != nil {
				return err
			}
			res = &sessions.AppendResult{Event: e, Existing: true}
			return nil
		case !firestoredb.IsNotFound(err):
			return err
		}
		if r.ExpectedSequence != nil && *r.ExpectedSequence != d.LastSeq {
			return fault.New(fault.FailedPrecondition, "session %s is at sequence %d, not the expected %d; read it again and retry", key.Name(), d.LastSeq, *r.ExpectedSequence)
		}
		seq := d.LastSeq + 1
		updates := []firestore.Update{{Path: "last_seq", Value: seq}, {Path: "update_ns", Value: unixnano.From(r.Now)}}
		if c := r.Event.Actions.Compaction; c != nil {
			if err := sessions.CheckCompaction(key, c, d.LastSeq); err != nil {
				return err
			}
			if c.EndSequence > d.CompactionEnd {
				updates = append(updates, firestore.Update{Path: "compaction_seq", Value: seq}, firestore.Update{Path: "compaction_end", Value: c.EndSequence})
			}
		}
		if len(r.Deltas.Session) > 0 {
			old, err := sessions.DecodeState([]byte(d.State))
			if err != nil {
				return err
			}
			_, enc, err := sessions.UpdatedState(old, r.Deltas.Session, "session", r.MaxStateBytes)
			if err != nil {
				return err
			}
			updates = append(updates, firestore.Update{Path: "state", Value: string(enc)})
		}
		writeShared, err := s.sharedWrites(tx, key.App, key.User, r.Deltas.User, r.Deltas.App, r.Now, r.MaxStateBytes)
		if err != nil {
			return err
		}
		e := *r.Event
		e.Sequence = seq
		if err := tx.Create(s.eventRef(key.App, d.Incarnation, seq), s.eventDataOf(key.App, key.User, key.ID, &e, string(r.Body), indexed)); err != nil {
			return err
		}
		if err := tx.Create(s.eventIDRef(key.App, d.Incarnation, r.Event.ID), map[string]any{"seq": seq}); err != nil {
			return err
		}
		if err := tx.Update(ref, updates); err != nil {
			return err
		}
		if err := writeShared(); err != nil {
			return err
		}
		res = &sessions.AppendResult{Event: &e}
		return nil
	}, s.txn...)
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	return res, nil
}

// GetState implements sessions.Store.
func (s *Store) GetState(ctx context.Context, ref sessions.StateRef) (map[string]any, time.Time, error) {
	doc := s.appStateRef(ref.App)
	if ref.User != "" {
		doc = s.userRef(ref.App, ref.User)
	}
	st, updateNS, err := readState(doc.Get(ctx))
	return st, unixnano.Time(updateNS), firestoredb.Wrap(err)
}

// UpdateState implements sessions.Store.
func (s *Store) UpdateState(ctx context.Context, r *sessions.StateUpdate) (map[string]any, time.Time, error) {
	var st map[string]any
	err := s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		doc, name := s.appStateRef(r.Ref.App), "app"
		if r.Ref.User != "" {
			doc, name = s.userRef(r.Ref.App, r.Ref.User), "user"
		}
		old, _, err := readState(tx.Get(doc))
		if err != nil {
			return err
		}
		var enc []byte
		if st, enc, err = sessions.UpdatedState(old, r.Delta, name, r.MaxStateBytes); err != nil {
			return err
		}
		return tx.Set(doc, stateDoc{State: string(enc), UpdateNS: unixnano.From(r.Now)})
	}, s.txn...)
	if err != nil {
		return nil, time.Time{}, firestoredb.Wrap(err)
	}
	return st, r.Now.UTC(), nil
}

// removeSession deletes a session's document in a transaction, if it is
// still there and gone holds, leaving a tombstone for its data, and returns
// the incarnation whose data is to be purged ("" when it deleted nothing).
func (s *Store) removeSession(ctx context.Context, ref *firestore.DocumentRef, app string, now time.Time, gone func(*sessionDoc) bool) (string, error) {
	var inc string
	err := s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		inc = ""
		cur, err := tx.Get(ref)
		if firestoredb.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		var d sessionDoc
		if err := cur.DataTo(&d); err != nil {
			return err
		}
		if !gone(&d) {
			return nil
		}
		inc = d.Incarnation
		if err := tx.Set(s.tombstoneRef(app, inc), map[string]any{"create_ns": unixnano.From(now)}); err != nil {
			return err
		}
		return tx.Delete(ref)
	}, s.txn...)
	return inc, firestoredb.Wrap(err)
}

// DeleteExpired implements sessions.Store: it deletes sessions that expired
// (across apps, with a collection group query on expire_ns), then removes
// the data of deleted sessions whose removal was interrupted.
func (s *Store) DeleteExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	it := s.c.CollectionGroup("kioku_sessions").Where("expire_ns", ">", 0).Where("expire_ns", "<=", now.UnixNano()).Limit(limit).Documents(ctx)
	snaps, err := it.GetAll()
	if err != nil {
		return 0, firestoredb.Wrap(err)
	}
	n := 0
	for _, snap := range snaps {
		app := snap.Ref.Parent.Parent.ID
		// A session renewed meanwhile stays.
		inc, err := s.removeSession(ctx, snap.Ref, app, now, func(d *sessionDoc) bool { return d.expired(now) })
		if err != nil {
			return n, err
		}
		if inc != "" {
			s.purge(ctx, app, inc)
			n++
		}
	}
	// Interrupted removals.
	tombs, err := s.c.CollectionGroup("kioku_tombstones").Where("create_ns", "<", now.Add(-time.Minute).UnixNano()).Limit(limit).Documents(ctx).GetAll()
	if err != nil {
		return n, firestoredb.Wrap(err)
	}
	for _, t := range tombs {
		s.purge(ctx, t.Ref.Parent.Parent.ID, t.Ref.ID)
	}
	return n, nil
}
