package sqlitedb

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestFilesOwnerOnly is issue 36's finding 9: under the common umask
// (022, which leaves SQLite's files 0644, readable by every user of the
// machine), the database, its log and shared memory, and a backup are
// created 0600; a database file that exists keeps its mode.
func TestFilesOwnerOnly(t *testing.T) {
	defer syscall.Umask(syscall.Umask(0o022))
	dir := t.TempDir()
	path := filepath.Join(dir, "kioku.db")
	db := openAt(t, path)
	mustExec(t, db, "INSERT INTO t (k, v) VALUES (1, 'one')")
	backup := filepath.Join(t.TempDir(), "copy.db")
	if err := Backup(t.Context(), path, backup); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm", backup} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != FileMode {
			t.Errorf("%s has mode %v, want %v", filepath.Base(p), got, os.FileMode(FileMode))
		}
	}

	// An operator's mode stays.
	db.Close()
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o640 {
		t.Errorf("reopened, the database file has mode %v, want its own 0640", got)
	}
}
