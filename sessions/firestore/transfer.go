package firestore

import (
	"context"
	"slices"

	"cloud.google.com/go/firestore"

	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/sessions"
)

// The primitives of export (package archive): listings in document id
// order with cursors.

// Apps implements sessions.Store: the app documents under the root (which
// exist only as the parents of their collections), listed with their
// names; no index is needed.
func (s *Store) Apps(ctx context.Context, after string, limit int) ([]string, error) {
	refs, err := s.c.Collection(s.root).DocumentRefs(ctx).GetAll()
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	var out []string
	for _, r := range refs {
		if r.ID > after {
			out = append(out, r.ID)
		}
	}
	slices.Sort(out)
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// ScanSessions implements sessions.Store. Expired sessions not swept yet
// are skipped, reading further pages until the limit is reached.
func (s *Store) ScanSessions(ctx context.Context, q sessions.ScanQuery) ([]*sessions.Session, error) {
	base := s.app(q.App).Collection("kioku_sessions").Query
	if q.User != "" {
		base = base.Where("user", "==", q.User)
	}
	base = base.OrderBy(firestore.DocumentID, firestore.Asc)
	after := q.AfterID
	var out []*sessions.Session
	for len(out) < q.Limit {
		want := q.Limit - len(out)
		query := base.Limit(want)
		if after != "" {
			query = query.StartAfter(after)
		}
		snaps, err := query.Documents(ctx).GetAll()
		if err != nil {
			return nil, firestoredb.Wrap(err)
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

// ScanUserStates implements sessions.Store.
func (s *Store) ScanUserStates(ctx context.Context, app, after string, limit int) ([]*sessions.SharedState, error) {
	q := s.app(app).Collection("kioku_users").OrderBy(firestore.DocumentID, firestore.Asc).Limit(limit)
	if after != "" {
		q = q.StartAfter(after)
	}
	snaps, err := q.Documents(ctx).GetAll()
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	out := make([]*sessions.SharedState, 0, len(snaps))
	for _, snap := range snaps {
		st, updateNS, err := readState(snap, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, &sessions.SharedState{Ref: sessions.StateRef{App: app, User: snap.Ref.ID}, State: st, UpdateTime: unixnano.Time(updateNS)})
	}
	return out, nil
}
