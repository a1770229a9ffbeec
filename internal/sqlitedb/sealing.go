package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kioku-ai/kioku/internal/seal"
)

// Encryption at rest (package seal). An encrypted database holds, beside
// the stores' tables:
//
//	seal_master (one row) → the id of the master key and a key check
//	            value (seal.NewCheck) that only that key opens.
//	seal_keys   app → the app's data key, wrapped, and the id of the
//	            master key that wrapped it.
//
// The stores seal values with the database's Keyring (nil when it is not
// encrypted). A data key made for a new app is written by the commit
// hook in the first transaction after it was made, so it is durable no
// later than the first value it sealed.
var sealSchema = []string{`
CREATE TABLE seal_master (
	id        INTEGER PRIMARY KEY CHECK (id = 1),
	master_id TEXT NOT NULL,
	check_value BLOB NOT NULL
);
CREATE TABLE seal_keys (
	app       TEXT NOT NULL PRIMARY KEY,
	master_id TEXT NOT NULL,
	wrapped   BLOB NOT NULL
) WITHOUT ROWID;
`}

// Keyring returns the keyring values are sealed with, nil when the
// database is not encrypted.
func (db *DB) Keyring() *seal.Keyring { return db.keyring }

// ErrWrongKey is the error of a master key that is not the database's.
var ErrWrongKey = errors.New("it is not the key this database was encrypted with")

// UseEncryption checks that the database's encryption matches w and,
// with w, makes values sealed from now on. Without w (nil), an encrypted
// database is refused. With w, a database encrypted under another master
// key is refused (ErrWrongKey), and so is one holding unencrypted data
// (it is never encrypted in place: export it and import it into a new
// one); a new or empty database becomes encrypted under w. It must be
// called before the stores are opened on db.
func (db *DB) UseEncryption(ctx context.Context, w seal.KeyWrapper) error {
	if err := db.Migrate("seal", sealSchema); err != nil {
		return err
	}
	var masterID string
	var check []byte
	err := db.read.QueryRowContext(ctx, `SELECT master_id, check_value FROM seal_master WHERE id = 1`).Scan(&masterID, &check)
	encrypted := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	switch {
	case w == nil && encrypted:
		return fmt.Errorf("%s is encrypted (master key %s): serve it with --encryption-key-file, the key it was written with", db.path, masterID)
	case w == nil:
		return nil
	case encrypted:
		if !seal.VerifyCheck(ctx, w, check) {
			return fmt.Errorf("%w (%s was encrypted with master key %s, this key is %s)", ErrWrongKey, db.path, masterID, w.ID())
		}
	default:
		if table, err := db.someData(ctx); err != nil {
			return err
		} else if table != "" {
			return fmt.Errorf("%s holds unencrypted data (table %s) and is never encrypted in place: kioku export it, then kioku import the archive into a new data directory served with the key", db.path, table)
		}
		if check, err = seal.NewCheck(ctx, w); err != nil {
			return err
		}
		err := db.Write(ctx, func(tx *sql.Tx) error {
			_, err := tx.Exec(`INSERT INTO seal_master (id, master_id, check_value) VALUES (1, ?, ?)`, w.ID(), check)
			return err
		})
		if err != nil {
			return err
		}
	}
	db.keyring = seal.NewKeyring(w, keyStore{db})
	return nil
}

// someData returns the name of a table holding rows of the stores ("" when
// none does): the tables of schema versions, of the search index's
// bookkeeping and of encryption hold rows in an empty database.
func (db *DB) someData(ctx context.Context) (string, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY name`)
	if err != nil {
		return "", err
	}
	var names, virtual []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return "", err
		}
		names = append(names, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", err
	}
	vrows, err := db.read.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'`)
	if err != nil {
		return "", err
	}
	for vrows.Next() {
		var n string
		if err := vrows.Scan(&n); err != nil {
			vrows.Close()
			return "", err
		}
		virtual = append(virtual, n+"_")
	}
	vrows.Close()
	for _, n := range names {
		switch n {
		case "schema_versions", "search_version", "seal_master", "seal_keys":
			continue
		}
		if slices.ContainsFunc(virtual, func(v string) bool { return strings.HasPrefix(n, v) }) {
			continue // a virtual table's shadow table
		}
		var one int
		err := db.read.QueryRowContext(ctx, `SELECT 1 FROM "`+strings.ReplaceAll(n, `"`, `""`)+`" LIMIT 1`).Scan(&one)
		if err == nil {
			return n, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return "", err
		}
	}
	return "", nil
}

// keyStore reads wrapped data keys for a Keyring.
type keyStore struct{ db *DB }

// LoadKey implements seal.KeyStore.
func (s keyStore) LoadKey(ctx context.Context, app string) (seal.WrappedKey, bool, error) {
	wk := seal.WrappedKey{App: app}
	err := s.db.read.QueryRowContext(ctx, `SELECT master_id, wrapped FROM seal_keys WHERE app = ?`, app).Scan(&wk.WrapperID, &wk.Wrapped)
	if errors.Is(err, sql.ErrNoRows) {
		return wk, false, nil
	}
	return wk, err == nil, err
}

// storeKeys writes the keyring's new data keys in the transaction about
// to commit; it returns them, to be marked stored once it has.
func (db *DB) storeKeys(tx *sql.Tx) ([]seal.WrappedKey, error) {
	pending := db.keyring.Pending()
	if len(pending) == 0 {
		return nil, nil
	}
	var masterID string
	if err := tx.QueryRow(`SELECT master_id FROM seal_master WHERE id = 1`).Scan(&masterID); err != nil {
		return nil, fmt.Errorf("sqlitedb: reading the master key's id: %w", err)
	}
	if masterID != db.keyring.Wrapper().ID() {
		var err error
		if pending, err = db.keyring.Follow(masterID); err != nil {
			return nil, err
		}
	}
	for _, wk := range pending {
		if _, err := tx.Exec(`INSERT INTO seal_keys (app, master_id, wrapped) VALUES (?, ?, ?) ON CONFLICT (app) DO NOTHING`, wk.App, wk.WrapperID, wk.Wrapped); err != nil {
			return nil, fmt.Errorf("sqlitedb: storing the data key of app %s: %w", wk.App, err)
		}
	}
	return pending, nil
}

// RotateKey re-wraps every data key of the database from master key from
// to master key to, and makes to the key its check value verifies, in one
// transaction; it returns how many data keys it re-wrapped. It may run
// while a server uses the database: the server keeps its unwrapped data
// keys, and reads the new key from its key file when it next needs to
// wrap or unwrap one (seal.Reloader). Running it again after it succeeded
// changes nothing.
func RotateKey(ctx context.Context, db *DB, from, to seal.KeyWrapper) (int, error) {
	if err := db.Migrate("seal", sealSchema); err != nil {
		return 0, err
	}
	n := 0
	err := db.Write(ctx, func(tx *sql.Tx) error {
		n = 0
		var check []byte
		err := tx.QueryRow(`SELECT check_value FROM seal_master WHERE id = 1`).Scan(&check)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%s is not encrypted: there is no key to rotate", db.path)
		}
		if err != nil {
			return err
		}
		if !seal.VerifyCheck(ctx, from, check) && !seal.VerifyCheck(ctx, to, check) {
			return fmt.Errorf("the current key: %w", ErrWrongKey)
		}
		rows, err := tx.Query(`SELECT app, master_id, wrapped FROM seal_keys`)
		if err != nil {
			return err
		}
		var keys []seal.WrappedKey
		for rows.Next() {
			var wk seal.WrappedKey
			if err := rows.Scan(&wk.App, &wk.WrapperID, &wk.Wrapped); err != nil {
				rows.Close()
				return err
			}
			keys = append(keys, wk)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, wk := range keys {
			nk, err := seal.Rewrap(ctx, wk, from, to)
			if err != nil {
				return err
			}
			if nk.WrapperID == wk.WrapperID {
				continue
			}
			if _, err := tx.Exec(`UPDATE seal_keys SET master_id = ?, wrapped = ? WHERE app = ?`, nk.WrapperID, nk.Wrapped, nk.App); err != nil {
				return err
			}
			n++
		}
		newCheck, err := seal.NewCheck(ctx, to)
		if err != nil {
			return err
		}
		_, err = tx.Exec(`UPDATE seal_master SET master_id = ?, check_value = ? WHERE id = 1`, to.ID(), newCheck)
		return err
	})
	return n, err
}

// VerifyKey checks, reading the database file at path only, that it is
// encrypted under master key w (kioku backup checks its copy with it).
func VerifyKey(ctx context.Context, path string, w seal.KeyWrapper) error {
	db, err := sql.Open("sqlite", fileURI(path)+"?mode=ro")
	if err != nil {
		return err
	}
	defer db.Close()
	var masterID string
	var check []byte
	err = db.QueryRowContext(ctx, `SELECT master_id, check_value FROM seal_master WHERE id = 1`).Scan(&masterID, &check)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) || strings.Contains(err.Error(), "no such table") {
			return fmt.Errorf("%s is not encrypted", path)
		}
		return err
	}
	if !seal.VerifyCheck(ctx, w, check) {
		return fmt.Errorf("%w (%s was encrypted with master key %s, this key is %s)", ErrWrongKey, path, masterID, w.ID())
	}
	return nil
}
