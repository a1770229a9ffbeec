package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/record"
)

// appendChanges appends a Write's changes to its app's feed and raises the
// app's latest cursor, in the Write's transaction.
func appendChanges(tx *sql.Tx, w *memorydriver.Write) error {
	var last int64
	err := tx.QueryRow(`SELECT last FROM change_feeds WHERE app = ?`, w.App).Scan(&last)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	recs := w.ChangeRecords(last)
	if len(recs) == 0 {
		return nil
	}
	for _, c := range recs {
		body, err := record.MarshalChange(c)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(`INSERT INTO memory_changes (app, cursor, scope_key, memory_id, time_ns, body) VALUES (?, ?, ?, ?, ?, ?)`,
			w.App, c.Cursor, c.Scope.Key(), c.MemoryID, unixnano.From(c.Time), string(body)); err != nil {
			return err
		}
	}
	_, err = tx.Exec(`INSERT INTO change_feeds (app, last) VALUES (?, ?) ON CONFLICT (app) DO UPDATE SET last = excluded.last`, w.App, recs[len(recs)-1].Cursor)
	return err
}

// ListChanges implements memorydriver.ChangeFeed: the feed's row, then its
// changes, in one read transaction.
func (s *Store) ListChanges(ctx context.Context, q memorydriver.ChangeQuery) (*memorytype.ChangePage, error) {
	tx, err := s.db.Read().BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	p := &memorytype.ChangePage{}
	err = tx.QueryRowContext(ctx, `SELECT last, swept FROM change_feeds WHERE app = ?`, q.App).Scan(&p.Last, &p.Swept)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	if q.Limit <= 0 {
		return p, nil
	}
	var sb strings.Builder
	sb.WriteString(`SELECT cursor, body FROM memory_changes WHERE app = ?`)
	args := []any{q.App}
	if q.ScopeKey != "" {
		sb.WriteString(` AND scope_key = ?`)
		args = append(args, q.ScopeKey)
	}
	sb.WriteString(` AND cursor > ? ORDER BY cursor LIMIT ?`)
	args = append(args, q.After, q.Limit)
	p.Changes, err = sqlitedb.QueryAll(ctx, tx, func(scan func(...any) error) (*memorytype.ChangeRecord, error) {
		var (
			cursor int64
			body   string
		)
		if err := scan(&cursor, &body); err != nil {
			return nil, err
		}
		return record.UnmarshalChange(q.App, cursor, []byte(body))
	}, sb.String(), args...)
	return p, err
}

// DeleteExpiredChanges implements memorydriver.ChangeFeed: it deletes the
// oldest expired changes and raises their apps' swept cursors in one
// transaction.
func (s *Store) DeleteExpiredChanges(ctx context.Context, now time.Time, limit int) (int, error) {
	n := 0
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		n = 0
		type key struct {
			app    string
			cursor int64
		}
		old, err := sqlitedb.QueryAll(ctx, tx, func(scan func(...any) error) (key, error) {
			var k key
			err := scan(&k.app, &k.cursor)
			return k, err
		}, `SELECT app, cursor FROM memory_changes WHERE time_ns <= ? ORDER BY time_ns LIMIT ?`, unixnano.From(now.Add(-memorydriver.ChangeRetention)), limit)
		if err != nil {
			return err
		}
		for _, k := range old {
			if _, err := tx.Exec(`DELETE FROM memory_changes WHERE app = ? AND cursor = ?`, k.app, k.cursor); err != nil {
				return err
			}
			if _, err := tx.Exec(`UPDATE change_feeds SET swept = max(swept, ?) WHERE app = ?`, k.cursor, k.app); err != nil {
				return err
			}
		}
		n = len(old)
		return nil
	})
	return n, err
}
