package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/seal"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// CreateSession implements sessiondriver.Store. A fork's events are indexed
// for search the way appended ones are (index.go): the session starts with
// search_from 1.
func (s *Store) CreateSession(ctx context.Context, r *sessiondriver.CreateSessionParams) error {
	sess := r.Session
	labels, err := json.Marshal(nonNilLabels(sess.Labels))
	if err != nil {
		return err
	}
	state, err := sessiondriver.EncodeState(sess.State)
	if err != nil {
		return err
	}
	initial, err := sessiondriver.EncodeState(r.InitialState)
	if err != nil {
		return err
	}
	k := s.db.Keyring()
	if state, err = k.Seal(sess.App, sessionStateAt(sess.App, sess.ID), state); err != nil {
		return err
	}
	if initial, err = k.Seal(sess.App, initialStateAt(sess.App, sess.ID), initial); err != nil {
		return err
	}
	bodies := make([][]byte, len(r.Events))
	for i, e := range r.Events {
		if bodies[i], err = encodeEvent(e); err != nil {
			return err
		}
		if bodies[i], err = k.Seal(sess.App, eventAt(sess.App, sess.ID, e.Sequence), bodies[i]); err != nil {
			return err
		}
	}
	now := sess.CreateTime
	var searchFrom int64
	if len(r.Events) > 0 {
		searchFrom = 1
	}
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		var expireNS int64
		err := tx.QueryRow(`SELECT expire_ns FROM sessions WHERE app = ? AND id = ?`, sess.App, sess.ID).Scan(&expireNS)
		switch {
		case err == nil && !expired(expireNS, now):
			return fault.New(fault.AlreadyExists, "session id %q already exists in app %q", sess.ID, sess.App)
		case err == nil:
			if err := deleteSession(tx, sess.App, sess.ID); err != nil {
				return err
			}
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		_, err = tx.Exec(`INSERT INTO sessions (app, id, user, display_name, labels, state, initial_state, create_ns, update_ns, expire_ns, last_seq, compaction_seq, compaction_end, search_from)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			sess.App, sess.ID, sess.User, sess.DisplayName, labels, state, initial,
			unixnano.From(sess.CreateTime), unixnano.From(sess.UpdateTime), unixnano.From(sess.ExpireTime), sess.LastSequence,
			sess.CompactionSequence, sess.CompactedThrough, searchFrom)
		if err != nil {
			return err
		}
		for i, e := range r.Events {
			if _, err := tx.Stmt(s.insEvent).Exec(sess.App, sess.ID, e.Sequence, e.ID, unixnano.From(e.Timestamp), bodies[i]); err != nil {
				return err
			}
		}
		return s.applyShared(tx, sess.App, sess.User, r.User, r.App, now, r.MaxStateBytes)
	})
}

const sessionColumns = `user, display_name, labels, create_ns, update_ns, expire_ns, last_seq`

func scanSession(app, id string, scan func(...any) error, extra ...any) (*sessiontype.Session, error) {
	var (
		sess                         = &sessiontype.Session{Key: sessiontype.Key{App: app, ID: id}}
		labels                       []byte
		createNS, updateNS, expireNS int64
	)
	dest := append([]any{&sess.User, &sess.DisplayName, &labels, &createNS, &updateNS, &expireNS, &sess.LastSequence}, extra...)
	if err := scan(dest...); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(labels, &sess.Labels); err != nil {
		return nil, fmt.Errorf("decoding labels of session %s: %w", id, err)
	}
	if len(sess.Labels) == 0 {
		sess.Labels = nil
	}
	sess.CreateTime, sess.UpdateTime, sess.ExpireTime = unixnano.Time(createNS), unixnano.Time(updateNS), unixnano.Time(expireNS)
	return sess, nil
}

// loadSession reads a visible session row (with its own and initial state).
func loadSession(ctx context.Context, k *seal.Keyring, q querier, key sessiontype.Key, now time.Time) (*sessiontype.Session, error) {
	var state, initial []byte
	row := q.QueryRowContext(ctx, `SELECT `+sessionColumns+`, state, initial_state, compaction_seq, compaction_end FROM sessions WHERE app = ? AND id = ?`, key.App, key.ID)
	var compactionSeq, compactionEnd int64
	sess, err := scanSession(key.App, key.ID, row.Scan, &state, &initial, &compactionSeq, &compactionEnd)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound(key)
	}
	if err != nil {
		return nil, err
	}
	if sess.User != key.User || sess.Expired(now) {
		return nil, notFound(key)
	}
	if sess.State, err = decodeState(k, key.App, sessionStateAt(key.App, key.ID), state); err != nil {
		return nil, err
	}
	if sess.InitialState, err = decodeState(k, key.App, initialStateAt(key.App, key.ID), initial); err != nil {
		return nil, err
	}
	sess.CompactionSequence, sess.CompactedThrough = compactionSeq, compactionEnd
	return sess, nil
}

// SessionUser implements sessiondriver.Store.
func (s *Store) SessionUser(ctx context.Context, app, id string, now time.Time) (string, error) {
	var user string
	var expireNS int64
	err := s.db.Read().QueryRowContext(ctx, `SELECT user, expire_ns FROM sessions WHERE app = ? AND id = ?`, app, id).Scan(&user, &expireNS)
	if errors.Is(err, sql.ErrNoRows) || err == nil && expired(expireNS, now) {
		return "", fault.NotFoundf("session %s not found in app %s", id, app)
	}
	if err != nil {
		return "", err
	}
	return user, nil
}

// GetSession implements sessiondriver.Store.
func (s *Store) GetSession(ctx context.Context, key sessiontype.Key, q sessiondriver.EventQuery) (*sessiontype.Session, []*sessiontype.Event, error) {
	var (
		sess   *sessiontype.Session
		events []*sessiontype.Event
	)
	err := s.readTx(ctx, func(tx querier) error {
		var err error
		k := s.db.Keyring()
		if sess, err = loadSession(ctx, k, tx, key, q.Now); err != nil {
			return err
		}
		user, _, err := scopeState(ctx, k, tx, key.App, key.User)
		if err != nil {
			return err
		}
		app, _, err := scopeState(ctx, k, tx, key.App, "")
		if err != nil {
			return err
		}
		sess.State = sessiontype.Merge(sess.State, user, app)
		if q.Skip {
			return nil
		}
		// The most recent Limit events, read newest first and reversed.
		q.Descending = q.Limit > 0
		if events, err = queryEvents(ctx, s.db.Keyring(), tx, key, q); err != nil {
			return err
		}
		if q.Descending {
			for i, j := 0, len(events)-1; i < j; i, j = i+1, j-1 {
				events[i], events[j] = events[j], events[i]
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return sess, events, nil
}

// ListSessions implements sessiondriver.Store.
func (s *Store) ListSessions(ctx context.Context, q sessiondriver.ListSessionsParams) ([]*sessiontype.Session, error) {
	var sb strings.Builder
	cols := sessionColumns + `, id`
	if q.IncludeState {
		cols += `, state`
	}
	sb.WriteString(`SELECT ` + cols + ` FROM sessions WHERE app = ?`)
	args := []any{q.App}
	if q.User != "" {
		sb.WriteString(` AND user = ?`)
		args = append(args, q.User)
	}
	sb.WriteString(` AND (expire_ns = 0 OR expire_ns > ?)`)
	args = append(args, q.Now.UnixNano())
	if q.DisplayName != nil {
		sb.WriteString(` AND display_name = ?`)
		args = append(args, *q.DisplayName)
	}
	for k, v := range q.Labels {
		sb.WriteString(` AND json_extract(labels, ?) = ?`)
		args = append(args, `$."`+k+`"`, v)
	}
	column := "update_ns"
	if q.Order.ByCreateTime {
		column = "create_ns"
	}
	args = sqlitedb.ByTime(&sb, args, column, q.Order.Ascending, q.AfterTime, q.AfterID, q.Limit)
	return sqlitedb.QueryAll(ctx, s.db.Read(), func(scan func(...any) error) (*sessiontype.Session, error) {
		var id string
		var state []byte
		extra := []any{&id}
		if q.IncludeState {
			extra = append(extra, &state)
		}
		sess, err := scanSession(q.App, "", scan, extra...)
		if err != nil {
			return nil, err
		}
		sess.ID = id
		if q.IncludeState {
			if sess.State, err = decodeState(s.db.Keyring(), q.App, sessionStateAt(q.App, id), state); err != nil {
				return nil, err
			}
		}
		return sess, nil
	}, sb.String(), args...)
}

// UpdateSession implements sessiondriver.Store.
func (s *Store) UpdateSession(ctx context.Context, key sessiontype.Key, u *sessiondriver.UpdateSessionParams) (*sessiontype.Session, error) {
	var out *sessiontype.Session
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		sess, err := loadSession(ctx, s.db.Keyring(), tx, key, u.Now)
		if err != nil {
			return err
		}
		if u.DisplayName != nil {
			sess.DisplayName = *u.DisplayName
		}
		if u.Labels != nil {
			sess.Labels = maps.Clone(*u.Labels)
		}
		if u.ExpireTime != nil {
			sess.ExpireTime = *u.ExpireTime
		}
		sess.UpdateTime = u.Now
		labels, err := json.Marshal(nonNilLabels(sess.Labels))
		if err != nil {
			return err
		}
		_, err = tx.Exec(`UPDATE sessions SET display_name = ?, labels = ?, expire_ns = ?, update_ns = ? WHERE app = ? AND id = ?`,
			sess.DisplayName, labels, unixnano.From(sess.ExpireTime), unixnano.From(sess.UpdateTime), key.App, key.ID)
		out = sess
		return err
	})
	return out, err
}

// DeleteSession implements sessiondriver.Store.
func (s *Store) DeleteSession(ctx context.Context, key sessiontype.Key, now time.Time) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		if err := visible(ctx, tx, key, now); err != nil {
			return err
		}
		return deleteSession(tx, key.App, key.ID)
	})
}

func deleteSession(tx *sql.Tx, app, id string) error {
	if err := unindexSession(tx, app, id); err != nil {
		return err
	}
	if _, err := tx.Exec(`DELETE FROM events WHERE app = ? AND session = ?`, app, id); err != nil {
		return err
	}
	_, err := tx.Exec(`DELETE FROM sessions WHERE app = ? AND id = ?`, app, id)
	return err
}

// DeleteExpired implements sessiondriver.Store.
func (s *Store) DeleteExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	n := 0
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		keys, err := deleteSessionsWhere(tx, `SELECT app, id FROM sessions WHERE expire_ns > 0 AND expire_ns <= ? LIMIT ?`, now.UnixNano(), limit)
		n = len(keys)
		return err
	})
	return n, err
}

// deleteSessionsWhere deletes the sessions a query of (app, id) rows
// selects, with their events and search entries, and returns them.
func deleteSessionsWhere(tx *sql.Tx, query string, args ...any) ([][2]string, error) {
	rows, err := tx.Query(query, args...)
	if err != nil {
		return nil, err
	}
	var keys [][2]string
	for rows.Next() {
		var k [2]string
		if err := rows.Scan(&k[0], &k[1]); err != nil {
			rows.Close()
			return nil, err
		}
		keys = append(keys, k)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, k := range keys {
		if err := deleteSession(tx, k[0], k[1]); err != nil {
			return nil, err
		}
	}
	return keys, nil
}
