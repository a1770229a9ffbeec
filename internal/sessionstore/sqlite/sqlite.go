// Package sqlite is the embedded default session store: tables in kioku's
// SQLite file (see internal/sqlitedb), durable on acknowledgement, with
// concurrent appends grouped into shared commits.
//
// Layout:
//
//	sessions   (app, id) → user, display_name, labels (JSON), state (JSON),
//	           initial_state (JSON), create/update/expire times (Unix ns),
//	           last_seq, compaction_seq and compaction_end (the latest
//	           compaction event and the last sequence it covers),
//	           search_from (the first event not indexed for search yet, 0
//	           when none; see index.go); indexed by (app, user, update
//	           time, id), (app, update time, id) and the same two by
//	           create time for listings, by expire time for the sweeper,
//	           and by (app, user, id) where search_from is set.
//	events     (app, session, seq) → id, timestamp (Unix ns), body (the
//	           event's JSON without its sequence); unique on (app, session,
//	           id).
//	user_state (app, user) → state (JSON), update time.
//	app_state  (app) → state (JSON), update time.
//
// and the search index (see search.go), written in batches after the
// appends (index.go).
//
// Session ids are unique per app, so events are keyed by app and session id.
// Every read of events is a range scan of the events primary key and reads
// only the rows it returns (or, with a time filter, the rows it skips).
package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
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
`, `
ALTER TABLE sessions ADD COLUMN search_from INTEGER NOT NULL DEFAULT 0;
CREATE INDEX sessions_search_pending ON sessions (app, user, id) WHERE search_from > 0;
`}

// Store is the SQLite session store.
type Store struct {
	db *sqlitedb.DB

	// Statements of the append path, prepared once on the write
	// connection. updSession[state][mark] moves a session on, writing its
	// state when state is set and its search_from when mark is.
	selSession, selSessionState, selEventByID, insEvent  *sql.Stmt
	updSession                                           [2][2]*sql.Stmt
	selUserState, putUserState, selAppState, putAppState *sql.Stmt
	selUserStateRow, selAppStateRow                      *sql.Stmt
	selSearchFrom, updSearchFrom, countEvents            *sql.Stmt
	insDocsChunk, insTermsChunk                          *sql.Stmt

	// indexMu makes the indexer's passes take turns (index.go).
	indexMu sync.Mutex
}

var (
	_ sessiondriver.Store      = (*Store)(nil)
	_ sessiondriver.Searcher   = (*Store)(nil)
	_ sessiondriver.Transferer = (*Store)(nil)
	_ sessiondriver.Eraser     = (*Store)(nil)
)

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
		{&s.selSession, `SELECT user, expire_ns, last_seq, compaction_end, search_from, '' FROM sessions WHERE app = ? AND id = ?`},
		{&s.selSessionState, `SELECT user, expire_ns, last_seq, compaction_end, search_from, state FROM sessions WHERE app = ? AND id = ?`},
		{&s.selEventByID, `SELECT seq, body FROM events WHERE app = ? AND session = ? AND id = ?`},
		{&s.insEvent, `INSERT INTO events (app, session, seq, id, ts_ns, body) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (app, session, id) DO NOTHING`},
		{&s.updSession[0][0], `UPDATE sessions SET last_seq = ?, update_ns = ? WHERE app = ? AND id = ?`},
		{&s.updSession[1][0], `UPDATE sessions SET last_seq = ?, update_ns = ?, state = ? WHERE app = ? AND id = ?`},
		{&s.updSession[0][1], `UPDATE sessions SET last_seq = ?, update_ns = ?, search_from = ? WHERE app = ? AND id = ?`},
		{&s.updSession[1][1], `UPDATE sessions SET last_seq = ?, update_ns = ?, state = ?, search_from = ? WHERE app = ? AND id = ?`},
		{&s.selSearchFrom, `SELECT user, create_ns, search_from FROM sessions WHERE app = ? AND id = ?`},
		{&s.countEvents, `SELECT count(*) FROM events WHERE app = ? AND session = ? AND seq BETWEEN ? AND ?`},
		{&s.insDocsChunk, insertDocsSQL(indexChunk)},
		{&s.insTermsChunk, insertTermsSQL(indexChunk)},
		{&s.updSearchFrom, `UPDATE sessions SET search_from = CASE WHEN last_seq > ? THEN ? ELSE 0 END WHERE app = ? AND id = ?`},
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

func notFound(key sessiontype.Key) error {
	return fault.NotFoundf("session %s not found", key.Name())
}

func expired(expireNS int64, now time.Time) bool {
	return expireNS != 0 && expireNS <= now.UnixNano()
}

func nonNilLabels(l map[string]string) map[string]string {
	if l == nil {
		return map[string]string{}
	}
	return l
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
