package firestore

import (
	"context"
	"encoding/json"
	"strings"

	"cloud.google.com/go/firestore"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/record"
)

// The primitives of export and import (package archive): listings in
// document id or session name order with cursors, and writes of archived
// records as they are.

// Apps implements memorydriver.Transferer (firestoredb.Apps).
func (s *Store) Apps(ctx context.Context, after string, limit int) ([]string, error) {
	return firestoredb.Apps(ctx, s.c, s.root, after, limit)
}

// ScanMemories implements memorydriver.Scanner. A user's memories are a query
// on scope.user_id (a single-field index).
func (s *Store) ScanMemories(ctx context.Context, q memorydriver.ScanQuery) ([]*memorytype.Memory, error) {
	base := s.memories(q.App).Query
	if q.User != "" {
		base = base.WherePath(firestore.FieldPath{"scope", memorytype.ScopeUser}, "==", q.User)
	}
	snaps, err := firestoredb.PageByID(ctx, base, q.AfterID, q.Limit)
	if err != nil {
		return nil, err
	}
	out := make([]*memorytype.Memory, 0, len(snaps))
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

// ScanWatermarks implements memorydriver.Scanner: a range query on the
// session field (a single-field index), from the prefix on, cut where the
// names stop having it.
func (s *Store) ScanWatermarks(ctx context.Context, app, prefix, after string, limit int) ([]memorydriver.Watermark, error) {
	q := s.app(app).Collection("kioku_watermarks").Where("session", ">=", prefix).OrderBy("session", firestore.Asc).Limit(limit)
	if after != "" {
		q = q.StartAfter(after)
	}
	snaps, err := q.Documents(ctx).GetAll()
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	out := make([]memorydriver.Watermark, 0, len(snaps))
	for _, snap := range snaps {
		var d watermarkDoc
		if err := snap.DataTo(&d); err != nil {
			return nil, err
		}
		if !strings.HasPrefix(d.Session, prefix) {
			break // past the names with the prefix
		}
		out = append(out, memorydriver.Watermark{App: app, Session: d.Session, Sequence: d.Seq})
	}
	return out, nil
}

// ImportMemory implements memorydriver.Transferer: one transaction that reads the
// memory, its scope's statistics and the revisions' documents, then writes
// the memory (counting it in the statistics in place of the stored one)
// and the revisions not stored yet.
func (s *Store) ImportMemory(ctx context.Context, m *memorytype.Memory, revs []*memorytype.Revision) (bool, int, error) {
	doc, err := toDoc(m)
	if err != nil {
		return false, 0, err
	}
	revRefs := make([]*firestore.DocumentRef, len(revs))
	revDocs := make([]*revisionDoc, len(revs))
	for i, r := range revs {
		if r.App != m.App || r.MemoryID != m.ID {
			return false, 0, fault.Invalidf("revision %s is not one of memory %s", r.Name(), m.Name())
		}
		if revDocs[i], err = revisionToDoc(r); err != nil {
			return false, 0, err
		}
		revRefs[i] = s.revisionRef(m.App, m.ID, r.Number)
	}
	ref := s.memories(m.App).Doc(m.ID)
	statsRef := s.statsRef(m.App, m.Scope.Key())
	var (
		wrote bool
		n     int
	)
	err = s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		wrote, n = false, 0
		var (
			old      *memorytype.Memory
			oldTerms counted
		)
		snap, err := tx.Get(ref)
		switch {
		case firestoredb.IsNotFound(err):
			wrote = true
		case err != nil:
			return err
		default:
			if old, err = fromSnap(m.App, snap); err != nil {
				return err
			}
			var current bool
			if oldTerms, current, err = countedIn(snap); err != nil {
				return err
			}
			switch {
			case !old.CreateTime.Equal(m.CreateTime) || old.Scope.Key() != m.Scope.Key():
				return fault.New(fault.AlreadyExists, "memory id %q of app %q is another memory in this store (created %v, scope %q), not the archive's", m.ID, m.App, old.CreateTime, old.Scope.Key())
			case old.Revision > m.Revision || old.UpdateTime.After(m.UpdateTime):
				return fault.New(fault.FailedPrecondition, "memory %s moved on in this store (revision %d, updated %v) past the archive's (revision %d, updated %v)", m.Name(), old.Revision, old.UpdateTime, m.Revision, m.UpdateTime)
			}
			wrote = !record.SameMemory(old, m) || !current
		}
		var st scopeStats
		if wrote {
			if st, err = readStats(tx.Get(statsRef)); err != nil {
				return err
			}
		}
		existing, err := tx.GetAll(revRefs)
		if err != nil {
			return err
		}
		if wrote {
			st.count(old, oldTerms, -1)
			st.count(m, countedNow(m), 1)
			body, err := json.Marshal(st)
			if err != nil {
				return err
			}
			if err := tx.Set(statsRef, map[string]any{"scope_key": m.Scope.Key(), "body": string(body)}); err != nil {
				return err
			}
			if err := tx.Set(ref, doc); err != nil {
				return err
			}
		}
		for i, e := range existing {
			if e.Exists() {
				continue
			}
			if err := tx.Set(revRefs[i], revDocs[i]); err != nil {
				return err
			}
			n++
		}
		return nil
	}, s.txn...)
	if err != nil {
		return false, 0, firestoredb.Wrap(err)
	}
	return wrote, n, nil
}

// DeleteMemories implements memorydriver.Eraser: for each memory, its
// revisions (a bulk writer, page by page), then in one transaction the
// memory's document and its part of the scope's statistics (whose document
// goes once no memory is counted in it). An erasure stopped between the two
// finds the memory again and finishes it.
func (s *Store) DeleteMemories(ctx context.Context, app string, ids []string) error {
	for _, id := range ids {
		ref := s.memories(app).Doc(id)
		if _, err := s.deleteAll(ctx, ref.Collection("kioku_revisions").Query); err != nil {
			return err
		}
		if _, err := s.deleteAll(ctx, s.changes(app).Where("memory_id", "==", id)); err != nil {
			return err
		}
		err := s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			snap, err := tx.Get(ref)
			if firestoredb.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			m, err := fromSnap(app, snap)
			if err != nil {
				return err
			}
			c, _, err := countedIn(snap)
			if err != nil {
				return err
			}
			statsRef := s.statsRef(app, m.Scope.Key())
			st, err := readStats(tx.Get(statsRef))
			if err != nil {
				return err
			}
			st.count(m, c, -1)
			if st.empty() {
				err = tx.Delete(statsRef)
			} else {
				var body []byte
				if body, err = json.Marshal(st); err == nil {
					err = tx.Set(statsRef, map[string]any{"scope_key": m.Scope.Key(), "body": string(body)})
				}
			}
			if err != nil {
				return err
			}
			return tx.Delete(ref)
		}, s.txn...)
		if err != nil {
			return firestoredb.Wrap(err)
		}
	}
	return nil
}

// empty reports whether the statistics count no memory.
func (st scopeStats) empty() bool {
	for _, ms := range st {
		if ms.N > 0 {
			return false
		}
	}
	return true
}

// deleteAll deletes every document a query returns, 300 at a time, and
// returns how many.
func (s *Store) deleteAll(ctx context.Context, q firestore.Query) (int, error) {
	total := 0
	for {
		n, err := firestoredb.DeleteQuery(ctx, s.c, q.Limit(300))
		total += n
		if err != nil || n == 0 {
			return total, err
		}
	}
}

// DeleteWatermarks implements memorydriver.Eraser.
func (s *Store) DeleteWatermarks(ctx context.Context, app string, sessions []string) error {
	refs := make([]*firestore.DocumentRef, len(sessions))
	for i, name := range sessions {
		refs[i] = s.watermarkRef(app, name)
	}
	return firestoredb.DeleteDocs(ctx, s.c, refs)
}
