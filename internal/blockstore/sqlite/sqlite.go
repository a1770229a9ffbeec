// Package sqlite is the embedded core memory block store: tables in
// kioku's SQLite file (see internal/sqlitedb), beside the sessions and the
// memory bank, migrated as their own component ("blocks").
//
// Layout:
//
//	blocks           (app, user_id, label) → value, description, lim,
//	                 read_only, revision, create_ns, update_ns; user_id
//	                 is '' for an app's shared blocks.
//	block_revisions  (app, user_id, label, number) → action, value,
//	                 description, lim, read_only, create_ns, sources (a
//	                 JSON array of blocks.Source, '' for none; v2).
//
// A write is one transaction of the shared write connection: it reads the
// block's revision, refuses with Aborted when it moved on, and writes.
//
// In an encrypted database (sqlitedb's UseEncryption) the values of the
// blocks and of their revisions are sealed, each bound to its row
// (package seal), as memory files' contents are; labels, descriptions
// and limits stay in the clear.
package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/kioku-ai/kioku/blocks"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/seal"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/internal/unixnano"
)

// schema is the tables (v1); sourcesColumn adds the revisions' sources
// (v2).
const schema = `
CREATE TABLE blocks (
	app         TEXT    NOT NULL,
	user_id     TEXT    NOT NULL,
	label       TEXT    NOT NULL,
	value       BLOB    NOT NULL,
	description TEXT    NOT NULL,
	lim         INTEGER NOT NULL,
	read_only   INTEGER NOT NULL,
	revision    INTEGER NOT NULL,
	create_ns   INTEGER NOT NULL,
	update_ns   INTEGER NOT NULL,
	PRIMARY KEY (app, user_id, label)
) WITHOUT ROWID;
CREATE TABLE block_revisions (
	app         TEXT    NOT NULL,
	user_id     TEXT    NOT NULL,
	label       TEXT    NOT NULL,
	number      INTEGER NOT NULL,
	action      TEXT    NOT NULL,
	value       BLOB    NOT NULL,
	description TEXT    NOT NULL,
	lim         INTEGER NOT NULL,
	read_only   INTEGER NOT NULL,
	create_ns   INTEGER NOT NULL,
	PRIMARY KEY (app, user_id, label, number)
) WITHOUT ROWID;
`

const sourcesColumn = `ALTER TABLE block_revisions ADD COLUMN sources TEXT NOT NULL DEFAULT '';`

// Store is the SQLite block store.
type Store struct {
	db *sqlitedb.DB
}

var _ blocks.Store = (*Store)(nil)

// New returns a Store on db, creating its tables if needed.
func New(db *sqlitedb.DB) (*Store, error) {
	if err := db.Migrate("blocks", []string{schema, sourcesColumn}); err != nil {
		return nil, err
	}
	return &Store{db: db}, nil
}

// The places of the sealed columns.
func valueAt(k blocks.Key) seal.Where {
	return seal.At("blocks.value", k.App, k.User, k.Label)
}

func revisionAt(k blocks.Key, n int64) seal.Where {
	return seal.At("block_revisions.value", k.App, k.User, k.Label, strconv.FormatInt(n, 10))
}

const blockColumns = `label, value, description, lim, read_only, revision, create_ns, update_ns`

type scanner interface{ Scan(dest ...any) error }

func scanBlock(k *seal.Keyring, row scanner, app, user string) (*blocks.Block, error) {
	b := &blocks.Block{Key: blocks.Key{App: app, User: user}}
	var value []byte
	var create, update int64
	if err := row.Scan(&b.Label, &value, &b.Description, &b.Limit, &b.ReadOnly, &b.Revision, &create, &update); err != nil {
		return nil, err
	}
	var err error
	if b.Value, err = k.OpenString(app, valueAt(b.Key), value); err != nil {
		return nil, err
	}
	b.CreateTime, b.UpdateTime = unixnano.Time(create), unixnano.Time(update)
	return b, nil
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Get implements blocks.Store.
func (s *Store) Get(ctx context.Context, k blocks.Key) (*blocks.Block, error) {
	return get(ctx, s.db.Keyring(), s.db.Read(), k)
}

func get(ctx context.Context, kr *seal.Keyring, q querier, k blocks.Key) (*blocks.Block, error) {
	row := q.QueryRowContext(ctx, `SELECT `+blockColumns+` FROM blocks WHERE app = ? AND user_id = ? AND label = ?`, k.App, k.User, k.Label)
	b, err := scanBlock(kr, row, k.App, k.User)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fault.NotFoundf("block %s not found", k.Name())
	}
	return b, err
}

// List implements blocks.Store.
func (s *Store) List(ctx context.Context, app, user, after string, limit int) ([]*blocks.Block, error) {
	rows, err := s.db.Read().QueryContext(ctx, `SELECT `+blockColumns+` FROM blocks WHERE app = ? AND user_id = ? AND label > ? ORDER BY label LIMIT ?`, app, user, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*blocks.Block
	for rows.Next() {
		b, err := scanBlock(s.db.Keyring(), rows, app, user)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// Write implements blocks.Store.
func (s *Store) Write(ctx context.Context, b *blocks.Block, rev *blocks.Revision, expected int64) error {
	kr := s.db.Keyring()
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		var at int64
		err := tx.QueryRowContext(ctx, `SELECT revision FROM blocks WHERE app = ? AND user_id = ? AND label = ?`, b.App, b.User, b.Label).Scan(&at)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if at != expected {
			return fault.New(fault.Aborted, "block %s changed meanwhile (revision %d, expected %d)", b.Name(), at, expected)
		}
		if at == 0 {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM blocks WHERE app = ? AND user_id = ?`, b.App, b.User).Scan(&n); err != nil {
				return err
			}
			if n >= blocks.MaxBlocks {
				return fault.New(fault.ResourceExhausted, "%s has %d blocks, the limit; delete one to create %q", b.Owner(), n, b.Label)
			}
		}
		value, err := kr.SealString(b.App, valueAt(b.Key), b.Value)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(`INSERT INTO blocks (app, user_id, label, value, description, lim, read_only, revision, create_ns, update_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (app, user_id, label) DO UPDATE SET value = excluded.value, description = excluded.description, lim = excluded.lim,
			read_only = excluded.read_only, revision = excluded.revision, update_ns = excluded.update_ns`,
			b.App, b.User, b.Label, value, b.Description, b.Limit, b.ReadOnly, b.Revision, unixnano.From(b.CreateTime), unixnano.From(b.UpdateTime)); err != nil {
			return err
		}
		if err := insertRevision(kr, tx, rev); err != nil {
			return err
		}
		_, err = tx.Exec(`DELETE FROM block_revisions WHERE app = ? AND user_id = ? AND label = ? AND number <= ?`, b.App, b.User, b.Label, rev.Number-blocks.MaxRevisions)
		return err
	})
}

// insertRevision stores a revision, its value sealed with kr.
func insertRevision(kr *seal.Keyring, tx *sql.Tx, r *blocks.Revision) error {
	value, err := kr.SealString(r.App, revisionAt(r.Key, r.Number), r.Value)
	if err != nil {
		return err
	}
	var sources string
	if len(r.Sources) > 0 {
		b, err := json.Marshal(r.Sources)
		if err != nil {
			return err
		}
		sources = string(b)
	}
	_, err = tx.Exec(`INSERT INTO block_revisions (app, user_id, label, number, action, value, description, lim, read_only, create_ns, sources) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (app, user_id, label, number) DO NOTHING`,
		r.App, r.User, r.Label, r.Number, r.Action.String(), value, r.Description, r.Limit, r.ReadOnly, unixnano.From(r.CreateTime), sources)
	return err
}

// Delete implements blocks.Store.
func (s *Store) Delete(ctx context.Context, k blocks.Key) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		res, err := tx.Exec(`DELETE FROM blocks WHERE app = ? AND user_id = ? AND label = ?`, k.App, k.User, k.Label)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, fault.NotFoundf("block %s not found", k.Name()))
		}
		_, err = tx.Exec(`DELETE FROM block_revisions WHERE app = ? AND user_id = ? AND label = ?`, k.App, k.User, k.Label)
		return err
	})
}

// ListRevisions implements blocks.Store.
func (s *Store) ListRevisions(ctx context.Context, k blocks.Key, before int64, limit int) ([]*blocks.Revision, error) {
	query := `SELECT number, action, value, description, lim, read_only, create_ns, sources FROM block_revisions WHERE app = ? AND user_id = ? AND label = ?`
	query, args := sqlitedb.BelowNumber(query, []any{k.App, k.User, k.Label}, before, limit)
	return sqlitedb.QueryAll(ctx, s.db.Read(), func(scan func(...any) error) (*blocks.Revision, error) {
		r := &blocks.Revision{Key: k}
		var action, sources string
		var value []byte
		var create int64
		err := scan(&r.Number, &action, &value, &r.Description, &r.Limit, &r.ReadOnly, &create, &sources)
		if err != nil {
			return nil, err
		}
		if sources != "" {
			if err := json.Unmarshal([]byte(sources), &r.Sources); err != nil {
				return nil, fmt.Errorf("decoding the sources of revision %d of block %s: %w", r.Number, k.Name(), err)
			}
		}
		if r.Value, err = s.db.Keyring().OpenString(k.App, revisionAt(k, r.Number), value); err != nil {
			return nil, err
		}
		if r.Action, err = blocks.ParseAction(action); err != nil {
			return nil, err
		}
		r.CreateTime = unixnano.Time(create)
		return r, nil
	}, query, args...)
}

// Apps implements blocks.Store.
func (s *Store) Apps(ctx context.Context, after string, limit int) ([]string, error) {
	return s.db.Apps(ctx, []string{"blocks"}, after, limit)
}

// Users implements blocks.Store.
func (s *Store) Users(ctx context.Context, app, after string, limit int) ([]string, error) {
	return s.db.Strings(ctx, `SELECT DISTINCT user_id FROM blocks WHERE app = ? AND user_id > ? ORDER BY user_id LIMIT ?`, app, after, limit)
}

// Import implements blocks.Store.
func (s *Store) Import(ctx context.Context, b *blocks.Block, revs []*blocks.Revision) (wrote bool, n int, err error) {
	kr := s.db.Keyring()
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		wrote, n = false, 0
		cur, err := get(ctx, kr, tx, b.Key)
		switch {
		case fault.Is(err, fault.NotFound):
			cur = nil
			var count int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM blocks WHERE app = ? AND user_id = ?`, b.App, b.User).Scan(&count); err != nil {
				return err
			}
			if count >= blocks.MaxBlocks {
				return fault.New(fault.ResourceExhausted, "%s has %d blocks in this store, the limit; the archive brings %q", b.Owner(), count, b.Label)
			}
		case err != nil:
			return err
		default:
			if err := blocks.CheckImport(cur, b); err != nil {
				return err
			}
		}
		for _, r := range revs {
			if r.Number <= b.Revision-blocks.MaxRevisions {
				continue
			}
			var one int
			err := tx.QueryRowContext(ctx, `SELECT 1 FROM block_revisions WHERE app = ? AND user_id = ? AND label = ? AND number = ?`, r.App, r.User, r.Label, r.Number).Scan(&one)
			if err == nil {
				continue
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			if err := insertRevision(kr, tx, r); err != nil {
				return err
			}
			n++
		}
		if cur != nil && cur.Revision == b.Revision {
			return nil
		}
		wrote = true
		value, err := kr.SealString(b.App, valueAt(b.Key), b.Value)
		if err != nil {
			return err
		}
		_, err = tx.Exec(`INSERT INTO blocks (app, user_id, label, value, description, lim, read_only, revision, create_ns, update_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (app, user_id, label) DO UPDATE SET value = excluded.value, description = excluded.description, lim = excluded.lim,
			read_only = excluded.read_only, revision = excluded.revision, update_ns = excluded.update_ns`,
			b.App, b.User, b.Label, value, b.Description, b.Limit, b.ReadOnly, b.Revision, unixnano.From(b.CreateTime), unixnano.From(b.UpdateTime))
		return err
	})
	return wrote, n, err
}

// DeleteUser implements blocks.Store.
func (s *Store) DeleteUser(ctx context.Context, app, user string) (int, error) {
	return s.db.DeleteUser(ctx, app, user, "blocks", "block_revisions")
}
