package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
)

// AppendEvent implements sessiondriver.Store. Its common path is three
// statements: read the session's row, insert the event (ignored when the id
// exists: then the earlier append is returned) and move the session on. The
// event is indexed for search later (index.go): the append only marks the
// session as having events to index, if it had none.
func (s *Store) AppendEvent(ctx context.Context, r *sessiondriver.AppendEventParams) (*sessiondriver.AppendResult, error) {
	key := r.Key
	body := r.Body // the event's JSON; its Sequence is zero
	var res *sessiondriver.AppendResult
	k := s.db.Keyring()
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		var user string
		var expireNS, last, compactedThrough, searchFrom int64
		var state []byte // read only when the event changes the session's state
		var err error
		sel := s.selSession
		if len(r.Deltas.Session) > 0 {
			sel = s.selSessionState
		}
		err = tx.Stmt(sel).QueryRow(key.App, key.ID).Scan(&user, &expireNS, &last, &compactedThrough, &searchFrom, &state)
		if errors.Is(err, sql.ErrNoRows) || err == nil && (user != key.User || expired(expireNS, r.Now)) {
			return notFound(key)
		}
		if err != nil {
			return err
		}
		seq := last + 1
		sealed, err := k.Seal(key.App, eventAt(key.App, key.ID, seq), body)
		if err != nil {
			return err
		}
		ins, err := tx.Stmt(s.insEvent).Exec(key.App, key.ID, seq, r.Event.ID, unixnano.From(r.Event.Timestamp), sealed)
		if err != nil {
			return err
		}
		if n, err := ins.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			// The id exists: this is a retry (or a conflict the caller judges).
			var storedSeq int64
			var stored []byte
			if err := tx.Stmt(s.selEventByID).QueryRow(key.App, key.ID, r.Event.ID).Scan(&storedSeq, &stored); err != nil {
				return err
			}
			e, err := decodeEvent(k, key.App, key.ID, storedSeq, stored)
			if err != nil {
				return err
			}
			res = &sessiondriver.AppendResult{Event: e, Existing: true}
			return nil
		}
		if r.ExpectedSequence != nil && *r.ExpectedSequence != last {
			return fault.New(fault.FailedPrecondition, "session %s is at sequence %d, not the expected %d; read it again and retry", key.Name(), last, *r.ExpectedSequence)
		}
		if c := r.Event.Actions.Compaction; c != nil {
			if err := sessiondriver.CheckCompaction(key, c, last); err != nil {
				return err
			}
			if c.EndSequence > compactedThrough {
				if _, err := tx.Exec(`UPDATE sessions SET compaction_seq = ?, compaction_end = ? WHERE app = ? AND id = ?`, seq, c.EndSequence, key.App, key.ID); err != nil {
					return err
				}
			}
		}
		args := make([]any, 0, 6)
		args = append(args, seq, unixnano.From(r.Now))
		withState, mark := 0, 0
		if len(r.Deltas.Session) > 0 {
			at := sessionStateAt(key.App, key.ID)
			old, err := decodeState(k, key.App, at, state)
			if err != nil {
				return err
			}
			_, enc, err := sessiondriver.UpdatedState(old, r.Deltas.Session, "session", r.MaxStateBytes)
			if err != nil {
				return err
			}
			if enc, err = k.Seal(key.App, at, enc); err != nil {
				return err
			}
			args, withState = append(args, enc), 1
		}
		if searchFrom == 0 {
			args, mark = append(args, seq), 1
		}
		if _, err := tx.Stmt(s.updSession[withState][mark]).Exec(append(args, key.App, key.ID)...); err != nil {
			return err
		}
		if err := s.applyShared(tx, key.App, key.User, r.Deltas.User, r.Deltas.App, r.Now, r.MaxStateBytes); err != nil {
			return err
		}
		e := *r.Event
		e.Sequence = seq
		res = &sessiondriver.AppendResult{Event: &e}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
