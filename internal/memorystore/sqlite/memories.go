package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/seal"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/metadata"
	"github.com/kioku-ai/kioku/memorybank/record"
	"github.com/kioku-ai/kioku/memorybank/retrieval"
)

const memoryColumns = `app, id, fact, scope, topics, metadata, sources, create_ns, update_ns, expire_ns, revision, deleted, embedding, embedding_model, event_ns, stated_ns, display_name, description, memory_type, profile`

func scanMemory(k *seal.Keyring, scan func(...any) error) (*memorytype.Memory, error) {
	var (
		m                            memorytype.Memory
		scope, topics, meta, sources string
		createNS, updateNS, expireNS int64
		eventNS, statedNS            int64
		deleted                      int
		fact, embedding              []byte
		name, description, profile   []byte
		memoryType                   string
	)
	if err := scan(&m.App, &m.ID, &fact, &scope, &topics, &meta, &sources, &createNS, &updateNS, &expireNS, &m.Revision, &deleted, &embedding, &m.EmbeddingModel, &eventNS, &statedNS, &name, &description, &memoryType, &profile); err != nil {
		return nil, err
	}
	var err error
	if m.Fact, err = k.OpenString(m.App, factAt(m.App, m.ID), fact); err != nil {
		return nil, err
	}
	if embedding, err = openBlob(k, m.App, embeddingAt(m.App, m.ID), embedding); err != nil {
		return nil, err
	}
	if name, err = openBlob(k, m.App, displayNameAt(m.App, m.ID), name); err != nil {
		return nil, err
	}
	if description, err = openBlob(k, m.App, descriptionAt(m.App, m.ID), description); err != nil {
		return nil, err
	}
	if profile, err = openBlob(k, m.App, profileAt(m.App, m.ID), profile); err != nil {
		return nil, err
	}
	m.DisplayName, m.Description = string(name), string(description)
	for _, f := range []struct {
		raw string
		dst any
	}{{scope, &m.Scope}, {topics, &m.Topics}, {meta, &m.Metadata}} {
		if err := json.Unmarshal([]byte(f.raw), f.dst); err != nil {
			return nil, fmt.Errorf("decoding memory %s: %w", m.ID, err)
		}
	}
	if m.Sources, err = record.UnmarshalSources([]byte(sources)); err != nil {
		return nil, fmt.Errorf("decoding memory %s: %w", m.ID, err)
	}
	if m.Profile, err = record.UnmarshalProfile(string(profile)); err != nil {
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
	if m.Embedding, err = record.DecodeVector(embedding); err != nil {
		return nil, fmt.Errorf("decoding the vector of memory %s: %w", m.ID, err)
	}
	return &m, nil
}

func queryMemories(ctx context.Context, k *seal.Keyring, q sqlitedb.Querier, query string, args ...any) ([]*memorytype.Memory, error) {
	return sqlitedb.QueryAll(ctx, q, func(scan func(...any) error) (*memorytype.Memory, error) { return scanMemory(k, scan) }, query, args...)
}

// GetMemory implements memorydriver.Store.
func (s *Store) GetMemory(ctx context.Context, app, id string) (*memorytype.Memory, error) {
	m, err := scanMemory(s.db.Keyring(), s.db.Read().QueryRowContext(ctx, `SELECT `+memoryColumns+` FROM memories WHERE app = ? AND id = ?`, app, id).Scan)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fault.NotFoundf("memory apps/%s/memories/%s not found", app, id)
	}
	return m, err
}

// filterSQL appends the conditions of a filter.
func filterSQL(sb *strings.Builder, args []any, f memorytype.Filter) []any {
	sb.WriteString(` AND memory_type IN (`)
	types := f.Types
	if len(types) == 0 {
		types = []memorytype.MemoryType{memorytype.NaturalLanguage}
	}
	for i, t := range types {
		if i > 0 {
			sb.WriteString(`, `)
		}
		sb.WriteString(`?`)
		name := ""
		if t == memorytype.StructuredProfile {
			name = record.ProfileType
		}
		args = append(args, name)
	}
	sb.WriteString(`)`)
	for _, t := range f.Topics {
		sb.WriteString(` AND EXISTS (SELECT 1 FROM json_each(topics) WHERE value = ?)`)
		args = append(args, t)
	}
	for _, r := range []struct {
		col string
		tr  retrieval.TimeRange
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

// ListMemories implements memorydriver.Store.
func (s *Store) ListMemories(ctx context.Context, q memorydriver.ListQuery) ([]*memorytype.Memory, error) {
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

// SearchMemories implements memorydriver.Store: it searches the scope in the
// cache, loading it first when the cache does not hold it.
func (s *Store) SearchMemories(ctx context.Context, q memorydriver.SearchQuery) ([]retrieval.Ranked[*memorytype.Memory], error) {
	if q.Filter.None {
		return nil, nil
	}
	return s.cache.Search(ctx, q, func(ctx context.Context) ([]*memorytype.Memory, error) {
		return queryMemories(ctx, s.db.Keyring(), s.db.Read(), scopeLoadQuery, q.App, q.ScopeKey)
	})
}

// ProfileMemories implements memorydriver.Profiler, on the partial
// index of profile fields.
func (s *Store) ProfileMemories(ctx context.Context, app, scopeKey string, now time.Time, limit int) ([]*memorytype.Memory, error) {
	return queryMemories(ctx, s.db.Keyring(), s.db.Read(), `SELECT `+memoryColumns+` FROM memories INDEXED BY memories_profiles
		WHERE app = ? AND scope_key = ? AND memory_type = 'STRUCTURED_PROFILE' AND deleted = 0 AND (expire_ns = 0 OR expire_ns > ?) LIMIT ?`,
		app, scopeKey, now.UnixNano(), limit)
}

// MemoriesBySource implements memorydriver.Store.
func (s *Store) MemoriesBySource(ctx context.Context, app, session string, now time.Time) ([]*memorytype.Memory, error) {
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

// StaleEmbeddings implements memorydriver.Reembedder.
func (s *Store) StaleEmbeddings(ctx context.Context, model string, limit int, now time.Time) ([]*memorytype.Memory, error) {
	return queryMemories(ctx, s.db.Keyring(), s.db.Read(), `SELECT `+memoryColumns+` FROM memories WHERE deleted = 0 AND (embedding_model < ? OR embedding_model > ?) AND (expire_ns = 0 OR expire_ns > ?) LIMIT ?`, model, model, now.UnixNano(), limit)
}

// ExpiredMemories implements memorydriver.Store.
func (s *Store) ExpiredMemories(ctx context.Context, now time.Time, limit int) ([]*memorytype.Memory, error) {
	return queryMemories(ctx, s.db.Keyring(), s.db.Read(), `SELECT `+memoryColumns+` FROM memories WHERE expire_ns > 0 AND deleted = 0 AND expire_ns <= ? LIMIT ?`, now.UnixNano(), limit)
}

// Write implements memorydriver.Store.
func (s *Store) Write(ctx context.Context, w *memorydriver.Write) error {
	type prepared struct {
		c    memorydriver.Change
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
			body, err := record.MarshalRevision(c.Revision)
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
	opBodies, err := encodeUpdates(s.db.Keyring(), w.Operations)
	if err != nil {
		return err
	}
	for _, c := range w.Changes {
		s.cache.Touch(c.Memory.App, c.Memory.Scope.Key())
	}
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		// Preconditions first: nothing is written unless all hold.
		if err := checkUpdates(tx, w.Now, w.Operations); err != nil {
			return err
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
		if err := appendChanges(tx, w); err != nil {
			return err
		}
		for session, seq := range w.Watermarks {
			if _, err := tx.Exec(`INSERT INTO watermarks (app, session, seq) VALUES (?, ?, ?) ON CONFLICT (app, session) DO UPDATE SET seq = max(seq, excluded.seq)`, w.App, session, seq); err != nil {
				return err
			}
		}
		return applyUpdates(tx, w.Operations, opBodies)
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
	fact, name, description      any // sealed or not (sealText)
	profile                      any // sealed or not (sealOptional)
	embedding                    []byte
}

func encodeMemory(k *seal.Keyring, m *memorytype.Memory) (*memoryRow, error) {
	r := &memoryRow{embedding: record.EncodeVector(m.Embedding)}
	var err error
	if r.fact, err = sealText(k, m.App, factAt(m.App, m.ID), []byte(m.Fact)); err != nil {
		return nil, err
	}
	if r.embedding, err = sealBlob(k, m.App, embeddingAt(m.App, m.ID), r.embedding); err != nil {
		return nil, err
	}
	if r.name, err = sealOptional(k, m.App, displayNameAt(m.App, m.ID), m.DisplayName); err != nil {
		return nil, err
	}
	if r.description, err = sealOptional(k, m.App, descriptionAt(m.App, m.ID), m.Description); err != nil {
		return nil, err
	}
	if r.scope, err = jsonText(m.Scope); err != nil {
		return nil, err
	}
	if r.topics, err = jsonText(nonNil(m.Topics)); err != nil {
		return nil, err
	}
	if r.meta, err = jsonText(nonNilMetadata(m.Metadata)); err != nil {
		return nil, err
	}
	src, err := record.MarshalSources(m.Sources)
	if err != nil {
		return nil, err
	}
	r.sources = string(src)
	profile, err := record.MarshalProfile(m.Profile)
	if err != nil {
		return nil, err
	}
	if r.profile, err = sealOptional(k, m.App, profileAt(m.App, m.ID), profile); err != nil {
		return nil, err
	}
	return r, nil
}

// putMemory inserts or replaces a memory's row and, with sources, its
// entries in the source index (none for a deleted memory).
func putMemory(tx *sql.Tx, m *memorytype.Memory, r *memoryRow, sources bool) error {
	deleted := 0
	if m.Deleted {
		deleted = 1
	}
	if _, err := tx.Exec(`INSERT INTO memories (`+memoryColumns+`, scope_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (app, id) DO UPDATE SET fact = excluded.fact, topics = excluded.topics, metadata = excluded.metadata,
		display_name = excluded.display_name, description = excluded.description,
		sources = excluded.sources, update_ns = excluded.update_ns, expire_ns = excluded.expire_ns, revision = excluded.revision,
		deleted = excluded.deleted, embedding = excluded.embedding, embedding_model = excluded.embedding_model,
		event_ns = excluded.event_ns, stated_ns = excluded.stated_ns, memory_type = excluded.memory_type, profile = excluded.profile`,
		m.App, m.ID, r.fact, r.scope, r.topics, r.meta, r.sources, unixnano.From(m.CreateTime), unixnano.From(m.UpdateTime), unixnano.From(m.ExpireTime),
		m.Revision, deleted, r.embedding, m.EmbeddingModel, unixnano.From(m.EventTime), unixnano.From(m.StatedTime), r.name, r.description,
		record.MemoryType(m), r.profile, m.Scope.Key()); err != nil {
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

func nonNilMetadata(m metadata.Map) metadata.Map {
	if m == nil {
		return metadata.Map{}
	}
	return m
}

// Watermark implements memorydriver.Store.
func (s *Store) Watermark(ctx context.Context, app, session string) (int64, error) {
	var seq int64
	err := s.db.Read().QueryRowContext(ctx, `SELECT seq FROM watermarks WHERE app = ? AND session = ?`, app, session).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return seq, err
}
