package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/fault"
)

func openTest(t *testing.T) *DB {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "kioku.db"))
}

// openAt opens the database at path, closed when the test ends, with the
// tests' table t (k INTEGER PRIMARY KEY, v TEXT).
func openAt(t *testing.T, path string) *DB {
	t.Helper()
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Migrate("test", []string{"CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)"}); err != nil {
		t.Fatal(err)
	}
	return db
}

// mustExec runs one statement in a write, failing the test if it fails.
func mustExec(t *testing.T, db *DB, query string, args ...any) {
	t.Helper()
	if err := db.Write(context.Background(), func(tx *sql.Tx) error { _, err := tx.Exec(query, args...); return err }); err != nil {
		t.Fatal(err)
	}
}

// The durability promise rests on these settings: a commit returns only
// after the log is synced (synchronous=FULL in WAL mode), and checkpoints
// sync too. The crash test cannot see a missing fsync (a killed process's
// writes survive in the OS cache), so they are checked here.
func TestDurabilitySettings(t *testing.T) {
	db := openTest(t)
	for _, c := range []struct {
		name string
		pool *sql.DB
	}{{"write", db.write}, {"checkpoint", db.ckpt}} {
		var mode string
		var sync int
		if err := c.pool.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if err := c.pool.QueryRow("PRAGMA synchronous").Scan(&sync); err != nil {
			t.Fatal(err)
		}
		if mode != "wal" || sync != 2 {
			t.Errorf("%s connection: journal_mode=%s synchronous=%d, want wal and 2 (FULL)", c.name, mode, sync)
		}
	}
	if _, err := db.Read().Exec("INSERT INTO t (k, v) VALUES (1, 'x')"); err == nil {
		t.Error("the read pool accepted a write")
	}

	// The benchmark's unsynced file really skips the syncs.
	unsynced, err := OpenUnsynced(filepath.Join(t.TempDir(), "unsynced.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer unsynced.Close()
	var sync int
	if err := unsynced.write.QueryRow("PRAGMA synchronous").Scan(&sync); err != nil || sync != 0 {
		t.Errorf("OpenUnsynced: synchronous=%d (%v), want 0 (OFF)", sync, err)
	}
}

// Concurrent writes share commits; a write that fails or panics undoes only
// itself, and every other write of its batch lands.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()

	// Hold the first commit open until every other write has queued, so
	// that they all fall into one batch.
	const writers = 64
	release := make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- db.Write(ctx, func(tx *sql.Tx) error {
			<-release
			_, err := tx.Exec("INSERT INTO t (k, v) VALUES (0, 'first')")
			return err
		})
	}()
	waitFor(t, func() bool { db.mu.Lock(); defer db.mu.Unlock(); return db.leading })

	var (
		wg   sync.WaitGroup
		errs [writers]error
		mu   sync.Mutex
		txs  = map[int]*sql.Tx{} // the transaction of each write's last run
	)
	for i := 1; i < writers; i++ {
		wg.Go(func() {
			errs[i] = db.Write(ctx, func(tx *sql.Tx) error {
				mu.Lock()
				txs[i] = tx
				mu.Unlock()
				if _, err := tx.Exec("INSERT INTO t (k, v) VALUES (?, ?)", i, fmt.Sprint("v", i)); err != nil {
					return err
				}
				switch {
				case i%7 == 0:
					return fmt.Errorf("write %d refuses", i)
				case i%11 == 0:
					panic(fmt.Sprintf("write %d panics", i))
				}
				return nil
			})
		})
	}
	waitFor(t, func() bool { db.mu.Lock(); defer db.mu.Unlock(); return len(db.queue) == writers-1 })
	close(release)
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatalf("first write: %v", err)
	}

	distinct := map[*sql.Tx]bool{}
	for _, tx := range txs {
		distinct[tx] = true
	}
	if len(distinct) != 1 {
		t.Errorf("the %d queued writes ran in %d transactions, want one shared commit", writers-1, len(distinct))
	}
	for i := 1; i < writers; i++ {
		var v string
		err := db.Read().QueryRow("SELECT v FROM t WHERE k = ?", i).Scan(&v)
		switch {
		case i%7 == 0:
			if errs[i] == nil || !strings.Contains(errs[i].Error(), "refuses") {
				t.Errorf("write %d: error %v, want its own", i, errs[i])
			}
			if !errors.Is(err, sql.ErrNoRows) {
				t.Errorf("write %d failed but its row is there (%v)", i, err)
			}
		case i%11 == 0:
			if errs[i] == nil || !strings.Contains(errs[i].Error(), "panicked") {
				t.Errorf("write %d: error %v, want the panic as an error", i, errs[i])
			}
			if !errors.Is(err, sql.ErrNoRows) {
				t.Errorf("write %d panicked but its row is there (%v)", i, err)
			}
		default:
			if errs[i] != nil || err != nil || v != fmt.Sprint("v", i) {
				t.Errorf("write %d: error %v, row %q (%v); want it stored", i, errs[i], v, err)
			}
		}
	}
}

// Acknowledged writes are in the file when it is opened again, and a
// canceled write never runs.
func TestReopenAndCancel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kioku.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	steps := []string{"CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)"}
	if err := db.Migrate("test", steps); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := db.Write(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec("INSERT INTO t (k, v) VALUES (1, 'kept')")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	ran := false
	if err := db.Write(canceled, func(tx *sql.Tx) error { ran = true; return nil }); !errors.Is(err, context.Canceled) || ran {
		t.Errorf("canceled write: error %v, ran %v; want context.Canceled and not run", err, ran)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Write(ctx, func(tx *sql.Tx) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("write after Close: %v, want ErrClosed", err)
	}

	db, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate("test", steps); err != nil {
		t.Fatalf("migrating an up-to-date database again: %v", err)
	}
	var v string
	if err := db.Read().QueryRow("SELECT v FROM t WHERE k = 1").Scan(&v); err != nil || v != "kept" {
		t.Errorf("after reopening: %q, %v; want the acknowledged row", v, err)
	}
	if err := db.Migrate("test", nil); err == nil || !strings.Contains(err.Error(), "newer than this kioku") {
		t.Errorf("a database newer than the code: %v, want a refusal naming it", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
		time.Sleep(time.Millisecond)
	}
}

// Backup refuses a missing source or an existing destination and leaves
// nothing behind; a good copy reads back.
func TestBackup(t *testing.T) {
	src := filepath.Join(t.TempDir(), "kioku.db")
	mustExec(t, openAt(t, src), "INSERT INTO t (k, v) VALUES (7, 'seven')")
	dir := t.TempDir()
	if err := Backup(t.Context(), filepath.Join(dir, "missing.db"), filepath.Join(dir, "a.db")); err == nil {
		t.Error("backing up a missing file succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "a.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed backup left its destination behind (%v)", err)
	}

	dst := filepath.Join(dir, "copy.db")
	if err := Backup(t.Context(), src, dst); err != nil {
		t.Fatal(err)
	}
	if err := Backup(t.Context(), src, dst); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("backing up over an existing file: %v", err)
	}
	cp, err := Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	var v string
	if err := cp.Read().QueryRow("SELECT v FROM t WHERE k = 7").Scan(&v); err != nil || v != "seven" {
		t.Errorf("the copy: %q, %v; want the committed row", v, err)
	}
}

// A full disk (here the file's max_page_count) fails the writes that do not
// fit as ResourceExhausted, keeps what was committed, and the database
// takes writes again once there is room.
func TestDiskFull(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	var pages int
	if err := db.write.QueryRow("PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := db.write.Exec(fmt.Sprintf("PRAGMA max_page_count = %d", pages+8)); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 3000)
	var committed int
	var err error
	for i := range 100 {
		if err = db.Write(ctx, func(tx *sql.Tx) error {
			_, err := tx.Exec("INSERT INTO t (k, v) VALUES (?, ?)", i, big)
			return err
		}); err != nil {
			break
		}
		committed++
	}
	if !fault.Is(err, fault.ResourceExhausted) || !strings.Contains(err.Error(), "disk is full") {
		t.Fatalf("after %d rows: %v, want ResourceExhausted saying the disk is full", committed, err)
	}
	var n int
	if err := db.Read().QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil || n != committed || committed == 0 {
		t.Fatalf("%d rows stored (%v), want the %d committed", n, err, committed)
	}
	if _, err := db.write.Exec("PRAGMA max_page_count = 1073741823"); err != nil {
		t.Fatal(err)
	}
	if err := db.Write(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec("INSERT INTO t (k, v) VALUES (-1, ?)", big)
		return err
	}); err != nil {
		t.Fatalf("a write once there is room: %v", err)
	}
}

// A write that changes nothing (it only reads, or its statements match no
// row) is not committed: no sync, no count in Stats.
func TestWriteWithoutChangesIsNotCommitted(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	before := db.Stats()
	for range 3 {
		if err := db.Write(ctx, func(tx *sql.Tx) error {
			var n int
			if err := tx.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil {
				return err
			}
			_, err := tx.Exec("DELETE FROM t WHERE k = -1")
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if st := db.Stats(); st.Commits != before.Commits || st.Writes != before.Writes {
		t.Fatalf("writes that changed nothing: commits %d -> %d, writes %d -> %d", before.Commits, st.Commits, before.Writes, st.Writes)
	}
	if err := db.Write(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec("INSERT INTO t (k, v) VALUES (1, 'x')")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if st := db.Stats(); st.Commits != before.Commits+1 || st.Writes != before.Writes+1 {
		t.Fatalf("a write that inserts a row: commits %d -> %d", before.Commits, st.Commits)
	}
	var v string
	if err := db.Read().QueryRow("SELECT v FROM t WHERE k = 1").Scan(&v); err != nil || v != "x" {
		t.Fatalf("the row: %q, %v", v, err)
	}
}

// TestDeletedContentIsOverwritten: rows deleted or replaced leave nothing
// of their content in the file, whether their cell is freed on a page that
// stays or their page is emptied.
func TestDeletedContentIsOverwritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kioku.db")
	db := openAt(t, path)
	for i := range 200 { // many pages
		mustExec(t, db, `INSERT INTO t (k, v) VALUES (?, ?)`, i, fmt.Sprintf("row %d %s", i, strings.Repeat("KEPTKEPT", 20)))
	}
	mustExec(t, db, `INSERT INTO t (k, v) VALUES (1000, 'GONEGONE one')`)
	mustExec(t, db, `UPDATE t SET v = 'something else' WHERE k = 1000`)
	mustExec(t, db, `INSERT INTO t (k, v) VALUES (1001, 'GONEGONE two')`)
	mustExec(t, db, `DELETE FROM t WHERE k = 1001`)
	mustExec(t, db, `DELETE FROM t WHERE k < 150`) // empties pages
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "GONEGONE") || strings.Contains(string(b), "row 3 KEPT") {
		t.Fatal("deleted or replaced content is still in the file")
	}
	if !strings.Contains(string(b), "row 199 KEPT") {
		t.Fatal("the file does not hold the rows that stay either: the test looks in the wrong place")
	}
}
