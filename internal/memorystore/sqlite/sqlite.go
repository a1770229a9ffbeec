// Package sqlite is the embedded default memory bank store: tables in
// kioku's SQLite file (see internal/sqlitedb), beside the session tables.
//
// Layout:
//
//	memories         (app, id) → scope key, fact, scope/topics/metadata/
//	                 sources (JSON), times (Unix ns), revision, deleted,
//	                 embedding (memorybank.EncodeVector) and its model;
//	                 indexed by (app, scope, update time) and (app, update
//	                 time) for listings, by expiry for the sweeper.
//	memory_sources   (app, session, memory) for forgetting a session.
//	memory_revisions (app, memory, number) → the revision (JSON), expiry.
//	bank_configs     (app) → the configuration (JSON).
//	operations       (app, id) → state, scope, times, attempt, the
//	                 operation (JSON); indexed for listing and for claiming.
//	watermarks       (app, session) → last processed sequence.
//
// Similarity search runs in memory over a memorybank.VectorCache: a scope's
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
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/internal/unixnano"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/seal"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/memorybank"
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
// re-embedding (v2); the operations' bodies rewritten in their second
// format (v3); memories' event and stated times (v4, 0 for unknown).
var migrations = append(stepsOf(schema), sqlitedb.Step{Func: rewriteOperations}, sqlitedb.Step{SQL: `
ALTER TABLE memories ADD COLUMN event_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE memories ADD COLUMN stated_ns INTEGER NOT NULL DEFAULT 0;
`})

func stepsOf(sqls []string) []sqlitedb.Step {
	out := make([]sqlitedb.Step, len(sqls))
	for i, q := range sqls {
		out[i] = sqlitedb.Step{SQL: q}
	}
	return out
}

// rewriteOperations rewrites the operations stored in the first format.
func rewriteOperations(tx *sql.Tx) error {
	rows, err := tx.Query(`SELECT app, id, body FROM operations WHERE json_type(body, '$.format') IS NULL`)
	if err != nil {
		return err
	}
	type row struct{ app, id, body string }
	var old []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.app, &r.id, &r.body); err != nil {
			rows.Close()
			return err
		}
		old = append(old, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, r := range old {
		op, err := memorybank.UnmarshalOperation(r.app, r.id, []byte(r.body))
		if err != nil {
			return err
		}
		if err := putOperation(tx, op); err != nil {
			return err
		}
	}
	return nil
}

// Store is the SQLite memory bank store.
type Store struct {
	db    *sqlitedb.DB
	cache *memorybank.VectorCache
}

var _ memorybank.Store = (*Store)(nil)

// Options tune a Store.
type Options struct {
	// VectorCacheBytes is the budget of the cache of scopes searched by
	// similarity. Default memorybank.DefaultVectorCacheBytes; negative:
	// nothing is kept (each search reads its scope).
	VectorCacheBytes int64
}

// New returns a Store on db, creating its tables if needed.
func New(db *sqlitedb.DB, o Options) (*Store, error) {
	if err := db.MigrateSteps("memorybank", migrations); err != nil {
		return nil, err
	}
	if o.VectorCacheBytes == 0 {
		o.VectorCacheBytes = memorybank.DefaultVectorCacheBytes
	}
	return &Store{db: db, cache: memorybank.NewVectorCache(o.VectorCacheBytes)}, nil
}

// VectorCache returns the store's cache, for its figures.
func (s *Store) VectorCache() *memorybank.VectorCache { return s.cache }

func jsonText(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

const memoryColumns = `app, id, fact, scope, topics, metadata, sources, create_ns, update_ns, expire_ns, revision, deleted, embedding, embedding_model, event_ns, stated_ns`

func scanMemory(k *seal.Keyring, scan func(...any) error) (*memorybank.Memory, error) {
	var (
		m                            memorybank.Memory
		scope, topics, meta, sources string
		createNS, updateNS, expireNS int64
		eventNS, statedNS            int64
		deleted                      int
		fact, embedding              []byte
	)
	if err := scan(&m.App, &m.ID, &fact, &scope, &topics, &meta, &sources, &createNS, &updateNS, &expireNS, &m.Revision, &deleted, &embedding, &m.EmbeddingModel, &eventNS, &statedNS); err != nil {
		return nil, err
	}
	var err error
	if m.Fact, err = k.OpenString(m.App, factAt(m.App, m.ID), fact); err != nil {
		return nil, err
	}
	if embedding, err = openBlob(k, m.App, embeddingAt(m.App, m.ID), embedding); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		raw string
		dst any
	}{{scope, &m.Scope}, {topics, &m.Topics}, {meta, &m.Metadata}} {
		if err := json.Unmarshal([]byte(f.raw), f.dst); err != nil {
			return nil, fmt.Errorf("decoding memory %s: %w", m.ID, err)
		}
	}
	if m.Sources, err = memorybank.UnmarshalSources([]byte(sources)); err != nil {
		return nil, fmt.Errorf("decoding memory %s: %w", m.ID, err)
	}
	if len(m.Topics) == 0 {
		m.Topics = nil
	}
	if len(m.Metadata) == 0 {
		m.Metadata = nil
	}
	if len(m.Sources) == 0 {
		m.Sources = nil
	}
	m.CreateTime, m.UpdateTime, m.ExpireTime = unixnano.Time(createNS), unixnano.Time(updateNS), unixnano.Time(expireNS)
	m.EventTime, m.StatedTime = unixnano.Time(eventNS), unixnano.Time(statedNS)
	m.Deleted = deleted != 0
	if m.Embedding, err = memorybank.DecodeVector(embedding); err != nil {
		return nil, fmt.Errorf("decoding the vector of memory %s: %w", m.ID, err)
	}
	return &m, nil
}

func queryMemories(ctx context.Context, k *seal.Keyring, q querier, query string, args ...any) ([]*memorybank.Memory, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*memorybank.Memory
	for rows.Next() {
		m, err := scanMemory(k, rows.Scan)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// GetMemory implements memorybank.Store.
func (s *Store) GetMemory(ctx context.Context, app, id string) (*memorybank.Memory, error) {
	m, err := scanMemory(s.db.Keyring(), s.db.Read().QueryRowContext(ctx, `SELECT `+memoryColumns+` FROM memories WHERE app = ? AND id = ?`, app, id).Scan)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fault.NotFoundf("memory apps/%s/memories/%s not found", app, id)
	}
	return m, err
}

// filterSQL appends the conditions of a filter.
func filterSQL(sb *strings.Builder, args []any, f memorybank.Filter) []any {
	for _, t := range f.Topics {
		sb.WriteString(` AND EXISTS (SELECT 1 FROM json_each(topics) WHERE value = ?)`)
		args = append(args, t)
	}
	for k, v := range f.Metadata {
		sb.WriteString(` AND json_extract(metadata, ?) = ?`)
		args = append(args, `$."`+k+`"`, v)
	}
	for _, r := range []struct {
		col string
		tr  memorybank.TimeRange
	}{{"event_ns", f.EventTime}, {"stated_ns", f.StatedTime}} {
		if r.tr.Empty() {
			continue
		}
		sb.WriteString(` AND ` + r.col + ` != 0`)
		if !r.tr.From.IsZero() {
			sb.WriteString(` AND ` + r.col + ` >= ?`)
			args = append(args, unixnano.From(r.tr.From))
		}
		if !r.tr.To.IsZero() {
			sb.WriteString(` AND ` + r.col + ` < ?`)
			args = append(args, unixnano.From(r.tr.To))
		}
	}
	return args
}

// ListMemories implements memorybank.Store.
func (s *Store) ListMemories(ctx context.Context, q memorybank.ListQuery) ([]*memorybank.Memory, error) {
	if q.Filter.None {
		return nil, nil
	}
	var sb strings.Builder
	sb.WriteString(`SELECT ` + memoryColumns + ` FROM memories WHERE app = ?`)
	args := []any{q.App}
	if q.ScopeKey != "" {
		sb.WriteString(` AND scope_key = ?`)
		args = append(args, q.ScopeKey)
	}
	sb.WriteString(` AND deleted = 0 AND (expire_ns = 0 OR expire_ns > ?)`)
	args = append(args, q.Now.UnixNano())
	args = filterSQL(&sb, args, q.Filter)
	args = sqlitedb.NewestFirst(&sb, args, "update_ns", q.AfterUpdate, q.AfterID, q.Limit)
	return queryMemories(ctx, s.db.Keyring(), s.db.Read(), sb.String(), args...)
}

// SearchMemories implements memorybank.Store: it searches the scope in the
// cache, loading it first when the cache does not hold it.
func (s *Store) SearchMemories(ctx context.Context, q memorybank.SearchQuery) ([]memorybank.Scored, error) {
	if q.Filter.None {
		return nil, nil
	}
	return s.cache.Search(ctx, q, func(ctx context.Context) ([]*memorybank.Memory, error) {
		return queryMemories(ctx, s.db.Keyring(), s.db.Read(), scopeLoadQuery, q.App, q.ScopeKey)
	})
}

// MemoriesBySource implements memorybank.Store.
func (s *Store) MemoriesBySource(ctx context.Context, app, session string, now time.Time) ([]*memorybank.Memory, error) {
	return queryMemories(ctx, s.db.Keyring(), s.db.Read(), `SELECT `+prefixed("m.", memoryColumns)+` FROM memory_sources AS src JOIN memories AS m ON m.app = src.app AND m.id = src.memory_id
		WHERE src.app = ? AND src.session = ? AND m.deleted = 0 AND (m.expire_ns = 0 OR m.expire_ns > ?) ORDER BY m.id`, app, session, now.UnixNano())
}

func prefixed(p, cols string) string {
	parts := strings.Split(cols, ", ")
	for i := range parts {
		parts[i] = p + parts[i]
	}
	return strings.Join(parts, ", ")
}

// StaleEmbeddings implements memorybank.Store.
func (s *Store) StaleEmbeddings(ctx context.Context, model string, limit int, now time.Time) ([]*memorybank.Memory, error) {
	return queryMemories(ctx, s.db.Keyring(), s.db.Read(), `SELECT `+memoryColumns+` FROM memories WHERE deleted = 0 AND (embedding_model < ? OR embedding_model > ?) AND (expire_ns = 0 OR expire_ns > ?) LIMIT ?`, model, model, now.UnixNano(), limit)
}

// ExpiredMemories implements memorybank.Store.
func (s *Store) ExpiredMemories(ctx context.Context, now time.Time, limit int) ([]*memorybank.Memory, error) {
	return queryMemories(ctx, s.db.Keyring(), s.db.Read(), `SELECT `+memoryColumns+` FROM memories WHERE expire_ns > 0 AND deleted = 0 AND expire_ns <= ? LIMIT ?`, now.UnixNano(), limit)
}

// DeleteExpiredRevisions implements memorybank.Store.
func (s *Store) DeleteExpiredRevisions(ctx context.Context, now time.Time, limit int) (int, error) {
	var n int64
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		res, err := tx.Exec(`DELETE FROM memory_revisions WHERE (app, memory_id, number) IN (SELECT app, memory_id, number FROM memory_revisions WHERE expire_ns > 0 AND expire_ns <= ? LIMIT ?)`, now.UnixNano(), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// Write implements memorybank.Store.
func (s *Store) Write(ctx context.Context, w *memorybank.Write) error {
	type prepared struct {
		c    memorybank.Change
		row  *memoryRow
		body any
	}
	var ps []prepared
	for _, c := range w.Changes {
		row, err := encodeMemory(s.db.Keyring(), c.Memory)
		if err != nil {
			return err
		}
		p := prepared{c: c, row: row}
		if c.Revision != nil {
			body, err := c.Revision.MarshalBody()
			if err != nil {
				return err
			}
			r := c.Revision
			if p.body, err = sealText(s.db.Keyring(), r.App, revisionAt(r.App, r.MemoryID, r.Number), body); err != nil {
				return err
			}
		}
		ps = append(ps, p)
	}
	opBodies := make([]any, len(w.Operations))
	for i, u := range w.Operations {
		b, err := memorybank.MarshalOperation(u.Op)
		if err != nil {
			return err
		}
		if opBodies[i], err = sealText(s.db.Keyring(), u.Op.App, operationAt(u.Op.App, u.Op.ID), b); err != nil {
			return err
		}
	}
	for _, c := range w.Changes {
		s.cache.Touch(c.Memory.App, c.Memory.Scope.Key())
	}
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		// Preconditions first: nothing is written unless all hold.
		for _, u := range w.Operations {
			var state string
			var attempt int
			err := tx.QueryRow(`SELECT state, attempt FROM operations WHERE app = ? AND id = ?`, u.Op.App, u.Op.ID).Scan(&state, &attempt)
			if errors.Is(err, sql.ErrNoRows) {
				return fault.NotFoundf("operation %s not found", u.Op.Name())
			}
			if err != nil {
				return err
			}
			if state != u.ExpectState.String() || attempt != u.ExpectAttempt {
				return fault.New(fault.Aborted, "operation %s is %s at attempt %d, not %s at attempt %d", u.Op.Name(), state, attempt, u.ExpectState, u.ExpectAttempt)
			}
			if u.ClaimScope && u.Op.ScopeKey != "" {
				if err := scopeFree(tx, w, u.Op); err != nil {
					return err
				}
			}
		}
		for _, p := range ps {
			m := p.c.Memory
			var rev int64
			err := tx.QueryRow(`SELECT revision FROM memories WHERE app = ? AND id = ?`, m.App, m.ID).Scan(&rev)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				if p.c.ExpectRevision != 0 {
					return fault.New(fault.Aborted, "memory %s no longer exists", m.Name())
				}
			case err != nil:
				return err
			case p.c.ExpectRevision == 0:
				return fault.New(fault.AlreadyExists, "memory %s already exists", m.Name())
			case rev != p.c.ExpectRevision:
				return fault.New(fault.Aborted, "memory %s changed meanwhile (revision %d, expected %d)", m.Name(), rev, p.c.ExpectRevision)
			}
		}
		for _, p := range ps {
			m := p.c.Memory
			// A change without a revision only refreshes the vector: the
			// sources stay.
			if err := putMemory(tx, m, p.row, p.c.Revision != nil); err != nil {
				return err
			}
			if p.c.Revision == nil {
				continue
			}
			r := p.c.Revision
			if _, err := tx.Exec(`INSERT INTO memory_revisions (app, memory_id, number, body, expire_ns) VALUES (?, ?, ?, ?, ?)`,
				r.App, r.MemoryID, r.Number, p.body, unixnano.From(r.ExpireTime)); err != nil {
				return fmt.Errorf("recording revision %d of %s: %w", r.Number, m.Name(), err)
			}
		}
		for session, seq := range w.Watermarks {
			if _, err := tx.Exec(`INSERT INTO watermarks (app, session, seq) VALUES (?, ?, ?) ON CONFLICT (app, session) DO UPDATE SET seq = max(seq, excluded.seq)`, w.App, session, seq); err != nil {
				return err
			}
		}
		for i, u := range w.Operations {
			if err := updateOperation(tx, u.Op, opBodies[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, c := range w.Changes {
		s.cache.Put(c.Memory)
	}
	return nil
}

// memoryRow is a memory's encoded columns.
type memoryRow struct {
	scope, topics, meta, sources string
	fact                         any // sealed or not (sealText)
	embedding                    []byte
}

func encodeMemory(k *seal.Keyring, m *memorybank.Memory) (*memoryRow, error) {
	r := &memoryRow{embedding: memorybank.EncodeVector(m.Embedding)}
	var err error
	if r.fact, err = sealText(k, m.App, factAt(m.App, m.ID), []byte(m.Fact)); err != nil {
		return nil, err
	}
	if r.embedding, err = sealBlob(k, m.App, embeddingAt(m.App, m.ID), r.embedding); err != nil {
		return nil, err
	}
	if r.scope, err = jsonText(m.Scope); err != nil {
		return nil, err
	}
	if r.topics, err = jsonText(nonNil(m.Topics)); err != nil {
		return nil, err
	}
	if r.meta, err = jsonText(nonNilMap(m.Metadata)); err != nil {
		return nil, err
	}
	src, err := memorybank.MarshalSources(m.Sources)
	if err != nil {
		return nil, err
	}
	r.sources = string(src)
	return r, nil
}

// putMemory inserts or replaces a memory's row and, with sources, its
// entries in the source index (none for a deleted memory).
func putMemory(tx *sql.Tx, m *memorybank.Memory, r *memoryRow, sources bool) error {
	deleted := 0
	if m.Deleted {
		deleted = 1
	}
	if _, err := tx.Exec(`INSERT INTO memories (`+memoryColumns+`, scope_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (app, id) DO UPDATE SET fact = excluded.fact, topics = excluded.topics, metadata = excluded.metadata,
		sources = excluded.sources, update_ns = excluded.update_ns, expire_ns = excluded.expire_ns, revision = excluded.revision,
		deleted = excluded.deleted, embedding = excluded.embedding, embedding_model = excluded.embedding_model,
		event_ns = excluded.event_ns, stated_ns = excluded.stated_ns`,
		m.App, m.ID, r.fact, r.scope, r.topics, r.meta, r.sources, unixnano.From(m.CreateTime), unixnano.From(m.UpdateTime), unixnano.From(m.ExpireTime),
		m.Revision, deleted, r.embedding, m.EmbeddingModel, unixnano.From(m.EventTime), unixnano.From(m.StatedTime), m.Scope.Key()); err != nil {
		return err
	}
	if !sources {
		return nil
	}
	if _, err := tx.Exec(`DELETE FROM memory_sources WHERE app = ? AND memory_id = ?`, m.App, m.ID); err != nil {
		return err
	}
	if m.Deleted {
		return nil
	}
	for _, src := range m.Sources {
		if _, err := tx.Exec(`INSERT OR IGNORE INTO memory_sources (app, session, memory_id) VALUES (?, ?, ?)`, m.App, src.Session, m.ID); err != nil {
			return err
		}
	}
	return nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// ListRevisions implements memorybank.Store.
func (s *Store) ListRevisions(ctx context.Context, app, memoryID string, before int64, limit int, now time.Time) ([]*memorybank.Revision, error) {
	q := `SELECT number, body FROM memory_revisions WHERE app = ? AND memory_id = ? AND (expire_ns = 0 OR expire_ns > ?)`
	args := []any{app, memoryID, now.UnixNano()}
	if before > 0 {
		q += ` AND number < ?`
		args = append(args, before)
	}
	q += ` ORDER BY number DESC LIMIT ?`
	args = append(args, limit)
	rows, err := s.db.Read().QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*memorybank.Revision
	for rows.Next() {
		var n int64
		var body []byte
		if err := rows.Scan(&n, &body); err != nil {
			return nil, err
		}
		body, err := s.db.Keyring().Open(app, revisionAt(app, memoryID, n), body)
		if err != nil {
			return nil, err
		}
		r, err := memorybank.UnmarshalRevision(app, memoryID, n, body)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// GetRevision implements memorybank.Store.
func (s *Store) GetRevision(ctx context.Context, app, memoryID string, number int64) (*memorybank.Revision, error) {
	var body []byte
	err := s.db.Read().QueryRowContext(ctx, `SELECT body FROM memory_revisions WHERE app = ? AND memory_id = ? AND number = ?`, app, memoryID, number).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fault.NotFoundf("revision %d of memory apps/%s/memories/%s not found", number, app, memoryID)
	}
	if err != nil {
		return nil, err
	}
	if body, err = s.db.Keyring().Open(app, revisionAt(app, memoryID, number), body); err != nil {
		return nil, err
	}
	return memorybank.UnmarshalRevision(app, memoryID, number, body)
}

// GetConfig implements memorybank.Store.
func (s *Store) GetConfig(ctx context.Context, app string) (*memorybank.BankConfig, error) {
	var body []byte
	err := s.db.Read().QueryRowContext(ctx, `SELECT body FROM bank_configs WHERE app = ?`, app).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return &memorybank.BankConfig{App: app}, nil
	}
	if err != nil {
		return nil, err
	}
	if body, err = s.db.Keyring().Open(app, configAt(app), body); err != nil {
		return nil, err
	}
	return memorybank.UnmarshalConfig(app, body)
}

// PutConfig implements memorybank.Store.
func (s *Store) PutConfig(ctx context.Context, c *memorybank.BankConfig) error {
	b, err := memorybank.MarshalConfig(c)
	if err != nil {
		return err
	}
	body, err := sealText(s.db.Keyring(), c.App, configAt(c.App), b)
	if err != nil {
		return err
	}
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO bank_configs (app, body) VALUES (?, ?) ON CONFLICT (app) DO UPDATE SET body = excluded.body`, c.App, body)
		return err
	})
}

// ListConfigs implements memorybank.Store.
func (s *Store) ListConfigs(ctx context.Context) ([]*memorybank.BankConfig, error) {
	rows, err := s.db.Read().QueryContext(ctx, `SELECT app, body FROM bank_configs`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*memorybank.BankConfig
	for rows.Next() {
		var app string
		var body []byte
		if err := rows.Scan(&app, &body); err != nil {
			return nil, err
		}
		body, err := s.db.Keyring().Open(app, configAt(app), body)
		if err != nil {
			return nil, err
		}
		c, err := memorybank.UnmarshalConfig(app, body)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// CreateOperation implements memorybank.Store.
func (s *Store) CreateOperation(ctx context.Context, op *memorybank.Operation) error {
	b, err := memorybank.MarshalOperation(op)
	if err != nil {
		return err
	}
	body, err := sealText(s.db.Keyring(), op.App, operationAt(op.App, op.ID), b)
	if err != nil {
		return err
	}
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO operations (app, id, state, method, scope_key, create_ns, claim_ns, lease_expiry_ns, attempt, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			op.App, op.ID, op.State.String(), op.Method, op.ScopeKey, unixnano.From(op.CreateTime), claimNS(op), unixnano.From(op.LeaseExpiry), op.Attempt, body)
		if err != nil && strings.Contains(err.Error(), "UNIQUE") {
			return fault.New(fault.AlreadyExists, "operation %s already exists", op.Name())
		}
		return err
	})
}

// claimNS is the claim_ns column of an operation: its ClaimTime, NULL once
// it is finished.
func claimNS(op *memorybank.Operation) any {
	if op.State.Done() {
		return nil
	}
	return op.ClaimTime().UnixNano()
}

// GetOperation implements memorybank.Store.
func (s *Store) GetOperation(ctx context.Context, app, id string) (*memorybank.Operation, error) {
	var body []byte
	err := s.db.Read().QueryRowContext(ctx, `SELECT body FROM operations WHERE app = ? AND id = ?`, app, id).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fault.NotFoundf("operation apps/%s/operations/%s not found", app, id)
	}
	if err != nil {
		return nil, err
	}
	if body, err = s.db.Keyring().Open(app, operationAt(app, id), body); err != nil {
		return nil, err
	}
	return memorybank.UnmarshalOperation(app, id, body)
}

// queryOperations runs a query of (app, id, body) rows.
func queryOperations(ctx context.Context, k *seal.Keyring, q querier, query string, args ...any) ([]*memorybank.Operation, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*memorybank.Operation
	for rows.Next() {
		var app, id string
		var body []byte
		if err := rows.Scan(&app, &id, &body); err != nil {
			return nil, err
		}
		body, err := k.Open(app, operationAt(app, id), body)
		if err != nil {
			return nil, err
		}
		op, err := memorybank.UnmarshalOperation(app, id, body)
		if err != nil {
			return nil, err
		}
		out = append(out, op)
	}
	return out, rows.Err()
}

// ListOperations implements memorybank.Store.
func (s *Store) ListOperations(ctx context.Context, q memorybank.OpQuery) ([]*memorybank.Operation, error) {
	var sb strings.Builder
	sb.WriteString(`SELECT app, id, body FROM operations WHERE app = ?`)
	args := []any{q.App}
	if len(q.States) > 0 {
		sb.WriteString(` AND state IN (`)
		for i, st := range q.States {
			if i > 0 {
				sb.WriteString(`, `)
			}
			sb.WriteString(`?`)
			args = append(args, st.String())
		}
		sb.WriteString(`)`)
	}
	args = sqlitedb.NewestFirst(&sb, args, "create_ns", q.AfterCreate, q.AfterID, q.Limit)
	return queryOperations(ctx, s.db.Keyring(), s.db.Read(), sb.String(), args...)
}

// The queries of the hot paths, each pinned to its index (the planner,
// without statistics, would otherwise scan a whole app by primary key).
// TestQueryPlans checks them.
const (
	scopeLoadQuery = `SELECT ` + memoryColumns + ` FROM memories INDEXED BY memories_by_scope WHERE app = ? AND scope_key = ? AND deleted = 0`
	queuedQuery    = `SELECT app, id, body FROM operations INDEXED BY operations_queue WHERE claim_ns IS NOT NULL ORDER BY claim_ns LIMIT ?`
	pendingQuery   = `SELECT app, id, body FROM operations INDEXED BY operations_by_scope
		WHERE app = ? AND scope_key = ? AND state = 'PENDING' AND method = ? AND claim_ns <= ? ORDER BY claim_ns LIMIT ?`
	busyQuery      = `SELECT id FROM operations INDEXED BY operations_by_scope WHERE app = ? AND scope_key = ? AND state = 'RUNNING' AND lease_expiry_ns > ?`
	finishedSelect = `SELECT app, id FROM operations INDEXED BY operations_by_end WHERE claim_ns IS NULL AND create_ns < ? LIMIT ?`
	finishedQuery  = `DELETE FROM operations WHERE (app, id) IN (` + finishedSelect + `)`
)

// QueuedOperations implements memorybank.Store.
func (s *Store) QueuedOperations(ctx context.Context, limit int) ([]*memorybank.Operation, error) {
	return queryOperations(ctx, s.db.Keyring(), s.db.Read(), queuedQuery, limit)
}

// PendingOperations implements memorybank.Store.
// CountPending implements memorybank.Store.
func (s *Store) CountPending(ctx context.Context, app, scopeKey string, limit int) (int, error) {
	q, args := `SELECT count(*) FROM (SELECT 1 FROM operations WHERE app = ? AND state = 'PENDING' LIMIT ?)`, []any{app, limit}
	if scopeKey != "" {
		q = `SELECT count(*) FROM (SELECT 1 FROM operations INDEXED BY operations_by_scope WHERE app = ? AND scope_key = ? AND state = 'PENDING' LIMIT ?)`
		args = []any{app, scopeKey, limit}
	}
	var n int
	err := s.db.Read().QueryRowContext(ctx, q, args...).Scan(&n)
	return n, err
}

func (s *Store) PendingOperations(ctx context.Context, app, scopeKey, method string, now time.Time, limit int) ([]*memorybank.Operation, error) {
	return queryOperations(ctx, s.db.Keyring(), s.db.Read(), pendingQuery, app, scopeKey, method, now.UnixNano(), limit)
}

// scopeFree checks, inside a write, that no operation of op's scope other
// than those of the write runs under a live lease.
func scopeFree(tx *sql.Tx, w *memorybank.Write, op *memorybank.Operation) error {
	rows, err := tx.Query(busyQuery, op.App, op.ScopeKey, w.Now.UnixNano())
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		if !slices.ContainsFunc(w.Operations, func(u memorybank.OpUpdate) bool { return u.Op.App == op.App && u.Op.ID == id }) {
			return fault.New(fault.Aborted, "scope %q of app %s has a running operation (%s)", op.ScopeKey, op.App, id)
		}
	}
	return rows.Err()
}

// putOperation stores op in the current format.
func putOperation(tx *sql.Tx, op *memorybank.Operation) error {
	body, err := memorybank.MarshalOperation(op)
	if err != nil {
		return err
	}
	return updateOperation(tx, op, string(body))
}

func updateOperation(tx *sql.Tx, op *memorybank.Operation, body any) error {
	_, err := tx.Exec(`UPDATE operations SET state = ?, claim_ns = ?, lease_expiry_ns = ?, attempt = ?, body = ? WHERE app = ? AND id = ?`,
		op.State.String(), claimNS(op), unixnano.From(op.LeaseExpiry), op.Attempt, body, op.App, op.ID)
	return err
}

// Watermark implements memorybank.Store.
func (s *Store) Watermark(ctx context.Context, app, session string) (int64, error) {
	var seq int64
	err := s.db.Read().QueryRowContext(ctx, `SELECT seq FROM watermarks WHERE app = ? AND session = ?`, app, session).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return seq, err
}

// DeleteFinishedOperations implements memorybank.Store.
func (s *Store) DeleteFinishedOperations(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		res, err := tx.Exec(finishedQuery, before.UnixNano(), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
