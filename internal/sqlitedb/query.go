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

// Querier runs queries: the read pool (DB.Read) or a transaction.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// QueryAll runs query on q and returns its rows as scan reads each.
func QueryAll[T any](ctx context.Context, q Querier, scan func(scan func(...any) error) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows.Scan)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// Strings runs query, which selects one text column, on the read pool and
// returns its values in the order it gives them.
func (db *DB) Strings(ctx context.Context, query string, args ...any) ([]string, error) {
	return QueryAll(ctx, db.Read(), func(scan func(...any) error) (string, error) {
		var s string
		err := scan(&s)
		return s, err
	}, query, args...)
}

// BelowNumber ends a listing of numbered revisions: those numbered below
// before (all when it is 0), newest first, at most limit. It returns the
// query and args with the clause's arguments appended.
func BelowNumber(query string, args []any, before int64, limit int) (string, []any) {
	if before > 0 {
		query += ` AND number < ?`
		args = append(args, before)
	}
	return query + ` ORDER BY number DESC LIMIT ?`, append(args, limit)
}

// DeleteUser deletes the rows of user of app from each of tables (each
// with app and user_id columns), in one write, and returns how many rows
// the first of them held: the stores' DeleteUser, the first table holding
// what they count.
func (db *DB) DeleteUser(ctx context.Context, app, user string, tables ...string) (int, error) {
	var n int64
	err := db.Write(ctx, func(tx *sql.Tx) error {
		for i, t := range tables {
			res, err := tx.Exec(`DELETE FROM `+t+` WHERE app = ? AND user_id = ?`, app, user)
			if err != nil {
				return err
			}
			if i == 0 {
				if n, err = res.RowsAffected(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return int(n), err
}
