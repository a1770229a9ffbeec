package firestore

import (
	"context"

	"cloud.google.com/go/firestore"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
)

// AppendEvent implements sessiondriver.Store.
func (s *Store) AppendEvent(ctx context.Context, r *sessiondriver.AppendEventParams) (*sessiondriver.AppendResult, error) {
	key := r.Key
	ref := s.sessionRef(key.App, key.ID)
	unlock, err := s.lockAppend(ctx, r)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// The event's search terms are found once, outside the transaction,
	// which may run more than once.
	indexed := sessiondriver.IndexTerms(r.Event)
	var res *sessiondriver.AppendResult
	err = s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
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
			res = &sessiondriver.AppendResult{Event: e, Existing: true}
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
			if err := sessiondriver.CheckCompaction(key, c, d.LastSeq); err != nil {
				return err
			}
			if c.EndSequence > d.CompactionEnd {
				updates = append(updates, firestore.Update{Path: "compaction_seq", Value: seq}, firestore.Update{Path: "compaction_end", Value: c.EndSequence})
			}
		}
		if len(r.Deltas.Session) > 0 {
			old, err := sessiondriver.DecodeState([]byte(d.State))
			if err != nil {
				return err
			}
			_, enc, err := sessiondriver.UpdatedState(old, r.Deltas.Session, "session", r.MaxStateBytes)
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
		res = &sessiondriver.AppendResult{Event: &e}
		return nil
	}, s.txn...)
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	return res, nil
}
