package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/record"
)

// The primitives of export and import (package archive): listings in key
// order with cursors, each a range of a primary key, and writes of
// archived records as they are.

// Apps implements memorydriver.Transferer: the apps with a row in any of its tables.
func (s *Store) Apps(ctx context.Context, after string, limit int) ([]string, error) {
	return s.db.Apps(ctx, []string{"memories", "bank_configs", "operations", "watermarks"}, after, limit)
}

// ScanMemories implements memorydriver.Scanner. A user's memories are found by
// reading the app's (no index holds the scope's user).
func (s *Store) ScanMemories(ctx context.Context, q memorydriver.ScanQuery) ([]*memorytype.Memory, error) {
	var sb strings.Builder
	sb.WriteString(`SELECT ` + memoryColumns + ` FROM memories WHERE app = ? AND id > ?`)
	args := []any{q.App, q.AfterID}
	if q.User != "" {
		sb.WriteString(` AND json_extract(scope, ?) = ?`)
		args = append(args, `$."`+memorytype.ScopeUser+`"`, q.User)
	}
	sb.WriteString(` ORDER BY id LIMIT ?`)
	args = append(args, q.Limit)
	return queryMemories(ctx, s.db.Keyring(), s.db.Read(), sb.String(), args...)
}

// ScanWatermarks implements memorydriver.Scanner.
func (s *Store) ScanWatermarks(ctx context.Context, app, prefix, after string, limit int) ([]memorydriver.Watermark, error) {
	const q = `SELECT session, seq FROM watermarks WHERE app = ? AND session > ? AND session >= ? ORDER BY session LIMIT ?`
	rows, err := s.db.Read().QueryContext(ctx, q, app, after, prefix, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []memorydriver.Watermark
	for rows.Next() {
		w := memorydriver.Watermark{App: app}
		if err := rows.Scan(&w.Session, &w.Sequence); err != nil {
			return nil, err
		}
		if !strings.HasPrefix(w.Session, prefix) {
			break // past the names with the prefix
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// ImportMemory implements memorydriver.Transferer: one transaction for the
// memory's row, its source index entries and the revisions not stored
// yet; the vector cache is told as for any write.
func (s *Store) ImportMemory(ctx context.Context, m *memorytype.Memory, revs []*memorytype.Revision) (bool, int, error) {
	row, err := encodeMemory(s.db.Keyring(), m)
	if err != nil {
		return false, 0, err
	}
	bodies := make([]any, len(revs))
	for i, r := range revs {
		if r.App != m.App || r.MemoryID != m.ID {
			return false, 0, fault.Invalidf("revision %s is not one of memory %s", r.Name(), m.Name())
		}
		b, err := record.MarshalRevision(r)
		if err != nil {
			return false, 0, err
		}
		if bodies[i], err = sealText(s.db.Keyring(), r.App, revisionAt(r.App, r.MemoryID, r.Number), b); err != nil {
			return false, 0, err
		}
	}
	var (
		wrote bool
		n     int
	)
	s.cache.Touch(m.App, m.Scope.Key())
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		wrote, n = false, 0
		old, err := scanMemory(s.db.Keyring(), tx.QueryRow(`SELECT `+memoryColumns+` FROM memories WHERE app = ? AND id = ?`, m.App, m.ID).Scan)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			wrote = true
		case err != nil:
			return err
		case !old.CreateTime.Equal(m.CreateTime) || old.Scope.Key() != m.Scope.Key():
			return fault.New(fault.AlreadyExists, "memory id %q of app %q is another memory in this store (created %v, scope %q), not the archive's", m.ID, m.App, old.CreateTime, old.Scope.Key())
		case old.Revision > m.Revision || old.UpdateTime.After(m.UpdateTime):
			return fault.New(fault.FailedPrecondition, "memory %s moved on in this store (revision %d, updated %v) past the archive's (revision %d, updated %v)", m.Name(), old.Revision, old.UpdateTime, m.Revision, m.UpdateTime)
		default:
			wrote = !record.SameMemory(old, m)
		}
		if wrote {
			if err := putMemory(tx, m, row, true); err != nil {
				return err
			}
		}
		for i, r := range revs {
			res, err := tx.Exec(`INSERT OR IGNORE INTO memory_revisions (app, memory_id, number, body, expire_ns) VALUES (?, ?, ?, ?, ?)`,
				r.App, r.MemoryID, r.Number, bodies[i], unixnano.From(r.ExpireTime))
			if err != nil {
				return err
			}
			k, err := res.RowsAffected()
			if err != nil {
				return err
			}
			n += int(k)
		}
		return nil
	})
	if err != nil {
		return false, 0, err
	}
	if wrote {
		s.cache.Put(m)
	}
	return wrote, n, nil
}

// DeleteMemories implements memorydriver.Eraser: one transaction (SQLite
// overwrites what it deletes: see package sqlitedb); the vector cache
// drops them.
func (s *Store) DeleteMemories(ctx context.Context, app string, ids []string) error {
	var gone []*memorytype.Memory
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		gone = nil
		for _, id := range ids {
			m, err := scanMemory(s.db.Keyring(), tx.QueryRow(`SELECT `+memoryColumns+` FROM memories WHERE app = ? AND id = ?`, app, id).Scan)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return err
			}
			s.cache.Touch(app, m.Scope.Key())
			for _, q := range []string{
				`DELETE FROM memory_revisions WHERE app = ? AND memory_id = ?`,
				`DELETE FROM memory_sources WHERE app = ? AND memory_id = ?`,
				`DELETE FROM memory_changes WHERE app = ? AND memory_id = ?`,
				`DELETE FROM memories WHERE app = ? AND id = ?`,
			} {
				if _, err := tx.Exec(q, app, id); err != nil {
					return err
				}
			}
			m.Deleted = true
			gone = append(gone, m)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, m := range gone {
		s.cache.Put(m) // a deleted memory leaves its scope
	}
	return nil
}

// DeleteWatermarks implements memorydriver.Eraser.
func (s *Store) DeleteWatermarks(ctx context.Context, app string, sessions []string) error {
	return s.deleteEach(ctx, `DELETE FROM watermarks WHERE app = ? AND session = ?`, app, sessions)
}
