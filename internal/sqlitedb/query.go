package sqlitedb

import (
	"context"
	"database/sql"
	"strings"
	"time"
)

// NewestFirst ends a listing query: rows ordered by the time column
// (Unix nanoseconds) and then id, both descending, starting after the
// cursor (afterTime, afterID) unless afterID is empty, at most limit. It
// returns args with the clause's arguments appended.
func NewestFirst(sb *strings.Builder, args []any, timeColumn string, afterTime time.Time, afterID string, limit int) []any {
	return ByTime(sb, args, timeColumn, false, afterTime, afterID, limit)
}

// ByTime is NewestFirst, or with ascending set, oldest first (time, then
// id, ascending).
func ByTime(sb *strings.Builder, args []any, timeColumn string, ascending bool, afterTime time.Time, afterID string, limit int) []any {
	cmp, dir := "<", "DESC"
	if ascending {
		cmp, dir = ">", "ASC"
	}
	if afterID != "" {
		t := afterTime.UnixNano()
		sb.WriteString(` AND (` + timeColumn + ` ` + cmp + ` ? OR (` + timeColumn + ` = ? AND id ` + cmp + ` ?))`)
		args = append(args, t, t, afterID)
	}
	sb.WriteString(` ORDER BY ` + timeColumn + ` ` + dir + `, id ` + dir + ` LIMIT ?`)
	return append(args, limit)
}

// Apps lists the apps that have a row in any of tables (each indexed on
// its app column first), in order after the cursor, at most limit: the
// next app of each table after the cursor (one index seek each), the least
// of them, until limit. The stores' export listings use it.
func (db *DB) Apps(ctx context.Context, tables []string, after string, limit int) ([]string, error) {
	parts := make([]string, len(tables))
	for i, t := range tables {
		parts[i] = "SELECT min(app) AS app FROM " + t + " WHERE app > ?1"
	}
	query := "SELECT min(app) FROM (" + strings.Join(parts, " UNION ALL ") + ")"
	var out []string
	for len(out) < limit {
		var next sql.NullString
		if err := db.Read().QueryRowContext(ctx, query, after).Scan(&next); err != nil {
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
