package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/record"
)

// DeleteExpiredRevisions implements memorydriver.Store.
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

// ListRevisions implements memorydriver.Store.
func (s *Store) ListRevisions(ctx context.Context, app, memoryID string, before int64, limit int, now time.Time) ([]*memorytype.Revision, error) {
	q := `SELECT number, body FROM memory_revisions WHERE app = ? AND memory_id = ? AND (expire_ns = 0 OR expire_ns > ?)`
	args := []any{app, memoryID, now.UnixNano()}
	q, args = sqlitedb.BelowNumber(q, args, before, limit)
	return sqlitedb.QueryAll(ctx, s.db.Read(), func(scan func(...any) error) (*memorytype.Revision, error) {
		var n int64
		var body []byte
		if err := scan(&n, &body); err != nil {
			return nil, err
		}
		body, err := s.db.Keyring().Open(app, revisionAt(app, memoryID, n), body)
		if err != nil {
			return nil, err
		}
		return record.UnmarshalRevision(app, memoryID, n, body)
	}, q, args...)
}

// GetRevision implements memorydriver.Store.
func (s *Store) GetRevision(ctx context.Context, app, memoryID string, number int64) (*memorytype.Revision, error) {
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
	return record.UnmarshalRevision(app, memoryID, number, body)
}

// GetConfig implements memorydriver.Store.
func (s *Store) GetConfig(ctx context.Context, app string) (*appconfig.Config, error) {
	var body []byte
	err := s.db.Read().QueryRowContext(ctx, `SELECT body FROM bank_configs WHERE app = ?`, app).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return &appconfig.Config{App: app}, nil
	}
	if err != nil {
		return nil, err
	}
	if body, err = s.db.Keyring().Open(app, configAt(app), body); err != nil {
		return nil, err
	}
	return record.UnmarshalConfig(app, body)
}

// PutConfig implements memorydriver.Store.
func (s *Store) PutConfig(ctx context.Context, c *appconfig.Config) error {
	b, err := record.MarshalConfig(c)
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

// ListConfigs implements memorydriver.Store.
func (s *Store) ListConfigs(ctx context.Context) ([]*appconfig.Config, error) {
	return sqlitedb.QueryAll(ctx, s.db.Read(), func(scan func(...any) error) (*appconfig.Config, error) {
		var app string
		var body []byte
		if err := scan(&app, &body); err != nil {
			return nil, err
		}
		body, err := s.db.Keyring().Open(app, configAt(app), body)
		if err != nil {
			return nil, err
		}
		return record.UnmarshalConfig(app, body)
	}, `SELECT app, body FROM bank_configs`)
}
