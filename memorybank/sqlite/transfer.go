package sqlite

import (
	"context"
	"database/sql"
	"strings"

	"github.com/kioku-ai/kioku/memorybank"
)

// The primitives of export (package archive): listings in key order with
// cursors, each a range of a primary key.

// Apps implements memorybank.Store: the next app of each table after the
// cursor (one index seek each), the least of them, until limit.
func (s *Store) Apps(ctx context.Context, after string, limit int) ([]string, error) {
	var out []string
	for len(out) < limit {
		var next sql.NullString
		err := s.db.Read().QueryRowContext(ctx, `SELECT min(app) FROM (
			SELECT min(app) AS app FROM memories WHERE app > ?1
			UNION ALL SELECT min(app) FROM bank_configs WHERE app > ?1
			UNION ALL SELECT min(app) FROM operations WHERE app > ?1
			UNION ALL SELECT min(app) FROM watermarks WHERE app > ?1)`, after).Scan(&next)
		if err != nil {
			return nil, err
		}
		if !next.Valid {
			break
		}
		out = append(out, next.String)
		after = next.String
	}
	return out, nil
}

// ScanMemories implements memorybank.Store. A user's memories are found by
// reading the app's (no index holds the scope's user).
func (s *Store) ScanMemories(ctx context.Context, q memorybank.ScanQuery) ([]*memorybank.Memory, error) {
	var sb strings.Builder
	sb.WriteString(`SELECT ` + memoryColumns + ` FROM memories WHERE app = ? AND id > ?`)
	args := []any{q.App, q.AfterID}
	if q.User != "" {
		sb.WriteString(` AND json_extract(scope, ?) = ?`)
		args = append(args, `$."`+memorybank.ScopeUser+`"`, q.User)
	}
	sb.WriteString(` ORDER BY id LIMIT ?`)
	args = append(args, q.Limit)
	return queryMemories(ctx, s.db.Read(), sb.String(), args...)
}

// ScanWatermarks implements memorybank.Store.
func (s *Store) ScanWatermarks(ctx context.Context, app, prefix, after string, limit int) ([]memorybank.Watermark, error) {
	const q = `SELECT session, seq FROM watermarks WHERE app = ? AND session > ? AND session >= ? ORDER BY session LIMIT ?`
	rows, err := s.db.Read().QueryContext(ctx, q, app, after, prefix, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []memorybank.Watermark
	for rows.Next() {
		w := memorybank.Watermark{App: app}
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
