package firestore

import (
	"context"
	"encoding/json"

	"cloud.google.com/go/firestore"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
)

// Write implements memorydriver.Store: one transaction, which reads
// the operations, memories, watermarks, scope statistics and change feed
// it changes, checks every precondition (for a claim, through the key's document
// that no other operation of the key runs), then writes, the changes to the feed
// among them.
func (s *Store) Write(ctx context.Context, w *memorydriver.Write) error {
	if len(w.ChangeRecords(0)) > 0 {
		unlock, err := s.lockFeeds(ctx, w.App)
		if err != nil {
			return err
		}
		defer unlock()
	}
	err := s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		// Reads first: operations, memories, scope statistics, watermarks.
		claims, err := s.checkUpdates(tx, w.Now, w.Operations)
		if err != nil {
			return err
		}
		olds := make([]*memorytype.Memory, len(w.Changes))
		oldTerms := make([]counted, len(w.Changes)) // what the stats count of the old memory's terms
		type scopeRef struct{ app, key string }
		stats := map[scopeRef]scopeStats{}
		for i, c := range w.Changes {
			m := c.Memory
			snap, err := tx.Get(s.memories(m.App).Doc(m.ID))
			switch {
			case firestoredb.IsNotFound(err):
				if c.ExpectRevision != 0 {
					return fault.New(fault.Aborted, "memory %s no longer exists", m.Name())
				}
			case err != nil:
				return err
			default:
				old, err := fromSnap(m.App, snap)
				if err != nil {
					return err
				}
				if c.ExpectRevision == 0 {
					return fault.New(fault.AlreadyExists, "memory %s already exists", m.Name())
				}
				if old.Revision != c.ExpectRevision {
					return fault.New(fault.Aborted, "memory %s changed meanwhile (revision %d, expected %d)", m.Name(), old.Revision, c.ExpectRevision)
				}
				olds[i] = old
				if oldTerms[i], _, err = countedIn(snap); err != nil {
					return err
				}
			}
			key := scopeRef{m.App, m.Scope.Key()}
			if _, ok := stats[key]; !ok {
				st, err := readStats(tx.Get(s.statsRef(key.app, key.key)))
				if err != nil {
					return err
				}
				stats[key] = st
			}
		}
		marks := map[string]int64{}
		for session, seq := range w.Watermarks {
			snap, err := tx.Get(s.watermarkRef(w.App, session))
			old := int64(0)
			if err == nil {
				v, _ := snap.DataAt("seq")
				old, _ = v.(int64)
			} else if !firestoredb.IsNotFound(err) {
				return err
			}
			marks[session] = max(old, seq)
		}
		feed, err := s.readFeedFor(tx, w)
		if err != nil {
			return err
		}
		// Writes.
		for i, c := range w.Changes {
			m := c.Memory
			st := stats[scopeRef{m.App, m.Scope.Key()}]
			st.count(olds[i], oldTerms[i], -1)
			st.count(m, countedNow(m), 1)
			d, err := toDoc(m)
			if err != nil {
				return err
			}
			if err := tx.Set(s.memories(m.App).Doc(m.ID), d); err != nil {
				return err
			}
			if c.Revision != nil {
				rd, err := revisionToDoc(c.Revision)
				if err != nil {
					return err
				}
				if err := tx.Create(s.revisionRef(m.App, m.ID, c.Revision.Number), rd); err != nil {
					return err
				}
			}
		}
		for key, st := range stats {
			body, err := json.Marshal(st)
			if err != nil {
				return err
			}
			if err := tx.Set(s.statsRef(key.app, key.key), map[string]any{"scope_key": key.key, "body": string(body)}); err != nil {
				return err
			}
		}
		for session, seq := range marks {
			if err := tx.Set(s.watermarkRef(w.App, session), map[string]any{"session": session, "seq": seq}); err != nil {
				return err
			}
		}
		if err := s.appendChanges(tx, w, feed); err != nil {
			return err
		}
		return s.applyUpdates(tx, w.Operations, claims)
	}, s.txn...)
	return firestoredb.Wrap(err)
}
