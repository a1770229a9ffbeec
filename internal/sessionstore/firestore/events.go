package firestore

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
	"google.golang.org/api/iterator"
)

// queryEvents runs one bounded query over a session's events.
func (s *Store) queryEvents(ctx context.Context, app, inc string, q sessiondriver.EventQuery) ([]*sessiontype.Event, error) {
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
	var out []*sessiontype.Event
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
func (s *Store) visible(ctx context.Context, key sessiontype.Key, now time.Time) (*sessionDoc, error) {
	d, err := readSession(func(r *firestore.DocumentRef) (*firestore.DocumentSnapshot, error) { return r.Get(ctx) }, s.sessionRef(key.App, key.ID), key, now)
	return d, firestoredb.Wrap(err)
}

// ListEvents implements sessiondriver.Store.
func (s *Store) ListEvents(ctx context.Context, key sessiontype.Key, q sessiondriver.EventQuery) ([]*sessiontype.Event, error) {
	d, err := s.visible(ctx, key, q.Now)
	if err != nil {
		return nil, err
	}
	return s.queryEvents(ctx, key.App, d.Incarnation, q)
}

// FindEvent implements sessiondriver.Store.
func (s *Store) FindEvent(ctx context.Context, key sessiontype.Key, id string, now time.Time) (*sessiontype.Event, error) {
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
