package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Backup writes a consistent copy of the database at src to the new file
// dst, while servers may be writing to src: the copy holds every commit
// made before it started (so every acknowledged write up to then) and
// nothing later. It is SQLite's VACUUM INTO, read in one transaction, so
// the copy is also compacted; dst is then synced to disk and checked
// (quick_check) before Backup returns. dst must not exist: it is created
// readable by its owner only (0600), as the database is. On failure no
// dst is left behind.
func Backup(ctx context.Context, src, dst string) (err error) {
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("the database to back up: %w", err)
	}
	// VACUUM INTO writes into an empty file as into a new one, keeping
	// its mode; a file it creates gets SQLite's 0644.
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, FileMode)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s already exists; back up to a new file", dst)
	} else if err != nil {
		return err
	}
	f.Close()
	defer func() {
		if err != nil {
			os.Remove(dst)
		}
	}()
	db, err := sql.Open("sqlite", fileURI(src)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "VACUUM INTO ?", dst); err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	if err := syncFile(dst); err != nil {
		return err
	}
	if err := syncFile(filepath.Dir(dst)); err != nil {
		return err
	}
	out, err := sql.Open("sqlite", fileURI(dst)+"?mode=ro")
	if err != nil {
		return err
	}
	defer out.Close()
	var check string
	if err := out.QueryRowContext(ctx, "PRAGMA quick_check").Scan(&check); err != nil {
		return fmt.Errorf("checking the copy: %w", err)
	}
	if check != "ok" {
		return fmt.Errorf("the copy failed its check: %s", check)
	}
	return nil
}

// syncFile flushes a file or directory to disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", path, err)
	}
	return nil
}
