// Package sqlite is the embedded default session store: tables in kioku's
// SQLite file (see internal/sqlitedb), durable on acknowledgement, with
// concurrent appends grouped into shared commits.
//
// Layout:
//
//	sessions   (app, id) → user, display_name, labels (JSON), state (JSON),
//	           initial_state (JSON), create/update/expire times (Unix ns),
//	           last_seq, compaction_seq and compaction_end (the latest
//	           compaction event and the last sequence it covers); indexed
//	           by (app, user, update time, id), (app, update time, id) and
//	           the same two by create time for listings, and by expire
//	           time for the sweeper.
//	events     (app, session, seq) → id, timestamp (Unix ns), body (the
//	           event's JSON without its sequence); unique on (app, session,
//	           id).
//	user_state (app, user) → state (JSON), update time.
//	app_state  (app) → state (JSON), update time.
//
// and the search index (see search.go), kept in the transactions that write
// events.
//
// Session ids are unique per app, so events are keyed by app and session id.
// Every read of events is a range scan of the events primary key and reads
// only the rows it returns (or, with a time filter, the rows it skips).
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

	"github.com/kioku-ai/kioku/internal/unixnano"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/sessions"
)

var schema = []string{`
CREATE TABLE sessions (
	app           TEXT    NOT NULL,
	id            TEXT    NOT NULL,
	user          TEXT    NOT NULL,
	display_name  TEXT    NOT NULL DEFAULT '',
	labels        TEXT    NOT NULL DEFAULT '{}',
	state         TEXT    NOT NULL DEFAULT '{}',
	initial_state TEXT    NOT NULL DEFAULT '{}',
	create_ns     INTEGER NOT NULL,
	update_ns     INTEGER NOT NULL,
	expire_ns     INTEGER NOT NULL DEFAULT 0,
	last_seq      INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (app, id)
) WITHOUT ROWID;
CREATE INDEX sessions_by_user ON sessions (app, user, update_ns DESC, id DESC);
CREATE INDEX sessions_by_app ON sessions (app, update_ns DESC, id DESC);
CREATE INDEX sessions_by_expiry ON sessions (expire_ns) WHERE expire_ns > 0;
CREATE TABLE events (
	app         TEXT    NOT NULL,
	session     TEXT    NOT NULL,
	seq         INTEGER NOT NULL,
	id          TEXT    NOT NULL,
	ts_ns       INTEGER NOT NULL,
	body        BLOB    NOT NULL,
	PRIMARY KEY (app, session, seq)
) WITHOUT ROWID;
CREATE UNIQUE INDEX events_by_id ON events (app, session, id);
CREATE TABLE user_state (
	app       TEXT    NOT NULL,
	user      TEXT    NOT NULL,
	state     TEXT    NOT NULL,
	update_ns INTEGER NOT NULL,
	PRIMARY KEY (app, user)
) WITHOUT ROWID;
CREATE TABLE app_state (
	app       TEXT    NOT NULL PRIMARY KEY,
	state     TEXT    NOT NULL,
	update_ns INTEGER NOT NULL
) WITHOUT ROWID;
`, searchSchema, searchVersionSchema, `
ALTER TABLE sessions ADD COLUMN compaction_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN compaction_end INTEGER NOT NULL DEFAULT 0;
`, `
CREATE INDEX sessions_by_user_created ON sessions (app, user, create_ns DESC, id DESC);
CREATE INDEX sessions_by_app_created ON sessions (app, create_ns DESC, id DESC);
`}

// Store is the SQLite session store.
type Store struct {
	db *sqlitedb.DB

	// Statements of the append path, prepared once on the write connection.
	selSession, selSessionState, selEventByID, insEvent, updSession, updSessionState *sql.Stmt
	selUserState, putUserState, selAppState, putAppState                             *sql.Stmt
	selUserStateRow, selAppStateRow                                                  *sql.Stmt
}

var _ sessions.Store = (*Store)(nil)

// New returns a Store on db, creating its tables if needed. A database
// whose events were stored before the search index existed, or indexed
// with the terms of an older terms.Version, has its sessions put in the
// search backlog, which ReindexSearch works off in the background: opening
// it stays quick however large it is.
func New(db *sqlitedb.DB) (*Store, error) {
	if err := db.Migrate("sessions", schema); err != nil {
		return nil, err
	}
	s := &Store{db: db}
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&s.selSession, `SELECT user, expire_ns, last_seq, compaction_end, '' FROM sessions WHERE app = ? AND id = ?`},
		{&s.selSessionState, `SELECT user, expire_ns, last_seq, compaction_end, state FROM sessions WHERE app = ? AND id = ?`},
		{&s.selEventByID, `SELECT seq, body FROM events WHERE app = ? AND session = ? AND id = ?`},
		{&s.insEvent, `INSERT INTO events (app, session, seq, id, ts_ns, body) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (app, session, id) DO NOTHING`},
		{&s.updSession, `UPDATE sessions SET last_seq = ?, update_ns = ? WHERE app = ? AND id = ?`},
		{&s.updSessionState, `UPDATE sessions SET last_seq = ?, update_ns = ?, state = ? WHERE app = ? AND id = ?`},
		{&s.selUserState, `SELECT state FROM user_state WHERE app = ? AND user = ?`},
		{&s.putUserState, `INSERT INTO user_state (app, user, state, update_ns) VALUES (?, ?, ?, ?) ON CONFLICT (app, user) DO UPDATE SET state = excluded.state, update_ns = excluded.update_ns`},
		{&s.selAppState, `SELECT state FROM app_state WHERE app = ?`},
		{&s.selUserStateRow, `SELECT state, update_ns FROM user_state WHERE app = ? AND user = ?`},
		{&s.selAppStateRow, `SELECT state, update_ns FROM app_state WHERE app = ?`},
		{&s.putAppState, `INSERT INTO app_state (app, state, update_ns) VALUES (?, ?, ?) ON CONFLICT (app) DO UPDATE SET state = excluded.state, update_ns = excluded.update_ns`},
	} {
		var err error
		if *p.stmt, err = db.Prepare(p.sql); err != nil {
			return nil, fmt.Errorf("sessionstore/sqlite: preparing %q: %w", p.sql, err)
		}
	}
	if err := s.queueReindex(context.Background()); err != nil {
		return nil, err
	}
	return s, nil
}

func notFound(key sessions.Key) error {
	return fault.NotFoundf("session %s not found", key.Name())
}

func expired(expireNS int64, now time.Time) bool {
	return expireNS != 0 && expireNS <= now.UnixNano()
}

// CreateSession implements sessions.Store.
func (s *Store) CreateSession(ctx context.Context, r *sessions.CreateRequest) error {
	sess := r.Session
	labels, err := json.Marshal(nonNilLabels(sess.Labels))
	if err != nil {
		return err
	}
	state, err := sessions.EncodeState(sess.State)
	if err != nil {
		return err
	}
	initial, err := sessions.EncodeState(r.InitialState)
	if err != nil {
		return err
	}
	bodies := make([][]byte, len(r.Events))
	for i, e := range r.Events {
		if bodies[i], err = encodeEvent(e); err != nil {
			return err
		}
	}
	now := sess.CreateTime
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
		_, err = tx.Exec(`INSERT INTO sessions (app, id, user, display_name, labels, state, initial_state, create_ns, update_ns, expire_ns, last_seq, compaction_seq, compaction_end)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			sess.App, sess.ID, sess.User, sess.DisplayName, labels, state, initial,
			unixnano.From(sess.CreateTime), unixnano.From(sess.UpdateTime), unixnano.From(sess.ExpireTime), sess.LastSequence,
			sess.CompactionSequence, sess.CompactedThrough)
		if err != nil {
			return err
		}
		for i, e := range r.Events {
			if _, err := tx.Stmt(s.insEvent).Exec(sess.App, sess.ID, e.Sequence, e.ID, unixnano.From(e.Timestamp), bodies[i]); err != nil {
				return err
			}
			if err := indexEvent(tx, sess.App, sess.User, sess.ID, e); err != nil {
				return err
			}
		}
		return s.applyShared(tx, sess.App, sess.User, r.User, r.App, now, r.MaxStateBytes)
	})
}

// encodeEvent returns an event's stored body: its JSON without the
// sequence, which is a column of its own.
func encodeEvent(e *sessions.Event) ([]byte, error) {
	c := *e
	c.Sequence = 0
	return c.Marshal()
}

// decodeEvent decodes a stored body and sets its sequence.
func decodeEvent(seq int64, body []byte) (*sessions.Event, error) {
	e, err := sessions.UnmarshalEvent(body)
	if err != nil {
		return nil, err
	}
	e.Sequence = seq
	return e, nil
}

func nonNilLabels(l map[string]string) map[string]string {
	if l == nil {
		return map[string]string{}
	}
	return l
}

// applyShared applies deltas to a user's and an app's state rows.
func (s *Store) applyShared(tx *sql.Tx, app, user string, userDelta, appDelta map[string]any, now time.Time, max int) error {
	if len(userDelta) > 0 {
		if _, err := s.updateScope(tx, s.selUserState, s.putUserState, []any{app, user}, "user", userDelta, now, max); err != nil {
			return err
		}
	}
	if len(appDelta) > 0 {
		if _, err := s.updateScope(tx, s.selAppState, s.putAppState, []any{app}, "app", appDelta, now, max); err != nil {
			return err
		}
	}
	return nil
}

// updateScope reads a shared scope's state row, applies delta, checks the
// size and writes it back.
func (s *Store) updateScope(tx *sql.Tx, sel, put *sql.Stmt, key []any, scope string, delta map[string]any, now time.Time, max int) (map[string]any, error) {
	var raw []byte
	if err := tx.Stmt(sel).QueryRow(key...).Scan(&raw); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	old, err := sessions.DecodeState(raw)
	if err != nil {
		return nil, fmt.Errorf("decoding %s state: %w", scope, err)
	}
	st, enc, err := sessions.UpdatedState(old, delta, scope, max)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Stmt(put).Exec(append(key, enc, unixnano.From(now))...); err != nil {
		return nil, err
	}
	return st, nil
}

// querier is what a read needs: a read transaction or a write transaction.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// readTx runs fn in a read transaction, so that its queries see one
// snapshot.
func (s *Store) readTx(ctx context.Context, fn func(q querier) error) error {
	tx, err := s.db.Read().BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return fn(tx)
}

const sessionColumns = `user, display_name, labels, create_ns, update_ns, expire_ns, last_seq`

func scanSession(app, id string, scan func(...any) error, extra ...any) (*sessions.Session, error) {
	var (
		sess                         = &sessions.Session{Key: sessions.Key{App: app, ID: id}}
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
func loadSession(ctx context.Context, q querier, key sessions.Key, now time.Time) (*sessions.Session, error) {
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
	if sess.State, err = sessions.DecodeState(state); err != nil {
		return nil, err
	}
	if sess.InitialState, err = sessions.DecodeState(initial); err != nil {
		return nil, err
	}
	sess.CompactionSequence, sess.CompactedThrough = compactionSeq, compactionEnd
	return sess, nil
}

// SessionUser implements sessions.Store.
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

func scopeState(ctx context.Context, q querier, query string, args ...any) (map[string]any, int64, error) {
	var raw []byte
	var updateNS int64
	err := q.QueryRowContext(ctx, query, args...).Scan(&raw, &updateNS)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, 0, err
	}
	st, err := sessions.DecodeState(raw)
	return st, updateNS, err
}

// GetSession implements sessions.Store.
func (s *Store) GetSession(ctx context.Context, key sessions.Key, q sessions.EventQuery) (*sessions.Session, []*sessions.Event, error) {
	var (
		sess   *sessions.Session
		events []*sessions.Event
	)
	err := s.readTx(ctx, func(tx querier) error {
		var err error
		if sess, err = loadSession(ctx, tx, key, q.Now); err != nil {
			return err
		}
		user, _, err := scopeState(ctx, tx, `SELECT state, update_ns FROM user_state WHERE app = ? AND user = ?`, key.App, key.User)
		if err != nil {
			return err
		}
		app, _, err := scopeState(ctx, tx, `SELECT state, update_ns FROM app_state WHERE app = ?`, key.App)
		if err != nil {
			return err
		}
		sess.State = sessions.Merge(sess.State, user, app)
		if q.Skip {
			return nil
		}
		// The most recent Limit events, read newest first and reversed.
		q.Descending = q.Limit > 0
		if events, err = queryEvents(ctx, tx, key, q); err != nil {
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

// queryEvents reads events of a session the caller has found visible.
func queryEvents(ctx context.Context, tx querier, key sessions.Key, q sessions.EventQuery) ([]*sessions.Event, error) {
	var sb strings.Builder
	args := []any{key.App, key.ID}
	sb.WriteString(`SELECT seq, body FROM events WHERE app = ? AND session = ?`)
	if q.AfterSeq > 0 {
		sb.WriteString(` AND seq > ?`)
		args = append(args, q.AfterSeq)
	}
	if q.BeforeSeq > 0 {
		sb.WriteString(` AND seq < ?`)
		args = append(args, q.BeforeSeq)
	}
	if !q.From.IsZero() {
		sb.WriteString(` AND ts_ns >= ?`)
		args = append(args, q.From.UnixNano())
	}
	if !q.To.IsZero() {
		sb.WriteString(` AND ts_ns < ?`)
		args = append(args, q.To.UnixNano())
	}
	if q.Descending {
		sb.WriteString(` ORDER BY seq DESC`)
	} else {
		sb.WriteString(` ORDER BY seq ASC`)
	}
	if q.Limit > 0 {
		sb.WriteString(` LIMIT ?`)
		args = append(args, q.Limit)
	}
	rows, err := tx.QueryContext(ctx, sb.String(), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var events []*sessions.Event
	total := 0
	for rows.Next() {
		var seq int64
		var body []byte
		if err := rows.Scan(&seq, &body); err != nil {
			return nil, err
		}
		e, err := decodeEvent(seq, body)
		if err != nil {
			return nil, fmt.Errorf("decoding an event of %s: %w", key.Name(), err)
		}
		events = append(events, e)
		if total += e.Size; q.MaxBytes > 0 && total > q.MaxBytes {
			break
		}
	}
	return events, rows.Err()
}

// ListEvents implements sessions.Store.
func (s *Store) ListEvents(ctx context.Context, key sessions.Key, q sessions.EventQuery) ([]*sessions.Event, error) {
	var events []*sessions.Event
	err := s.readTx(ctx, func(tx querier) error {
		if err := visible(ctx, tx, key, q.Now); err != nil {
			return err
		}
		var err error
		events, err = queryEvents(ctx, tx, key, q)
		return err
	})
	return events, err
}

// visible returns NotFound unless the session exists under its user and has
// not expired.
func visible(ctx context.Context, tx querier, key sessions.Key, now time.Time) error {
	var user string
	var expireNS int64
	err := tx.QueryRowContext(ctx, `SELECT user, expire_ns FROM sessions WHERE app = ? AND id = ?`, key.App, key.ID).Scan(&user, &expireNS)
	if errors.Is(err, sql.ErrNoRows) || err == nil && (user != key.User || expired(expireNS, now)) {
		return notFound(key)
	}
	return err
}

// FindEvent implements sessions.Store.
func (s *Store) FindEvent(ctx context.Context, key sessions.Key, id string, now time.Time) (*sessions.Event, error) {
	var e *sessions.Event
	err := s.readTx(ctx, func(tx querier) error {
		if err := visible(ctx, tx, key, now); err != nil {
			return err
		}
		var seq int64
		var body []byte
		err := tx.QueryRowContext(ctx, `SELECT seq, body FROM events WHERE app = ? AND session = ? AND id = ?`, key.App, key.ID, id).Scan(&seq, &body)
		if errors.Is(err, sql.ErrNoRows) {
			return fault.NotFoundf("event %q not found in session %s", id, key.Name())
		}
		if err != nil {
			return err
		}
		e, err = decodeEvent(seq, body)
		return err
	})
	return e, err
}

// ListSessions implements sessions.Store.
func (s *Store) ListSessions(ctx context.Context, q sessions.ListQuery) ([]*sessions.Session, error) {
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
	rows, err := s.db.Read().QueryContext(ctx, sb.String(), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*sessions.Session
	for rows.Next() {
		var id string
		var state []byte
		extra := []any{&id}
		if q.IncludeState {
			extra = append(extra, &state)
		}
		sess, err := scanSession(q.App, "", rows.Scan, extra...)
		if err != nil {
			return nil, err
		}
		sess.ID = id
		if q.IncludeState {
			if sess.State, err = sessions.DecodeState(state); err != nil {
				return nil, err
			}
		}
		out = append(out, sess)
	}
	return out, rows.Err()
}

// UpdateSession implements sessions.Store.
func (s *Store) UpdateSession(ctx context.Context, key sessions.Key, u *sessions.SessionUpdate) (*sessions.Session, error) {
	var out *sessions.Session
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		sess, err := loadSession(ctx, tx, key, u.Now)
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

// DeleteSession implements sessions.Store.
func (s *Store) DeleteSession(ctx context.Context, key sessions.Key, now time.Time) error {
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

// AppendEvent implements sessions.Store. Its common path is three
// statements: read the session's row, insert the event (ignored when the id
// exists: then the earlier append is returned) and move the session on.
func (s *Store) AppendEvent(ctx context.Context, r *sessions.AppendRequest) (*sessions.AppendResult, error) {
	key := r.Key
	body := r.Body // the event's JSON; its Sequence is zero
	// The event's search terms are found before the transaction, which
	// every other writer waits for.
	indexed := sessions.IndexTerms(r.Event)
	var res *sessions.AppendResult
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		var user string
		var expireNS, last, compactedThrough int64
		var state []byte // read only when the event changes the session's state
		var err error
		if len(r.Deltas.Session) > 0 {
			err = tx.Stmt(s.selSessionState).QueryRow(key.App, key.ID).Scan(&user, &expireNS, &last, &compactedThrough, &state)
		} else {
			err = tx.Stmt(s.selSession).QueryRow(key.App, key.ID).Scan(&user, &expireNS, &last, &compactedThrough, &state)
		}
		if errors.Is(err, sql.ErrNoRows) || err == nil && (user != key.User || expired(expireNS, r.Now)) {
			return notFound(key)
		}
		if err != nil {
			return err
		}
		seq := last + 1
		ins, err := tx.Stmt(s.insEvent).Exec(key.App, key.ID, seq, r.Event.ID, unixnano.From(r.Event.Timestamp), body)
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
			e, err := decodeEvent(storedSeq, stored)
			if err != nil {
				return err
			}
			res = &sessions.AppendResult{Event: e, Existing: true}
			return nil
		}
		if r.ExpectedSequence != nil && *r.ExpectedSequence != last {
			return fault.New(fault.FailedPrecondition, "session %s is at sequence %d, not the expected %d; read it again and retry", key.Name(), last, *r.ExpectedSequence)
		}
		if c := r.Event.Actions.Compaction; c != nil {
			if err := sessions.CheckCompaction(key, c, last); err != nil {
				return err
			}
			if c.EndSequence > compactedThrough {
				if _, err := tx.Exec(`UPDATE sessions SET compaction_seq = ?, compaction_end = ? WHERE app = ? AND id = ?`, seq, c.EndSequence, key.App, key.ID); err != nil {
					return err
				}
			}
		}
		if len(r.Deltas.Session) > 0 {
			old, err := sessions.DecodeState(state)
			if err != nil {
				return err
			}
			_, enc, err := sessions.UpdatedState(old, r.Deltas.Session, "session", r.MaxStateBytes)
			if err != nil {
				return err
			}
			if _, err := tx.Stmt(s.updSessionState).Exec(seq, unixnano.From(r.Now), enc, key.App, key.ID); err != nil {
				return err
			}
		} else if _, err := tx.Stmt(s.updSession).Exec(seq, unixnano.From(r.Now), key.App, key.ID); err != nil {
			return err
		}
		if err := s.applyShared(tx, key.App, key.User, r.Deltas.User, r.Deltas.App, r.Now, r.MaxStateBytes); err != nil {
			return err
		}
		e := *r.Event
		e.Sequence = seq
		if err := indexTerms(tx, key.App, key.User, key.ID, &e, indexed); err != nil {
			return err
		}
		res = &sessions.AppendResult{Event: &e}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// GetState implements sessions.Store.
func (s *Store) GetState(ctx context.Context, ref sessions.StateRef) (map[string]any, time.Time, error) {
	var (
		st  map[string]any
		uns int64
		err error
	)
	if ref.User == "" {
		st, uns, err = scopeState(ctx, s.db.Read(), `SELECT state, update_ns FROM app_state WHERE app = ?`, ref.App)
	} else {
		st, uns, err = scopeState(ctx, s.db.Read(), `SELECT state, update_ns FROM user_state WHERE app = ? AND user = ?`, ref.App, ref.User)
	}
	return st, unixnano.Time(uns), err
}

// UpdateState implements sessions.Store.
func (s *Store) UpdateState(ctx context.Context, r *sessions.StateUpdate) (map[string]any, time.Time, error) {
	var st map[string]any
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		var err error
		if r.Ref.User == "" {
			st, err = s.updateScope(tx, s.selAppState, s.putAppState, []any{r.Ref.App}, "app", r.Delta, r.Now, r.MaxStateBytes)
		} else {
			st, err = s.updateScope(tx, s.selUserState, s.putUserState, []any{r.Ref.App, r.Ref.User}, "user", r.Delta, r.Now, r.MaxStateBytes)
		}
		return err
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	return st, r.Now.UTC(), nil
}

// DeleteExpired implements sessions.Store.
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
