// Package sqlite is the embedded memory files store: tables in kioku's
// SQLite file (see internal/sqlitedb), beside the sessions and the memory
// bank, migrated as their own component ("memoryfiles").
//
// Layout:
//
//	memory_file_usages     (app, user_id) → files, deleted, bytes, history, version:
//	                       the user's Usage, whose version orders the
//	                       user's writes (memoryfiles.Store.Write).
//	memory_files           (app, user_id, id) → path, path_sealed,
//	                       content, size, revision, create_ns, update_ns,
//	                       deleted; unique on (app, user_id, path) among
//	                       the files not deleted, indexed by (app, user_id,
//	                       path, id) for listings and by deletion time for
//	                       the deleted ones.
//	memory_file_revisions  (app, user_id, file_id, number) → action, path,
//	                       content, size, create_ns.
//
// A Write is one transaction of the shared write connection: it reads the
// user's usage version, refuses with Aborted when it moved on, and writes.
// Paths compare as SQLite's BINARY collation compares text, byte by byte,
// which for UTF-8 is the order of code points, as in Go and Firestore.
//
// In an encrypted database (sqlitedb's UseEncryption) the contents and
// paths of files and of revisions are sealed, bound to their rows
// (package seal), and memory_files.path holds a keyed hash of the path:
// seal.go says how, and how listings work then.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/seal"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/memoryfiles"
	"github.com/kioku-ai/kioku/resource"
)

// schema is the tables (v1).
const schema = `
CREATE TABLE memory_file_usages (
	app     TEXT    NOT NULL,
	user_id TEXT    NOT NULL,
	files   INTEGER NOT NULL,
	deleted INTEGER NOT NULL,
	bytes   INTEGER NOT NULL,
	version INTEGER NOT NULL,
	PRIMARY KEY (app, user_id)
) WITHOUT ROWID;
CREATE TABLE memory_files (
	app       TEXT    NOT NULL,
	user_id   TEXT    NOT NULL,
	id        TEXT    NOT NULL,
	path      TEXT    NOT NULL,
	content   TEXT    NOT NULL,
	size      INTEGER NOT NULL,
	revision  INTEGER NOT NULL,
	create_ns INTEGER NOT NULL,
	update_ns INTEGER NOT NULL,
	deleted   INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX memory_files_by_id ON memory_files (app, user_id, id);
CREATE UNIQUE INDEX memory_files_live ON memory_files (app, user_id, path) WHERE deleted = 0;
CREATE INDEX memory_files_by_path ON memory_files (app, user_id, path, id);
CREATE INDEX memory_files_deleted ON memory_files (app, user_id, update_ns, id) WHERE deleted = 1;
CREATE TABLE memory_file_revisions (
	app       TEXT    NOT NULL,
	user_id   TEXT    NOT NULL,
	file_id   TEXT    NOT NULL,
	number    INTEGER NOT NULL,
	action    TEXT    NOT NULL,
	path      TEXT    NOT NULL,
	content   TEXT    NOT NULL,
	size      INTEGER NOT NULL,
	create_ns INTEGER NOT NULL
);
CREATE UNIQUE INDEX memory_file_revisions_by_number ON memory_file_revisions (app, user_id, file_id, number);
`

// migrations are the schema's steps: the tables (v1); the files' sealed
// paths (v2); in an encrypted database, the paths stored in the clear
// before v2 sealed (v3, sealPaths); the usages' history bytes (v4),
// counted from what is stored (a revision's size is its content's for the
// actions that hold content).
func migrations(k *seal.Keyring) []sqlitedb.Step {
	return []sqlitedb.Step{
		{SQL: schema},
		{SQL: `ALTER TABLE memory_files ADD COLUMN path_sealed BLOB;`},
		{Func: sealPaths(k)},
		{SQL: `
ALTER TABLE memory_file_usages ADD COLUMN history INTEGER NOT NULL DEFAULT 0;
UPDATE memory_file_usages SET history =
	(SELECT COALESCE(SUM(r.size), 0) FROM memory_file_revisions r
		WHERE r.app = memory_file_usages.app AND r.user_id = memory_file_usages.user_id AND r.action IN ('CREATED', 'EDITED'))
	+ (SELECT COALESCE(SUM(f.size), 0) FROM memory_files f
		WHERE f.app = memory_file_usages.app AND f.user_id = memory_file_usages.user_id AND f.deleted = 1);
`},
	}
}

// Store is the SQLite memory files store.
type Store struct {
	db *sqlitedb.DB
}

var _ memoryfiles.Store = (*Store)(nil)

// New returns a Store on db, creating its tables if needed.
func New(db *sqlitedb.DB) (*Store, error) {
	if err := db.MigrateSteps("memoryfiles", migrations(db.Keyring())); err != nil {
		return nil, err
	}
	return &Store{db: db}, nil
}

// fileColumns are the columns scanFile reads, content last (left out of
// listings without content).
const fileColumns = `id, path, path_sealed, size, revision, create_ns, update_ns, deleted`

type scanner interface{ Scan(dest ...any) error }

// scanFile reads a row of fileColumns, and the content when withContent,
// opened with k.
func scanFile(k *seal.Keyring, row scanner, app, user string, withContent bool) (*memoryfiles.File, error) {
	f := &memoryfiles.File{App: app, User: user}
	var create, update int64
	var sealedPath, content []byte
	dest := []any{&f.ID, &f.Path, &sealedPath, &f.Size, &f.Revision, &create, &update, &f.Deleted}
	if withContent {
		dest = append(dest, &content)
	}
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	var err error
	if f.Path, err = openPath(k, app, user, f.ID, f.Path, sealedPath); err != nil {
		return nil, err
	}
	if withContent {
		if f.Content, err = k.OpenString(app, fileAt(app, user, f.ID), content); err != nil {
			return nil, err
		}
	}
	f.CreateTime, f.UpdateTime = unixnano.Time(create), unixnano.Time(update)
	return f, nil
}

// Usage implements memoryfiles.Store.
func (s *Store) Usage(ctx context.Context, app, user string) (memoryfiles.Usage, error) {
	return usage(ctx, s.db.Read(), app, user)
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func usage(ctx context.Context, q querier, app, user string) (memoryfiles.Usage, error) {
	var u memoryfiles.Usage
	err := q.QueryRowContext(ctx, `SELECT files, deleted, bytes, history, version FROM memory_file_usages WHERE app = ? AND user_id = ?`, app, user).
		Scan(&u.Files, &u.Deleted, &u.Bytes, &u.History, &u.Version)
	if errors.Is(err, sql.ErrNoRows) {
		err = nil
	}
	return u, err
}

// FindFile implements memoryfiles.Store.
func (s *Store) FindFile(ctx context.Context, app, user, path string) (*memoryfiles.File, error) {
	key, err := pathKey(s.db.Keyring(), app, user, path)
	if err != nil {
		return nil, err
	}
	row := s.db.Read().QueryRowContext(ctx, `SELECT `+fileColumns+`, content FROM memory_files WHERE app = ? AND user_id = ? AND path = ? AND deleted = 0`, app, user, key)
	f, err := scanFile(s.db.Keyring(), row, app, user, true)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fault.NotFoundf("no memory file at %s", path)
	}
	return f, err
}

// GetFile implements memoryfiles.Store.
func (s *Store) GetFile(ctx context.Context, app, user, id string) (*memoryfiles.File, error) {
	return getFile(ctx, s.db.Keyring(), s.db.Read(), app, user, id)
}

func getFile(ctx context.Context, k *seal.Keyring, q querier, app, user, id string) (*memoryfiles.File, error) {
	row := q.QueryRowContext(ctx, `SELECT `+fileColumns+`, content FROM memory_files WHERE app = ? AND user_id = ? AND id = ?`, app, user, id)
	f, err := scanFile(k, row, app, user, true)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fault.NotFoundf("memory file %s not found", id)
	}
	return f, err
}

// ListFiles implements memoryfiles.Store.
func (s *Store) ListFiles(ctx context.Context, q memoryfiles.ListQuery) ([]*memoryfiles.File, error) {
	if s.db.Keyring() != nil {
		return s.listSealed(ctx, q)
	}
	var sb strings.Builder
	sb.WriteString(`SELECT ` + fileColumns)
	if q.Content {
		sb.WriteString(`, content`)
	}
	// The file at Dir, or those below it: paths from Dir+"/" up to
	// Dir+"0", the character after '/'.
	sb.WriteString(` FROM memory_files WHERE app = ? AND user_id = ? AND (path = ? OR path > ? AND path < ?)`)
	args := []any{q.App, q.User, q.Dir, q.Dir + "/", q.Dir + "0"}
	if !q.ShowDeleted {
		sb.WriteString(` AND deleted = 0`)
	}
	if q.AfterPath != "" {
		sb.WriteString(` AND (path > ? OR path = ? AND id > ?)`)
		args = append(args, q.AfterPath, q.AfterPath, q.AfterID)
	}
	sb.WriteString(` ORDER BY path, id LIMIT ?`)
	args = append(args, q.Limit)
	return scanFiles(ctx, s.db.Keyring(), s.db.Read(), q.App, q.User, q.Content, sb.String(), args...)
}

// OldestDeleted implements memoryfiles.Store.
func (s *Store) OldestDeleted(ctx context.Context, app, user string, limit int) ([]*memoryfiles.File, error) {
	return scanFiles(ctx, s.db.Keyring(), s.db.Read(), app, user, false, `SELECT `+fileColumns+` FROM memory_files WHERE app = ? AND user_id = ? AND deleted = 1 ORDER BY update_ns, id LIMIT ?`, app, user, limit)
}

type rowsQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// scanFiles runs a query of files on q, opening them with k.
func scanFiles(ctx context.Context, k *seal.Keyring, q rowsQuerier, app, user string, withContent bool, query string, args ...any) ([]*memoryfiles.File, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*memoryfiles.File
	for rows.Next() {
		f, err := scanFile(k, rows, app, user, withContent)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// ListRevisions implements memoryfiles.Store.
func (s *Store) ListRevisions(ctx context.Context, app, user, id string, before int64, limit int) ([]*memoryfiles.Revision, error) {
	query := `SELECT number, action, path, content, size, create_ns FROM memory_file_revisions WHERE app = ? AND user_id = ? AND file_id = ?`
	query, args := sqlitedb.BelowNumber(query, []any{app, user, id}, before, limit)
	return sqlitedb.QueryAll(ctx, s.db.Read(), func(scan func(...any) error) (*memoryfiles.Revision, error) {
		r := &memoryfiles.Revision{App: app, User: user, FileID: id}
		var action string
		var create int64
		var path, content []byte
		err := scan(&r.Number, &action, &path, &content, &r.Size, &create)
		if err != nil {
			return nil, err
		}
		if r.Path, err = s.db.Keyring().OpenString(app, revisionPathAt(app, user, id, r.Number), path); err != nil {
			return nil, err
		}
		if r.Content, err = s.db.Keyring().OpenString(app, fileRevisionAt(app, user, id, r.Number), content); err != nil {
			return nil, err
		}
		if r.Action, err = memoryfiles.ParseAction(action); err != nil {
			return nil, err
		}
		r.CreateTime = unixnano.Time(create)
		return r, nil
	}, query, args...)
}

// Write implements memoryfiles.Store.
func (s *Store) Write(ctx context.Context, w *memoryfiles.Write) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		cur, err := usage(ctx, tx, w.App, w.User)
		if err != nil {
			return err
		}
		if cur.Version != w.Version {
			return fault.New(fault.Aborted, "the memory files of user %s of app %s changed meanwhile (version %d, expected %d)", w.User, w.App, cur.Version, w.Version)
		}
		if err := putUsage(tx, w.App, w.User, w.Usage, w.Version+1); err != nil {
			return err
		}
		for _, c := range w.Files {
			if err := putFile(s.db.Keyring(), tx, c); err != nil {
				return err
			}
		}
		for _, r := range w.Revisions {
			if _, err := insertRevision(s.db.Keyring(), tx, r); err != nil {
				return err
			}
			if old := r.Number - memoryfiles.MaxRevisions; old > 0 {
				if _, err := tx.Exec(`DELETE FROM memory_file_revisions WHERE app = ? AND user_id = ? AND file_id = ? AND number = ?`, r.App, r.User, r.FileID, old); err != nil {
					return err
				}
			}
		}
		for _, r := range w.Drop {
			if _, err := tx.Exec(`DELETE FROM memory_file_revisions WHERE app = ? AND user_id = ? AND file_id = ? AND number = ?`, r.App, r.User, r.FileID, r.Number); err != nil {
				return err
			}
		}
		for _, f := range w.Purge {
			if err := purge(tx, f.App, f.User, f.ID); err != nil {
				return err
			}
		}
		return nil
	})
}

func putUsage(tx *sql.Tx, app, user string, u memoryfiles.Usage, version int64) error {
	_, err := tx.Exec(`INSERT INTO memory_file_usages (app, user_id, files, deleted, bytes, history, version) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (app, user_id) DO UPDATE SET files = excluded.files, deleted = excluded.deleted, bytes = excluded.bytes,
		history = excluded.history, version = excluded.version`,
		app, user, u.Files, u.Deleted, u.Bytes, u.History, version)
	return err
}

// putFile writes a file: all of it (its content and path sealed with k),
// or only what changes without its content.
func putFile(k *seal.Keyring, tx *sql.Tx, c memoryfiles.FileChange) error {
	f := c.File
	key, sealedPath, err := storedPath(k, f)
	if err != nil {
		return err
	}
	if !c.Content {
		res, err := tx.Exec(`UPDATE memory_files SET path = ?, path_sealed = ?, size = ?, revision = ?, update_ns = ?, deleted = ? WHERE app = ? AND user_id = ? AND id = ?`,
			key, sealedPath, f.Size, f.Revision, unixnano.From(f.UpdateTime), f.Deleted, f.App, f.User, f.ID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return errors.Join(err, fmt.Errorf("memory file %s: no such file to update", f.Name()))
		}
		return nil
	}
	content, err := sealText(k, f.App, fileAt(f.App, f.User, f.ID), f.Content)
	if err != nil {
		return err
	}
	_, err = tx.Exec(`INSERT INTO memory_files (app, user_id, id, path, path_sealed, content, size, revision, create_ns, update_ns, deleted) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (app, user_id, id) DO UPDATE SET path = excluded.path, path_sealed = excluded.path_sealed, content = excluded.content, size = excluded.size,
		revision = excluded.revision, create_ns = excluded.create_ns, update_ns = excluded.update_ns, deleted = excluded.deleted`,
		f.App, f.User, f.ID, key, sealedPath, content, f.Size, f.Revision, unixnano.From(f.CreateTime), unixnano.From(f.UpdateTime), f.Deleted)
	return err
}

// insertRevision stores a revision, its path and content sealed with k;
// one already stored is left as it is. It reports whether it wrote it.
func insertRevision(k *seal.Keyring, tx *sql.Tx, r *memoryfiles.Revision) (bool, error) {
	path, err := sealText(k, r.App, revisionPathAt(r.App, r.User, r.FileID, r.Number), r.Path)
	if err != nil {
		return false, err
	}
	content, err := sealText(k, r.App, fileRevisionAt(r.App, r.User, r.FileID, r.Number), r.Content)
	if err != nil {
		return false, err
	}
	res, err := tx.Exec(`INSERT INTO memory_file_revisions (app, user_id, file_id, number, action, path, content, size, create_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (app, user_id, file_id, number) DO NOTHING`,
		r.App, r.User, r.FileID, r.Number, r.Action.String(), path, content, r.Size, unixnano.From(r.CreateTime))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// purge removes a file with its revisions.
func purge(tx *sql.Tx, app, user, id string) error {
	if _, err := tx.Exec(`DELETE FROM memory_files WHERE app = ? AND user_id = ? AND id = ?`, app, user, id); err != nil {
		return err
	}
	_, err := tx.Exec(`DELETE FROM memory_file_revisions WHERE app = ? AND user_id = ? AND file_id = ?`, app, user, id)
	return err
}

// Apps implements memoryfiles.Store.
func (s *Store) Apps(ctx context.Context, after string, limit int) ([]string, error) {
	return s.db.Apps(ctx, []string{"memory_file_usages"}, after, limit)
}

// Users implements memoryfiles.Store.
func (s *Store) Users(ctx context.Context, app, after string, limit int) ([]string, error) {
	return s.db.Strings(ctx, `SELECT user_id FROM memory_file_usages WHERE app = ? AND user_id > ? ORDER BY user_id LIMIT ?`, app, after, limit)
}

// ImportFile implements memoryfiles.Store.
func (s *Store) ImportFile(ctx context.Context, f *memoryfiles.File, revs []*memoryfiles.Revision) (wrote bool, n int, err error) {
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		wrote, n = false, 0
		u, err := usage(ctx, tx, f.App, f.User)
		if err != nil {
			return err
		}
		cur, err := getFile(ctx, s.db.Keyring(), tx, f.App, f.User, f.ID)
		switch {
		case fault.Is(err, fault.NotFound):
			cur = nil
		case err != nil:
			return err
		case !cur.CreateTime.Equal(f.CreateTime):
			return fault.New(fault.AlreadyExists, "another memory file %s (created %v) is in this store", f.Name(), cur.CreateTime)
		case cur.Revision > f.Revision:
			return fault.New(fault.FailedPrecondition, "memory file %s moved on in this store (revision %d) past the archive's (revision %d)", f.Name(), cur.Revision, f.Revision)
		}
		if !f.Deleted {
			key, err := pathKey(s.db.Keyring(), f.App, f.User, f.Path)
			if err != nil {
				return err
			}
			var other string
			err = tx.QueryRow(`SELECT id FROM memory_files WHERE app = ? AND user_id = ? AND path = ? AND deleted = 0 AND id != ?`, f.App, f.User, key, f.ID).Scan(&other)
			if err == nil {
				return fault.New(fault.AlreadyExists, "memory file %s is at %s in this store; the archive has %s there", resource.MemoryFileName(f.App, f.User, other), f.Path, f.Name())
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		var fresh []*memoryfiles.Revision // the revisions written
		for _, r := range revs {
			if r.Number <= f.Revision-memoryfiles.MaxRevisions {
				continue
			}
			ok, err := insertRevision(s.db.Keyring(), tx, r)
			if err != nil {
				return err
			}
			if ok {
				fresh = append(fresh, r)
			}
		}
		n = len(fresh)
		u = memoryfiles.Account(u, nil, nil, fresh)
		if cur == nil || cur.Revision < f.Revision {
			u = memoryfiles.Account(u, cur, f, nil)
			if err := putFile(s.db.Keyring(), tx, memoryfiles.FileChange{File: f, Content: true}); err != nil {
				return err
			}
			wrote = true
		}
		if !wrote && n == 0 {
			return nil
		}
		return putUsage(tx, f.App, f.User, u, u.Version+1)
	})
	return wrote, n, err
}

// DeleteUser implements memoryfiles.Store.
func (s *Store) DeleteUser(ctx context.Context, app, user string) (int, error) {
	return s.db.DeleteUser(ctx, app, user, "memory_files", "memory_file_revisions", "memory_file_usages")
}
