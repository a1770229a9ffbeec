package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// The primitives of export and import (package archive): listings in key
// order with cursors, each a range of a primary key, and writes of
// archived records as they are, each a transaction.

// Apps implements sessiondriver.Transferer: the apps with a row in any of its tables.
func (s *Store) Apps(ctx context.Context, after string, limit int) ([]string, error) {
	return s.db.Apps(ctx, []string{"sessions", "user_state", "app_state"}, after, limit)
}

// ScanSessions implements sessiondriver.Transferer.
func (s *Store) ScanSessions(ctx context.Context, q sessiondriver.ScanSessionsParams) ([]*sessiontype.Session, error) {
	var sb strings.Builder
	sb.WriteString(`SELECT ` + sessionColumns + `, id, state, initial_state, compaction_seq, compaction_end FROM sessions WHERE app = ?`)
	args := []any{q.App}
	if q.User != "" {
		sb.WriteString(` AND user = ?`)
		args = append(args, q.User)
	}
	sb.WriteString(` AND id > ? AND (expire_ns = 0 OR expire_ns > ?) ORDER BY id LIMIT ?`)
	args = append(args, q.AfterID, q.Now.UnixNano(), q.Limit)
	return sqlitedb.QueryAll(ctx, s.db.Read(), func(scan func(...any) error) (*sessiontype.Session, error) {
		var id string
		var state, initial []byte
		var compactionSeq, compactionEnd int64
		sess, err := scanSession(q.App, "", scan, &id, &state, &initial, &compactionSeq, &compactionEnd)
		if err != nil {
			return nil, err
		}
		sess.ID = id
		sess.CompactionSequence, sess.CompactedThrough = compactionSeq, compactionEnd
		k := s.db.Keyring()
		if sess.State, err = decodeState(k, q.App, sessionStateAt(q.App, id), state); err != nil {
			return nil, err
		}
		if sess.InitialState, err = decodeState(k, q.App, initialStateAt(q.App, id), initial); err != nil {
			return nil, err
		}
		return sess, nil
	}, sb.String(), args...)
}

// ScanUserStates implements sessiondriver.Transferer.
func (s *Store) ScanUserStates(ctx context.Context, app, after string, limit int) ([]*sessiontype.SharedState, error) {
	rows, err := s.db.Read().QueryContext(ctx, `SELECT user, state, update_ns FROM user_state WHERE app = ? AND user > ? ORDER BY user LIMIT ?`, app, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*sessiontype.SharedState
	for rows.Next() {
		var (
			user     string
			raw      []byte
			updateNS int64
		)
		if err := rows.Scan(&user, &raw, &updateNS); err != nil {
			return nil, err
		}
		st, err := decodeState(s.db.Keyring(), app, userStateAt(app, user), raw)
		if err != nil {
			return nil, err
		}
		out = append(out, &sessiontype.SharedState{Ref: sessiontype.StateRef{App: app, User: user}, State: st, UpdateTime: unixnano.Time(updateNS)})
	}
	return out, rows.Err()
}

// ImportSession implements sessiondriver.Transferer.
func (s *Store) ImportSession(ctx context.Context, sess *sessiontype.Session, now time.Time) (bool, error) {
	labels, err := json.Marshal(nonNilLabels(sess.Labels))
	if err != nil {
		return false, err
	}
	state, err := sessiondriver.EncodeState(sess.State)
	if err != nil {
		return false, err
	}
	initial, err := sessiondriver.EncodeState(sess.InitialState)
	if err != nil {
		return false, err
	}
	k := s.db.Keyring()
	stateAt, initialAt := sessionStateAt(sess.App, sess.ID), initialStateAt(sess.App, sess.ID)
	sealedState, err := k.Seal(sess.App, stateAt, state)
	if err != nil {
		return false, err
	}
	sealedInitial, err := k.Seal(sess.App, initialAt, initial)
	if err != nil {
		return false, err
	}
	row := []any{sess.User, sess.DisplayName, labels, sealedState, sealedInitial,
		unixnano.From(sess.CreateTime), unixnano.From(sess.UpdateTime), unixnano.From(sess.ExpireTime),
		sess.LastSequence, sess.CompactionSequence, sess.CompactedThrough, sess.App, sess.ID}
	var wrote bool
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		wrote = false
		var (
			user                               string
			createNS, updateNS, expireNS, last int64
			oldLabels, oldState, oldInitial    []byte
			oldDisplay                         string
			oldCompactionSeq, oldCompactionEnd int64
		)
		err := tx.QueryRow(`SELECT user, create_ns, update_ns, expire_ns, last_seq, display_name, labels, state, initial_state, compaction_seq, compaction_end
			FROM sessions WHERE app = ? AND id = ?`, sess.App, sess.ID).
			Scan(&user, &createNS, &updateNS, &expireNS, &last, &oldDisplay, &oldLabels, &oldState, &oldInitial, &oldCompactionSeq, &oldCompactionEnd)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case expired(expireNS, now):
			if err := deleteSession(tx, sess.App, sess.ID); err != nil {
				return err
			}
		case user != sess.User || createNS != unixnano.From(sess.CreateTime):
			return fault.New(fault.AlreadyExists, "session id %q of app %q is another session in this store (of user %q, created %v), not the archive's %s", sess.ID, sess.App, user, unixnano.Time(createNS), sess.Name())
		case last > sess.LastSequence || updateNS > unixnano.From(sess.UpdateTime):
			return fault.New(fault.FailedPrecondition, "session %s moved on in this store (sequence %d, updated %v) past the archive's (sequence %d, updated %v)", sess.Name(), last, unixnano.Time(updateNS), sess.LastSequence, sess.UpdateTime)
		default:
			if oldState, err = k.Open(sess.App, stateAt, oldState); err != nil {
				return err
			}
			if oldInitial, err = k.Open(sess.App, initialAt, oldInitial); err != nil {
				return err
			}
			same := updateNS == unixnano.From(sess.UpdateTime) && expireNS == unixnano.From(sess.ExpireTime) && last == sess.LastSequence &&
				oldDisplay == sess.DisplayName && string(oldLabels) == string(labels) && string(oldState) == string(state) &&
				string(oldInitial) == string(initial) && oldCompactionSeq == sess.CompactionSequence && oldCompactionEnd == sess.CompactedThrough
			if same {
				return nil
			}
			wrote = true
			_, err := tx.Exec(`UPDATE sessions SET user = ?, display_name = ?, labels = ?, state = ?, initial_state = ?, create_ns = ?, update_ns = ?, expire_ns = ?,
				last_seq = ?, compaction_seq = ?, compaction_end = ? WHERE app = ? AND id = ?`, row...)
			return err
		}
		wrote = true
		_, err = tx.Exec(`INSERT INTO sessions (user, display_name, labels, state, initial_state, create_ns, update_ns, expire_ns, last_seq, compaction_seq, compaction_end, app, id)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, row...)
		return err
	})
	return wrote, err
}

// ImportEvents implements sessiondriver.Transferer: one transaction, an insert per
// event not stored yet, and the search entries of those events (but of
// those the indexer will read, at or after the session's search_from:
// index.go).
func (s *Store) ImportEvents(ctx context.Context, key sessiontype.Key, events []*sessiontype.Event, now time.Time) (int, error) {
	bodies := make([][]byte, len(events))
	docs := make([]indexDoc, len(events))
	hasTerms := make([]bool, len(events))
	k := s.db.Keyring()
	hash, err := k.TermHasher(key.App)
	if err != nil {
		return 0, err
	}
	for i, e := range events {
		var err error
		if bodies[i], err = encodeEvent(e); err != nil {
			return 0, err
		}
		if bodies[i], err = k.Seal(key.App, eventAt(key.App, key.ID, e.Sequence), bodies[i]); err != nil {
			return 0, err
		}
		docs[i], hasTerms[i] = newIndexDoc(hash, key.App, key.User, key.ID, e)
	}
	n := 0
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		n = 0
		var user string
		var expireNS, last, searchFrom int64
		var index []indexDoc
		err := tx.QueryRow(`SELECT user, expire_ns, last_seq, search_from FROM sessions WHERE app = ? AND id = ?`, key.App, key.ID).Scan(&user, &expireNS, &last, &searchFrom)
		if errors.Is(err, sql.ErrNoRows) || err == nil && (user != key.User || expired(expireNS, now)) {
			return notFound(key)
		}
		if err != nil {
			return err
		}
		for i, e := range events {
			if e.Sequence < 1 || e.Sequence > last {
				return fault.Invalidf("event %q of session %s has sequence %d, outside the session's 1 to %d", e.ID, key.Name(), e.Sequence, last)
			}
			var storedID string
			err := tx.QueryRow(`SELECT id FROM events WHERE app = ? AND session = ? AND seq = ?`, key.App, key.ID, e.Sequence).Scan(&storedID)
			switch {
			case err == nil && storedID == e.ID:
				continue
			case err == nil:
				return fault.New(fault.AlreadyExists, "session %s holds event %q at sequence %d, not the archive's %q", key.Name(), storedID, e.Sequence, e.ID)
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
			res, err := tx.Stmt(s.insEvent).Exec(key.App, key.ID, e.Sequence, e.ID, unixnano.From(e.Timestamp), bodies[i])
			if err != nil {
				return err
			}
			if affected, err := res.RowsAffected(); err != nil {
				return err
			} else if affected == 0 {
				return fault.New(fault.AlreadyExists, "session %s holds event %q at another sequence than the archive's %d", key.Name(), e.ID, e.Sequence)
			}
			if hasTerms[i] && (searchFrom == 0 || e.Sequence < searchFrom) {
				index = append(index, docs[i])
			}
			n++
		}
		return s.indexDocs(tx, index)
	})
	return n, err
}

// ImportState implements sessiondriver.Transferer.
func (s *Store) ImportState(ctx context.Context, st *sessiontype.SharedState) (bool, error) {
	enc, err := sessiondriver.EncodeState(st.State)
	if err != nil {
		return false, err
	}
	sel, put, key, at := s.selAppStateRow, s.putAppState, []any{st.Ref.App}, appStateAt(st.Ref.App)
	if st.Ref.User != "" {
		sel, put, key, at = s.selUserStateRow, s.putUserState, []any{st.Ref.App, st.Ref.User}, userStateAt(st.Ref.App, st.Ref.User)
	}
	k := s.db.Keyring()
	sealed, err := k.Seal(st.Ref.App, at, enc)
	if err != nil {
		return false, err
	}
	var wrote bool
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		wrote = false
		var old []byte
		var updateNS int64
		err := tx.Stmt(sel).QueryRow(key...).Scan(&old, &updateNS)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case updateNS > unixnano.From(st.UpdateTime):
			return fault.New(fault.FailedPrecondition, "the state %s moved on in this store (updated %v) past the archive's (updated %v)", st.Ref.Name(), unixnano.Time(updateNS), st.UpdateTime)
		case updateNS == unixnano.From(st.UpdateTime):
			if old, err = k.Open(st.Ref.App, at, old); err != nil {
				return err
			}
			if string(old) == string(enc) {
				return nil
			}
		}
		wrote = true
		_, err = tx.Stmt(put).Exec(append(key, sealed, unixnano.From(st.UpdateTime))...)
		return err
	})
	return wrote, err
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

// deleteUserSessions deletes up to limit sessions of a user.
func (s *Store) deleteUserSessions(ctx context.Context, app, user string, limit int) ([]sessiontype.Key, error) {
	var keys []sessiontype.Key
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		deleted, err := deleteSessionsWhere(tx, `SELECT app, id FROM sessions INDEXED BY sessions_by_user WHERE app = ? AND user = ? LIMIT ?`, app, user, limit)
		keys = nil
		for _, k := range deleted {
			keys = append(keys, sessiontype.Key{App: k[0], User: user, ID: k[1]})
		}
		return err
	})
	return keys, err
}

// deleteUserData deletes what is left of a user: the user's state row, and
// their row of the search statistics with any index entries still under
// it.
func (s *Store) deleteUserData(ctx context.Context, app, user string) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.Exec(`DELETE FROM user_state WHERE app = ? AND user = ?`, app, user); err != nil {
			return err
		}
		var uid int64
		err := tx.QueryRow(`SELECT id FROM search_users WHERE app = ? AND user = ?`, app, user).Scan(&uid)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		lo, hi := uid<<32, uid<<32|maxUserDocs
		if _, err := tx.Exec(`DELETE FROM search_fts WHERE rowid IN (SELECT doc FROM search_docs WHERE doc BETWEEN ? AND ?)`, lo, hi); err != nil {
			return err
		}
		if _, err := tx.Exec(`DELETE FROM search_docs WHERE doc BETWEEN ? AND ?`, lo, hi); err != nil {
			return err
		}
		_, err = tx.Exec(`DELETE FROM search_users WHERE id = ?`, uid)
		return err
	})
}
