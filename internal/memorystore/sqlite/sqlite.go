// Package sqlite is the embedded default memory bank store: tables in
// kioku's SQLite file (see internal/sqlitedb), beside the session tables.
//
// Layout:
//
//	memories         (app, id) → scope key, fact, display name,
//	                 description, scope/topics/metadata/sources (JSON;
//	                 metadata in metadata.Map's stored form), times
//	                 (Unix ns), revision, deleted,
//	                 embedding (record.EncodeVector) and its model, memory
//	                 type and profile field (record.MarshalProfile; both
//	                 empty for natural-language memories); indexed by (app,
//	                 scope, update time) and (app, update time) for
//	                 listings, by expiry for the sweeper, and the profile
//	                 fields by (app, scope) for RetrieveProfiles.
//	memory_sources   (app, session, memory) for forgetting a session.
//	memory_revisions (app, memory, number) → the revision (JSON), expiry.
//	bank_configs     (app) → the configuration (JSON).
//	operations       (app, id) → state, kind (method), key (scope_key),
//	                 times, attempt, the operation (jobs.MarshalOperation);
//	                 indexed for listing and for claiming: the jobs
//	                 engine's (jobs.go), beside the memories, so that a
//	                 generation commits its memories and its operations'
//	                 completion in one transaction.
//	watermarks       (app, session) → last processed sequence.
//	change_feeds     (app) → the cursor of its latest change, and the
//	                 highest cursor the retention sweep removed.
//	memory_changes   (app, cursor) → scope key, memory, commit time
//	                 (Unix ns), the change (record.MarshalChange); indexed
//	                 by (app, scope, cursor) for a scope's watchers, by time
//	                 for the sweep and by memory for an erasure. Write appends to it and raises the app's
//	                 change_feeds row in its transaction (SQLite
//	                 serialises writes, so the counter costs no
//	                 contention).
//
// Similarity search runs in memory over a vectorcache.Cache: a scope's
// memories are loaded on the search that misses them and kept current after
// each write, so a search of a held scope costs a scan of its vectors in RAM
// (sparse vectors cost their non-zero coordinates) and no database read;
// the least recently searched scopes are evicted to stay within the cache's
// byte budget (Options.VectorCacheBytes) and loaded again, with one indexed
// query, when next searched. Memory rows are never removed: a deleted
// memory keeps its row for its revisions and for rollback.
package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/kioku-ai/kioku/internal/memorystore/vectorcache"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/record"
)

var schema = []string{`
CREATE TABLE memories (
	app             TEXT    NOT NULL,
	id              TEXT    NOT NULL,
	scope_key       TEXT    NOT NULL,
	fact            TEXT    NOT NULL,
	scope           TEXT    NOT NULL,
	topics          TEXT    NOT NULL DEFAULT '[]',
	metadata        TEXT    NOT NULL DEFAULT '{}',
	sources         TEXT    NOT NULL DEFAULT '[]',
	create_ns       INTEGER NOT NULL,
	update_ns       INTEGER NOT NULL,
	expire_ns       INTEGER NOT NULL DEFAULT 0,
	revision        INTEGER NOT NULL,
	deleted         INTEGER NOT NULL DEFAULT 0,
	embedding       BLOB,
	embedding_model TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (app, id)
) WITHOUT ROWID;
CREATE INDEX memories_by_scope ON memories (app, scope_key, deleted, update_ns DESC, id DESC);
CREATE INDEX memories_by_app ON memories (app, deleted, update_ns DESC, id DESC);
CREATE INDEX memories_by_expiry ON memories (expire_ns) WHERE expire_ns > 0 AND deleted = 0;
CREATE INDEX memories_by_model ON memories (embedding_model) WHERE deleted = 0;
CREATE TABLE memory_sources (
	app       TEXT NOT NULL,
	session   TEXT NOT NULL,
	memory_id TEXT NOT NULL,
	PRIMARY KEY (app, session, memory_id)
) WITHOUT ROWID;
CREATE TABLE memory_revisions (
	app       TEXT    NOT NULL,
	memory_id TEXT    NOT NULL,
	number    INTEGER NOT NULL,
	body      TEXT    NOT NULL,
	expire_ns INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (app, memory_id, number)
) WITHOUT ROWID;
CREATE INDEX revisions_by_expiry ON memory_revisions (expire_ns) WHERE expire_ns > 0;
CREATE TABLE bank_configs (
	app  TEXT NOT NULL PRIMARY KEY,
	body TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE operations (
	app             TEXT    NOT NULL,
	id              TEXT    NOT NULL,
	state           INTEGER NOT NULL,
	method          TEXT    NOT NULL,
	scope_key       TEXT    NOT NULL,
	create_ns       INTEGER NOT NULL,
	not_before_ns   INTEGER NOT NULL DEFAULT 0,
	lease_expiry_ns INTEGER NOT NULL DEFAULT 0,
	attempt         INTEGER NOT NULL DEFAULT 0,
	body            TEXT    NOT NULL,
	PRIMARY KEY (app, id)
) WITHOUT ROWID;
CREATE INDEX operations_by_app ON operations (app, create_ns DESC, id DESC);
CREATE INDEX operations_queue ON operations (state, create_ns);
CREATE INDEX operations_by_scope ON operations (app, scope_key, state, method, create_ns);
CREATE INDEX operations_by_end ON operations (state, create_ns) WHERE state >= 3;
CREATE TABLE watermarks (
	app     TEXT    NOT NULL,
	session TEXT    NOT NULL,
	seq     INTEGER NOT NULL,
	PRIMARY KEY (app, session)
) WITHOUT ROWID;
`, `
CREATE TABLE operations_v2 (
	app             TEXT    NOT NULL,
	id              TEXT    NOT NULL,
	state           TEXT    NOT NULL,
	method          TEXT    NOT NULL,
	scope_key       TEXT    NOT NULL,
	create_ns       INTEGER NOT NULL,
	claim_ns        INTEGER,
	lease_expiry_ns INTEGER NOT NULL DEFAULT 0,
	attempt         INTEGER NOT NULL DEFAULT 0,
	body            TEXT    NOT NULL,
	PRIMARY KEY (app, id)
) WITHOUT ROWID;
INSERT INTO operations_v2 (app, id, state, method, scope_key, create_ns, claim_ns, lease_expiry_ns, attempt, body)
SELECT app, id,
	CASE state WHEN 1 THEN 'PENDING' WHEN 2 THEN 'RUNNING' WHEN 3 THEN 'SUCCEEDED' WHEN 4 THEN 'FAILED' WHEN 5 THEN 'CANCELLED' END,
	method, scope_key, create_ns,
	CASE state WHEN 1 THEN max(create_ns, not_before_ns) WHEN 2 THEN lease_expiry_ns END,
	lease_expiry_ns, attempt, body
FROM operations;
DROP TABLE operations;
ALTER TABLE operations_v2 RENAME TO operations;
CREATE INDEX operations_by_app ON operations (app, create_ns DESC, id DESC);
CREATE INDEX operations_queue ON operations (claim_ns) WHERE claim_ns IS NOT NULL;
CREATE INDEX operations_by_scope ON operations (app, scope_key, state, method, claim_ns);
CREATE INDEX operations_by_end ON operations (create_ns) WHERE claim_ns IS NULL;
UPDATE memories SET embedding_model = '' WHERE deleted = 0 AND embedding IS NULL AND embedding_model != '';
UPDATE memory_revisions SET body = json_set(body, '$.action',
	CASE json_extract(body, '$.action') WHEN 1 THEN 'CREATED' WHEN 2 THEN 'UPDATED' WHEN 3 THEN 'DELETED' END)
WHERE json_type(body, '$.action') = 'integer';
`}

// migrations are the schema's steps: the tables (v1); operations keyed by
// state name and claim time, revisions' actions by name, and memories that
// the first version left without a vector (a generation that only added a
// source to a memory found by similarity dropped it) marked for
// re-embedding (v2); the operations' bodies of the first format rewritten
// in the current one (v3); memories' event and stated times (v4, 0 for
// unknown); the operations' bodies of the memory bank's second format
// rewritten in the jobs engine's (v5); memories' display names and
// descriptions (v6; their metadata may hold typed values since, in
// metadata.Map's stored form, which reads the strings of before
// unchanged); operations' owners, counted per user (v7, empty for those
// queued before); memories' type and profile field (empty for
// natural-language memories, which all earlier ones are), with the index
// RetrieveProfiles reads a scope's profile fields by (v8); the change
// feed, empty for the changes made before (v9); webhook deliveries and
// each app's dispatch lease and cursor (v10); the apps' usage per day,
// counted against their quotas (v11).
var migrations = append(stepsOf(schema),
	sqlitedb.Step{Func: rewriteOperations(`json_type(body, '$.format') IS NULL`)},
	sqlitedb.Step{SQL: `
ALTER TABLE memories ADD COLUMN event_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE memories ADD COLUMN stated_ns INTEGER NOT NULL DEFAULT 0;
`},
	sqlitedb.Step{Func: rewriteOperations(`json_extract(body, '$.format') = 2`)},
	sqlitedb.Step{SQL: `
ALTER TABLE memories ADD COLUMN display_name TEXT NOT NULL DEFAULT '';
ALTER TABLE memories ADD COLUMN description TEXT NOT NULL DEFAULT '';
`},
	sqlitedb.Step{SQL: `
ALTER TABLE operations ADD COLUMN owner TEXT NOT NULL DEFAULT '';
CREATE INDEX operations_by_owner ON operations (app, owner, state);
`},
	sqlitedb.Step{SQL: `
ALTER TABLE memories ADD COLUMN memory_type TEXT NOT NULL DEFAULT '';
ALTER TABLE memories ADD COLUMN profile TEXT NOT NULL DEFAULT '';
CREATE INDEX memories_profiles ON memories (app, scope_key) WHERE memory_type = 'STRUCTURED_PROFILE' AND deleted = 0;
`},
	sqlitedb.Step{SQL: `
CREATE TABLE change_feeds (
	app   TEXT    NOT NULL PRIMARY KEY,
	last  INTEGER NOT NULL DEFAULT 0,
	swept INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE memory_changes (
	app       TEXT    NOT NULL,
	cursor    INTEGER NOT NULL,
	scope_key TEXT    NOT NULL,
	memory_id TEXT    NOT NULL,
	time_ns   INTEGER NOT NULL,
	body      TEXT    NOT NULL,
	PRIMARY KEY (app, cursor)
) WITHOUT ROWID;
CREATE INDEX memory_changes_by_scope ON memory_changes (app, scope_key, cursor);
CREATE INDEX memory_changes_by_time ON memory_changes (time_ns);
CREATE INDEX memory_changes_by_memory ON memory_changes (app, memory_id);
`},
	sqlitedb.Step{SQL: `
CREATE TABLE webhook_dispatch (
	app       TEXT    NOT NULL PRIMARY KEY,
	owner     TEXT    NOT NULL DEFAULT '',
	expiry_ns INTEGER NOT NULL DEFAULT 0,
	cursor    INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE webhook_deliveries (
	app   TEXT NOT NULL,
	id    TEXT NOT NULL,
	state TEXT NOT NULL,
	body  BLOB NOT NULL,
	PRIMARY KEY (app, id)
) WITHOUT ROWID;
CREATE INDEX webhook_deliveries_by_state ON webhook_deliveries (app, state, id);
`},
	sqlitedb.Step{SQL: `
CREATE TABLE usage (
	app         TEXT    NOT NULL,
	day         TEXT    NOT NULL,
	generations INTEGER NOT NULL DEFAULT 0,
	tokens      INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (app, day)
) WITHOUT ROWID;
`})

func stepsOf(sqls []string) []sqlitedb.Step {
	out := make([]sqlitedb.Step, len(sqls))
	for i, q := range sqls {
		out[i] = sqlitedb.Step{SQL: q}
	}
	return out
}

// rewriteOperations returns the step that rewrites the operations whose
// bodies match where (a condition on body) in the current format.
func rewriteOperations(where string) func(tx *sql.Tx) error {
	return func(tx *sql.Tx) error {
		type row struct{ app, id, body string }
		old, err := sqlitedb.QueryAll(context.Background(), tx, func(scan func(...any) error) (row, error) {
			var r row
			err := scan(&r.app, &r.id, &r.body)
			return r, err
		}, `SELECT app, id, body FROM operations WHERE `+where)
		if err != nil {
			return err
		}
		for _, r := range old {
			op, err := record.DecodeOperation(r.app, r.id, []byte(r.body))
			if err != nil {
				return err
			}
			if err := putOperation(tx, op); err != nil {
				return err
			}
		}
		return nil
	}
}

// Store is the SQLite memory bank store.
type Store struct {
	db    *sqlitedb.DB
	cache *vectorcache.Cache
}

// The store implements every optional part of the contract, and keeps the
// operations of the jobs engine in the same database (jobs.go), as
// memorydriver.Write needs.
var (
	_ memorydriver.Store      = (*Store)(nil)
	_ memorydriver.Reembedder = (*Store)(nil)
	_ memorydriver.Transferer = (*Store)(nil)
	_ memorydriver.Eraser     = (*Store)(nil)
	_ memorydriver.Profiler   = (*Store)(nil)
	_ memorydriver.ChangeFeed = (*Store)(nil)
	_ memorydriver.Webhooks   = (*Store)(nil)
	_ memorydriver.UsageMeter = (*Store)(nil)
)

// Options tune a Store.
type Options struct {
	// VectorCacheBytes is the budget of the cache of scopes searched by
	// similarity. Default vectorcache.DefaultBytes; negative:
	// nothing is kept (each search reads its scope).
	VectorCacheBytes int64
}

// New returns a Store on db, creating its tables if needed.
func New(db *sqlitedb.DB, o Options) (*Store, error) {
	if err := db.MigrateSteps("memorybank", migrations); err != nil {
		return nil, err
	}
	if o.VectorCacheBytes == 0 {
		o.VectorCacheBytes = vectorcache.DefaultBytes
	}
	return &Store{db: db, cache: vectorcache.New(o.VectorCacheBytes)}, nil
}

// VectorCache returns the store's cache, for its figures.
func (s *Store) VectorCache() *vectorcache.Cache { return s.cache }

// deleteEach runs query, a DELETE of the row of an app and a key, for
// each of keys, in one transaction.
func (s *Store) deleteEach(ctx context.Context, query, app string, keys []string) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		for _, k := range keys {
			if _, err := tx.Exec(query, app, k); err != nil {
				return err
			}
		}
		return nil
	})
}

func jsonText(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
