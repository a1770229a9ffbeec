package firestore

import (
	"context"
	"slices"
	"strings"

	"cloud.google.com/go/firestore"

	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/memorybank"
)

// The primitives of export (package archive): listings in document id or
// session name order with cursors.

// Apps implements memorybank.Store: the app documents under the root (which
// exist only as the parents of their collections); no index is needed.
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

// ScanMemories implements memorybank.Store. A user's memories are a query
// on scope.user_id (a single-field index).
func (s *Store) ScanMemories(ctx context.Context, q memorybank.ScanQuery) ([]*memorybank.Memory, error) {
	base := s.memories(q.App).Query
	if q.User != "" {
		base = base.WherePath(firestore.FieldPath{"scope", memorybank.ScopeUser}, "==", q.User)
	}
	base = base.OrderBy(firestore.DocumentID, firestore.Asc).Limit(q.Limit)
	if q.AfterID != "" {
		base = base.StartAfter(q.AfterID)
	}
	snaps, err := base.Documents(ctx).GetAll()
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	out := make([]*memorybank.Memory, 0, len(snaps))
	for _, snap := range snaps {
		m, err := fromSnap(q.App, snap)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// watermarkDoc is a watermark document.
type watermarkDoc struct {
	Session string `firestore:"session"`
	Seq     int64  `firestore:"seq"`
}

// ScanWatermarks implements memorybank.Store: a range query on the
// session field (a single-field index), from the prefix on, cut where the
// names stop having it.
func (s *Store) ScanWatermarks(ctx context.Context, app, prefix, after string, limit int) ([]memorybank.Watermark, error) {
	q := s.app(app).Collection("kioku_watermarks").Where("session", ">=", prefix).OrderBy("session", firestore.Asc).Limit(limit)
	if after != "" {
		q = q.StartAfter(after)
	}
	snaps, err := q.Documents(ctx).GetAll()
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	out := make([]memorybank.Watermark, 0, len(snaps))
	for _, snap := range snaps {
		var d watermarkDoc
		if err := snap.DataTo(&d); err != nil {
			return nil, err
		}
		if !strings.HasPrefix(d.Session, prefix) {
			break // past the names with the prefix
		}
		out = append(out, memorybank.Watermark{App: app, Session: d.Session, Sequence: d.Seq})
	}
	return out, nil
}
