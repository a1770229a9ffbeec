package firestore

import (
	"context"
	"maps"
	"reflect"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/internal/terms"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// The primitives of export and import (package archive): listings in
// document id order with cursors, and writes of archived records as they
// are.

// Apps implements sessiondriver.Transferer (firestoredb.Apps).
func (s *Store) Apps(ctx context.Context, after string, limit int) ([]string, error) {
	return firestoredb.Apps(ctx, s.c, s.root, after, limit)
}

// ScanSessions implements sessiondriver.Transferer. Expired sessions not swept yet
// are skipped, reading further pages until the limit is reached.
func (s *Store) ScanSessions(ctx context.Context, q sessiondriver.ScanSessionsParams) ([]*sessiontype.Session, error) {
	base := s.app(q.App).Collection("kioku_sessions").Query
	if q.User != "" {
		base = base.Where("user", "==", q.User)
	}
	after := q.AfterID
	var out []*sessiontype.Session
	for len(out) < q.Limit {
		want := q.Limit - len(out)
		snaps, err := firestoredb.PageByID(ctx, base, after, want)
		if err != nil {
			return nil, err
		}
		for _, snap := range snaps {
			after = snap.Ref.ID
			var d sessionDoc
			if err := snap.DataTo(&d); err != nil {
				return nil, err
			}
			if d.expired(q.Now) {
				continue
			}
			sess, err := d.session(q.App, snap.Ref.ID)
			if err != nil {
				return nil, err
			}
			out = append(out, sess)
		}
		if len(snaps) < want {
			break
		}
	}
	return out, nil
}

// ScanUserStates implements sessiondriver.Transferer.
func (s *Store) ScanUserStates(ctx context.Context, app, after string, limit int) ([]*sessiontype.SharedState, error) {
	snaps, err := firestoredb.PageByID(ctx, s.app(app).Collection("kioku_users").Query, after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]*sessiontype.SharedState, 0, len(snaps))
	for _, snap := range snaps {
		st, updateNS, err := readState(snap, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, &sessiontype.SharedState{Ref: sessiontype.StateRef{App: app, User: snap.Ref.ID}, State: st, UpdateTime: unixnano.Time(updateNS)})
	}
	return out, nil
}

// ImportSession implements sessiondriver.Transferer: one transaction on the session
// document. A new session gets a new incarnation; one brought up to date
// keeps its own (and its events).
func (s *Store) ImportSession(ctx context.Context, sess *sessiontype.Session, now time.Time) (bool, error) {
	doc, err := newSessionDoc(sess, sess.InitialState)
	if err != nil {
		return false, err
	}
	ref := s.sessionRef(sess.App, sess.ID)
	var (
		replaced string
		wrote    bool
	)
	err = s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		replaced, wrote = "", false
		doc.Incarnation, doc.SearchV = newIncarnation(), terms.Version
		old, err := txSessionDoc(tx, ref)
		if err != nil {
			return err
		}
		if old != nil {
			switch {
			case old.expired(now):
				replaced = old.Incarnation
			case old.User != sess.User || old.CreateNS != doc.CreateNS:
				return fault.New(fault.AlreadyExists, "session id %q of app %q is another session in this store (of user %q, created %v), not the archive's %s", sess.ID, sess.App, old.User, unixnano.Time(old.CreateNS), sess.Name())
			case old.LastSeq > doc.LastSeq || old.UpdateNS > doc.UpdateNS:
				return fault.New(fault.FailedPrecondition, "session %s moved on in this store (sequence %d, updated %v) past the archive's (sequence %d, updated %v)", sess.Name(), old.LastSeq, unixnano.Time(old.UpdateNS), doc.LastSeq, sess.UpdateTime)
			default:
				doc.Incarnation, doc.SearchV = old.Incarnation, old.SearchV
				old.Labels = nonNilLabels(old.Labels)
				if sameSession(old, &doc) {
					return nil
				}
			}
		}
		wrote = true
		if replaced != "" {
			if err := tx.Set(s.tombstoneRef(sess.App, replaced), map[string]any{"create_ns": unixnano.From(now)}); err != nil {
				return err
			}
		}
		return tx.Set(ref, doc)
	}, s.txn...)
	if err != nil {
		return false, firestoredb.Wrap(err)
	}
	if replaced != "" {
		s.purge(context.WithoutCancel(ctx), sess.App, replaced)
	}
	return wrote, nil
}

func sameSession(a, b *sessionDoc) bool {
	x, y := *a, *b
	x.Labels, y.Labels = nil, nil
	return reflect.DeepEqual(x, y) && maps.Equal(a.Labels, b.Labels)
}

// ImportEvents implements sessiondriver.Transferer: it reads the session, the
// documents of the events' sequences and ids (one batch), then writes what
// is missing with a bulk writer. Each write is idempotent, so an import
// stopped half-way is completed by the next.
func (s *Store) ImportEvents(ctx context.Context, key sessiontype.Key, events []*sessiontype.Event, now time.Time) (int, error) {
	d, err := s.visible(ctx, key, now)
	if err != nil {
		return 0, err
	}
	refs := make([]*firestore.DocumentRef, 0, 2*len(events))
	for _, e := range events {
		if e.Sequence < 1 || e.Sequence > d.LastSeq {
			return 0, fault.Invalidf("event %q of session %s has sequence %d, outside the session's 1 to %d", e.ID, key.Name(), e.Sequence, d.LastSeq)
		}
		refs = append(refs, s.eventRef(key.App, d.Incarnation, e.Sequence), s.eventIDRef(key.App, d.Incarnation, e.ID))
	}
	snaps, err := s.c.GetAll(ctx, refs)
	if err != nil {
		return 0, firestoredb.Wrap(err)
	}
	bw := s.c.BulkWriter(ctx)
	var jobs []*firestore.BulkWriterJob
	n := 0
	for i, e := range events {
		evSnap, idSnap := snaps[2*i], snaps[2*i+1]
		if evSnap.Exists() {
			var ed eventDoc
			if err := evSnap.DataTo(&ed); err != nil {
				bw.End()
				return 0, err
			}
			if ed.ID != e.ID {
				bw.End()
				return 0, fault.New(fault.AlreadyExists, "session %s holds event %q at sequence %d, not the archive's %q", key.Name(), ed.ID, e.Sequence, e.ID)
			}
		}
		if idSnap.Exists() {
			seq, err := idSnap.DataAt("seq")
			if err != nil {
				bw.End()
				return 0, err
			}
			if seq.(int64) != e.Sequence {
				bw.End()
				return 0, fault.New(fault.AlreadyExists, "session %s holds event %q at sequence %d, not the archive's %d", key.Name(), e.ID, seq, e.Sequence)
			}
		}
		if !evSnap.Exists() {
			c := *e
			c.Sequence = 0
			body, err := c.Marshal()
			if err != nil {
				bw.End()
				return 0, err
			}
			j, err := bw.Set(evSnap.Ref, s.eventData(key.App, key.User, key.ID, e, string(body)))
			if err != nil {
				bw.End()
				return 0, err
			}
			jobs = append(jobs, j)
			n++
		}
		if !idSnap.Exists() {
			j, err := bw.Set(idSnap.Ref, map[string]any{"seq": e.Sequence})
			if err != nil {
				bw.End()
				return 0, err
			}
			jobs = append(jobs, j)
		}
	}
	bw.End()
	for _, j := range jobs {
		if _, err := j.Results(); err != nil {
			return 0, firestoredb.Wrap(err)
		}
	}
	return n, nil
}

// ImportState implements sessiondriver.Transferer: one transaction on the scope's
// document.
func (s *Store) ImportState(ctx context.Context, st *sessiontype.SharedState) (bool, error) {
	enc, err := sessiondriver.EncodeState(st.State)
	if err != nil {
		return false, err
	}
	ref := s.appStateRef(st.Ref.App)
	if st.Ref.User != "" {
		ref = s.userRef(st.Ref.App, st.Ref.User)
	}
	want := stateDoc{State: string(enc), UpdateNS: unixnano.From(st.UpdateTime)}
	var wrote bool
	err = s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		wrote = false
		snap, err := tx.Get(ref)
		switch {
		case firestoredb.IsNotFound(err):
		case err != nil:
			return err
		default:
			var old stateDoc
			if err := snap.DataTo(&old); err != nil {
				return err
			}
			if old.UpdateNS > want.UpdateNS {
				return fault.New(fault.FailedPrecondition, "the state %s moved on in this store (updated %v) past the archive's (updated %v)", st.Ref.Name(), unixnano.Time(old.UpdateNS), st.UpdateTime)
			}
			if old == want {
				return nil
			}
		}
		wrote = true
		return tx.Set(ref, want)
	}, s.txn...)
	return wrote, firestoredb.Wrap(err)
}

// EraseUser implements sessiondriver.Eraser: deleteUserSessions, and
// deleteUserData once no session is left.
func (s *Store) EraseUser(ctx context.Context, app, user string, limit int) ([]sessiontype.Key, error) {
	keys, err := s.deleteUserSessions(ctx, app, user, limit)
	if err != nil || len(keys) > 0 {
		return keys, err
	}
	return nil, s.deleteUserData(ctx, app, user)
}

// deleteUserSessions deletes up to limit sessions of a user: a query on
// the user's session documents, then, for each, the deletion
// DeleteSession does (a transaction that leaves a tombstone, then the
// removal of its data).
func (s *Store) deleteUserSessions(ctx context.Context, app, user string, limit int) ([]sessiontype.Key, error) {
	snaps, err := s.app(app).Collection("kioku_sessions").Where("user", "==", user).Limit(limit).Documents(ctx).GetAll()
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	var keys []sessiontype.Key
	for _, snap := range snaps {
		// A session replaced by another user's meanwhile stays.
		inc, err := s.removeSession(ctx, snap.Ref, app, time.Now(), func(d *sessionDoc) bool { return d.User == user })
		if err != nil {
			return keys, err
		}
		if inc == "" {
			continue
		}
		if err := s.purgeData(ctx, app, inc); err != nil {
			return keys, firestoredb.Wrap(err)
		}
		if _, err := s.tombstoneRef(app, inc).Delete(ctx); err != nil {
			return keys, firestoredb.Wrap(err)
		}
		keys = append(keys, sessiontype.Key{App: app, User: user, ID: snap.Ref.ID})
	}
	return keys, nil
}

// deleteUserData deletes what is left of a user: the user's state
// document, and the event documents still carrying the user as their
// owner (those of sessions whose removal was interrupted), found with the
// collection group query event search uses.
func (s *Store) deleteUserData(ctx context.Context, app, user string) error {
	if _, err := s.userRef(app, user).Delete(ctx); err != nil {
		return firestoredb.Wrap(err)
	}
	for {
		n, err := firestoredb.DeleteQuery(ctx, s.c, s.c.CollectionGroup("events").Where("owner", "==", s.owner(app, user)).Limit(300))
		if err != nil || n == 0 {
			return err
		}
	}
}
