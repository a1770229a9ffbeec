package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"slices"
	"strconv"

	"github.com/kioku-ai/kioku/internal/seal"
	"github.com/kioku-ai/kioku/memoryfiles"
)

// Encryption at rest. In an encrypted database (sqlitedb's UseEncryption)
// the store seals, each bound to its row (package seal):
//
//	memory_files.content            (app, user, file)
//	memory_files.path_sealed        (app, user, file): the file's path
//	memory_file_revisions.content   (app, user, file, number)
//	memory_file_revisions.path      (app, user, file, number)
//
// and memory_files.path holds the keyed hash of the path
// (seal.Keyring.Hash, bound to the app and the user) in place of the
// path, so that finding a file by its path and the uniqueness of the
// paths of the files not deleted stay in SQL. The model chooses paths,
// so they may hold personal data as contents do. Hashes do not keep the
// order of paths that listings range over: in an encrypted database
// ListFiles reads all the user's files without their contents (at most
// MaxFiles, with MaxDeletedFiles deleted ones), opens their paths and
// selects and orders them in memory (listSealed). Without encryption
// path_sealed is NULL and path the path. Sizes stay as they are.

// The places of the sealed columns.
func fileAt(app, user, id string) seal.Where {
	return seal.At("memory_files.content", app, user, id)
}

func filePathAt(app, user, id string) seal.Where {
	return seal.At("memory_files.path_sealed", app, user, id)
}

func fileRevisionAt(app, user, id string, number int64) seal.Where {
	return seal.At("memory_file_revisions.content", app, user, id, strconv.FormatInt(number, 10))
}

func revisionPathAt(app, user, id string, number int64) seal.Where {
	return seal.At("memory_file_revisions.path", app, user, id, strconv.FormatInt(number, 10))
}

// pathKey returns what memory_files.path holds for a path of a user: its
// keyed hash in an encrypted database, else the path.
func pathKey(k *seal.Keyring, app, user, path string) (string, error) {
	return k.Hash(app, seal.At("memory_files.path", app, user), path)
}

// storedPath returns the values of memory_files.path and path_sealed for
// a file: the path's key, and the path sealed in an encrypted database
// (else nil, stored as NULL).
func storedPath(k *seal.Keyring, f *memoryfiles.File) (key string, sealed []byte, err error) {
	if key, err = pathKey(k, f.App, f.User, f.Path); err != nil || k == nil {
		return key, nil, err
	}
	sealed, err = k.SealString(f.App, filePathAt(f.App, f.User, f.ID), f.Path)
	return key, sealed, err
}

// openPath returns a file's path from its stored columns: path_sealed
// opened in an encrypted database (where it must be sealed), else path.
func openPath(k *seal.Keyring, app, user, id, path string, sealed []byte) (string, error) {
	if k == nil && sealed == nil {
		return path, nil
	}
	return k.OpenString(app, filePathAt(app, user, id), sealed)
}

// sealText returns the value to store for a content or a revision's path:
// sealed bytes in an encrypted database, else the text (stored as TEXT,
// as before encryption).
func sealText(k *seal.Keyring, app string, at seal.Where, text string) (any, error) {
	if k == nil {
		return text, nil
	}
	return k.SealString(app, at, text)
}

// listSealed is ListFiles in an encrypted database: in one read
// transaction, every file of the user (not deleted, unless q.ShowDeleted)
// without content, their paths opened, those at or below q.Dir after the
// cursor kept in (path, id) order up to q.Limit, then their contents with
// q.Content.
func (s *Store) listSealed(ctx context.Context, q memoryfiles.ListQuery) ([]*memoryfiles.File, error) {
	tx, err := s.db.Read().BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	query := `SELECT ` + fileColumns + ` FROM memory_files WHERE app = ? AND user_id = ?`
	if !q.ShowDeleted {
		query += ` AND deleted = 0`
	}
	all, err := scanFiles(ctx, s.db.Keyring(), tx, q.App, q.User, false, query, q.App, q.User)
	if err != nil {
		return nil, err
	}
	out := slices.DeleteFunc(all, func(f *memoryfiles.File) bool {
		below := f.Path == q.Dir || f.Path > q.Dir+"/" && f.Path < q.Dir+"0"
		after := q.AfterPath == "" || f.Path > q.AfterPath || f.Path == q.AfterPath && f.ID > q.AfterID
		return !below || !after
	})
	slices.SortFunc(out, func(a, b *memoryfiles.File) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.ID, b.ID))
	})
	out = out[:min(len(out), q.Limit)]
	if !q.Content {
		return out, nil
	}
	for _, f := range out {
		var content []byte
		if err := tx.QueryRowContext(ctx, `SELECT content FROM memory_files WHERE app = ? AND user_id = ? AND id = ?`, q.App, q.User, f.ID).Scan(&content); err != nil {
			return nil, err
		}
		if f.Content, err = s.db.Keyring().OpenString(q.App, fileAt(q.App, q.User, f.ID), content); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sealPaths returns the schema step that seals the paths an encrypted
// database stored in the clear before it (v3): each file's path moves,
// sealed, to path_sealed and its key to path, and each revision's path
// is sealed in place. Without encryption it changes nothing. It goes
// through the rows in batches of rowids, so that its memory stays small
// whatever the database holds.
func sealPaths(k *seal.Keyring) func(tx *sql.Tx) error {
	return func(tx *sql.Tx) error {
		if k == nil {
			return nil
		}
		err := eachPathRow(tx, `SELECT rowid, app, user_id, id, 0, path FROM memory_files WHERE rowid > ? AND path_sealed IS NULL ORDER BY rowid LIMIT ?`, func(r pathRow) error {
			key, sealed, err := storedPath(k, &memoryfiles.File{App: r.app, User: r.user, ID: r.id, Path: string(r.path)})
			if err != nil {
				return err
			}
			_, err = tx.Exec(`UPDATE memory_files SET path = ?, path_sealed = ? WHERE rowid = ?`, key, sealed, r.rowid)
			return err
		})
		if err != nil {
			return err
		}
		return eachPathRow(tx, `SELECT rowid, app, user_id, file_id, number, path FROM memory_file_revisions WHERE rowid > ? ORDER BY rowid LIMIT ?`, func(r pathRow) error {
			if seal.IsSealed(r.path) {
				return nil
			}
			sealed, err := k.Seal(r.app, revisionPathAt(r.app, r.user, r.id, r.number), r.path)
			if err != nil {
				return err
			}
			_, err = tx.Exec(`UPDATE memory_file_revisions SET path = ? WHERE rowid = ?`, sealed, r.rowid)
			return err
		})
	}
}

// pathRow is a row of a file or a revision whose path sealPaths seals.
type pathRow struct {
	rowid         int64
	app, user, id string
	number        int64
	path          []byte
}

// sealBatch is how many rows sealPaths reads at a time.
const sealBatch = 500

// eachPathRow calls fn on each row of query (rowid, app, user, file id,
// revision number and path, after a rowid, up to a limit), reading them
// sealBatch at a time.
func eachPathRow(tx *sql.Tx, query string, fn func(pathRow) error) error {
	for after := int64(0); ; {
		rows, err := tx.Query(query, after, sealBatch)
		if err != nil {
			return err
		}
		var batch []pathRow
		for rows.Next() {
			var r pathRow
			if err := rows.Scan(&r.rowid, &r.app, &r.user, &r.id, &r.number, &r.path); err != nil {
				rows.Close()
				return err
			}
			batch = append(batch, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(batch) == 0 {
			return err
		}
		for _, r := range batch {
			if err := fn(r); err != nil {
				return err
			}
		}
		after = batch[len(batch)-1].rowid
	}
}
