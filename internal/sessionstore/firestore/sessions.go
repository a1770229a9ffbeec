package firestore

import (
	"context"
	"maps"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/internal/terms"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// SessionUser implements sessiondriver.Store.
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
func readSession(get func(*firestore.DocumentRef) (*firestore.DocumentSnapshot, error), ref *firestore.DocumentRef, key sessiontype.Key, now time.Time) (*sessionDoc, error) {
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

// newIncarnation returns a random id for a session's data.
func newIncarnation() string { return aip.NewID() }

// CreateSession implements sessiondriver.Store. A fork's events are written
// under the new incarnation first, where nothing points at them yet; the
// session document that makes them visible is then created in a
// transaction. If that fails, the events are removed again.
func (s *Store) CreateSession(ctx context.Context, r *sessiondriver.CreateSessionParams) error {
	sess := r.Session
	inc := newIncarnation()
	if len(r.Events) > 0 {
		if err := s.writeEvents(ctx, sess.App, sess.User, sess.ID, inc, r.Events); err != nil {
			s.purgeData(context.WithoutCancel(ctx), sess.App, inc)
			return firestoredb.Wrap(err)
		}
	}
	doc, err := newSessionDoc(sess, r.InitialState)
	if err != nil {
		return err
	}
	doc.Incarnation = inc
	ref := s.sessionRef(sess.App, sess.ID)
	var replaced string
	err = s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		replaced = ""
		old, err := txSessionDoc(tx, ref)
		if err != nil {
			return err
		}
		if old != nil {
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

// txSessionDoc reads a session document in a transaction: nil when there
// is none.
func txSessionDoc(tx *firestore.Transaction, ref *firestore.DocumentRef) (*sessionDoc, error) {
	snap, err := tx.Get(ref)
	if firestoredb.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var d sessionDoc
	if err := snap.DataTo(&d); err != nil {
		return nil, err
	}
	return &d, nil
}

// newSessionDoc is the document of sess with initial as its initial state,
// at the current search version; the incarnation is the caller's to set.
func newSessionDoc(sess *sessiontype.Session, initial map[string]any) (sessionDoc, error) {
	state, err := sessiondriver.EncodeState(sess.State)
	if err != nil {
		return sessionDoc{}, err
	}
	initialState, err := sessiondriver.EncodeState(initial)
	if err != nil {
		return sessionDoc{}, err
	}
	return sessionDoc{
		User: sess.User, DisplayName: sess.DisplayName, Labels: nonNilLabels(sess.Labels),
		State: string(state), InitialState: string(initialState),
		CreateNS: unixnano.From(sess.CreateTime), UpdateNS: unixnano.From(sess.UpdateTime), ExpireNS: unixnano.From(sess.ExpireTime),
		LastSeq: sess.LastSequence, SearchV: terms.Version,
		CompactionSeq: sess.CompactionSequence, CompactionEnd: sess.CompactedThrough,
	}, nil
}

func nonNilLabels(l map[string]string) map[string]string {
	if l == nil {
		return map[string]string{}
	}
	return l
}

// writeEvents writes a session's events under an incarnation, in batches.
func (s *Store) writeEvents(ctx context.Context, app, user, session, inc string, events []*sessiontype.Event) error {
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

// GetSession implements sessiondriver.Store.
func (s *Store) GetSession(ctx context.Context, key sessiontype.Key, q sessiondriver.EventQuery) (*sessiontype.Session, []*sessiontype.Event, error) {
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
	sess.State = sessiontype.Merge(sess.State, user, app)
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

// ListSessions implements sessiondriver.Store. Expired sessions (not swept yet)
// are skipped, reading further pages until the limit is reached.
func (s *Store) ListSessions(ctx context.Context, q sessiondriver.ListSessionsParams) ([]*sessiontype.Session, error) {
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
	var out []*sessiontype.Session
	for len(out) < q.Limit {
		want := q.Limit - len(out)
		query := base.Limit(want)
		if cursorID != "" {
			query = query.StartAfter(cursorNS, cursorID)
		}
		n := 0
		err := firestoredb.EachDoc(query.Documents(ctx), func(snap *firestore.DocumentSnapshot) error {
			n++
			var d sessionDoc
			if err := snap.DataTo(&d); err != nil {
				return err
			}
			cursorNS, cursorID = d.UpdateNS, snap.Ref.ID
			if q.Order.ByCreateTime {
				cursorNS = d.CreateNS
			}
			if d.expired(q.Now) {
				return nil
			}
			sess, err := d.session(q.App, snap.Ref.ID)
			if err != nil {
				return err
			}
			sess.InitialState = nil
			if !q.IncludeState {
				sess.State = nil
			}
			out = append(out, sess)
			return nil
		})
		if err != nil {
			return nil, err
		}
		if n < want {
			break // no more documents
		}
	}
	return out, nil
}

// UpdateSession implements sessiondriver.Store.
func (s *Store) UpdateSession(ctx context.Context, key sessiontype.Key, u *sessiondriver.UpdateSessionParams) (*sessiontype.Session, error) {
	ref := s.sessionRef(key.App, key.ID)
	var out *sessiontype.Session
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

// DeleteSession implements sessiondriver.Store.
func (s *Store) DeleteSession(ctx context.Context, key sessiontype.Key, now time.Time) error {
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

// removeSession deletes a session's document in a transaction, if it is
// still there and gone holds, leaving a tombstone for its data, and returns
// the incarnation whose data is to be purged ("" when it deleted nothing).
func (s *Store) removeSession(ctx context.Context, ref *firestore.DocumentRef, app string, now time.Time, gone func(*sessionDoc) bool) (string, error) {
	var inc string
	err := s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		inc = ""
		d, err := txSessionDoc(tx, ref)
		if err != nil || d == nil || !gone(d) {
			return err
		}
		inc = d.Incarnation
		if err := tx.Set(s.tombstoneRef(app, inc), map[string]any{"create_ns": unixnano.From(now)}); err != nil {
			return err
		}
		return tx.Delete(ref)
	}, s.txn...)
	return inc, firestoredb.Wrap(err)
}

// DeleteExpired implements sessiondriver.Store: it deletes sessions that expired
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
