// Package sqlitedb is the embedded database under kioku's sqlite backends:
// one SQLite file (modernc.org/sqlite, pure Go) in WAL mode with
// synchronous=FULL, a pool of read connections, and one write connection on
// which concurrent writes are grouped into shared commits.
//
// Every write is a function run inside a transaction. Writes queue; the
// first writer to find no commit in progress becomes the leader: it takes
// every queued write, runs them one after another in one transaction (see
// commit for how one failing write is kept from undoing the others), commits
// once, and wakes their callers. Writes that arrive meanwhile queue for the
// next leader, chosen among them when the commit ends. With no contention a
// write runs in its caller's goroutine with no hand-off at all; under load,
// one commit, and so one fsync of the log, serves everything that arrived
// while the previous one was being made durable. Write returns only after
// its commit is on disk, so an acknowledged write survives a crash.
//
// Deleted content does not stay in the file: the write connection runs
// with secure_delete on, so the cells and pages a write frees are
// overwritten with zeros (in the log, then in the file at the next
// checkpoint). Erasing a user relies on it (sessions.Service.DeleteUser,
// memorybank.Service.EraseUser); the cost is the writing of zeros into
// pages that a deletion empties. (An FTS5 index keeps the terms of deleted
// rows in its own pages until it merges them.)
//
// The database file is created readable and writable by its owner only
// (FileMode, 0600); SQLite gives its log and shared memory files (-wal,
// -shm) the mode of the database file. A file that exists keeps its mode.
//
// Checkpoints (copying the log into the database file) run in the
// background on their own connection, so commits do not stop for them.
// Backup copies a database consistently while it is being written.
package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kioku-ai/kioku/internal/seal"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// MaxBatch bounds how many writes share one commit.
const MaxBatch = 256

// FileMode is the mode of the database files kioku creates (the database,
// its log and shared memory, backups): its owner's only, whatever the
// umask; SQLite's own default is 0644.
const FileMode = 0o600

// DB is an open kioku database file.
type DB struct {
	path  string
	read  *sql.DB
	write *sql.DB // one connection
	ckpt  *sql.DB // one connection, for background checkpoints

	mu      sync.Mutex
	queue   []*writeReq
	leading bool // a leader is committing
	closed  bool
	idle    *sync.Cond // signalled when leading turns false

	dirty    atomic.Int64 // commits since the last checkpoint
	stats    struct{ commits, writes, commitNanos atomic.Uint64 }
	quit     chan struct{}
	ckptDone chan struct{}

	savepoint, release, rollbackTo, changes *sql.Stmt

	keyring *seal.Keyring // nil unless encrypted (sealing.go)
}

type writeReq struct {
	ctx context.Context
	fn  func(*sql.Tx) error
	err error
	// wake is sent to once: finished true when the write is done (err set),
	// false when its goroutine must lead the next commit.
	wake     chan struct{}
	finished bool
	batch    int // writes in the transaction that ran it
}

// Open opens (creating if needed) the database at path, whose directory must
// exist and be writable.
func Open(path string) (*DB, error) { return open(path, "FULL") }

// OpenUnsynced opens the database like Open, but its commits are not synced
// to disk (synchronous=OFF): a crash of the machine can lose acknowledged
// writes, and a crash of the process too. It exists only so that `kioku
// bench sessions` can measure what durability costs; kioku never serves
// from such a database.
func OpenUnsynced(path string) (*DB, error) { return open(path, "OFF") }

// open opens the database with the given synchronous setting of its write
// and checkpoint connections.
func open(path, synchronous string) (*DB, error) {
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("data directory %s is not a directory", dir)
	}
	if err := create(path); err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	base := fileURI(path)
	common := "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(OFF)&_pragma=temp_store(MEMORY)"
	db := &DB{path: path, quit: make(chan struct{}), ckptDone: make(chan struct{})}
	db.idle = sync.NewCond(&db.mu)
	fail := func(err error) (*DB, error) {
		for _, c := range []*sql.DB{db.read, db.write, db.ckpt} {
			if c != nil {
				c.Close()
			}
		}
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	var err error
	// The writer checkpoints by itself only if the background checkpointer
	// falls far behind (16,384 pages of log).
	if db.write, err = sql.Open("sqlite", base+"?"+common+"&_pragma=synchronous("+synchronous+")&_pragma=cache_size(-65536)&_pragma=wal_autocheckpoint(16384)&_pragma=secure_delete(ON)&_txlock=immediate"); err != nil {
		return fail(err)
	}
	db.write.SetMaxOpenConns(1)
	db.write.SetMaxIdleConns(1)
	db.write.SetConnMaxLifetime(0)
	// Check the file is writable now rather than at the first write.
	if _, err := db.write.Exec("CREATE TABLE IF NOT EXISTS schema_versions (component TEXT PRIMARY KEY, version INTEGER NOT NULL)"); err != nil {
		return fail(err)
	}
	// Readers keep small page caches (4 MiB each, 2*GOMAXPROCS of them):
	// the OS's page cache holds the file once for all of them, and the
	// memory bank keeps what it searches in its own bounded cache.
	if db.read, err = sql.Open("sqlite", base+"?"+common+"&_pragma=query_only(1)&_pragma=cache_size(-4096)"); err != nil {
		return fail(err)
	}
	n := max(4, 2*runtime.GOMAXPROCS(0))
	db.read.SetMaxOpenConns(n)
	db.read.SetMaxIdleConns(n)
	if db.ckpt, err = sql.Open("sqlite", base+"?"+common+"&_pragma=synchronous("+synchronous+")"); err != nil {
		return fail(err)
	}
	db.ckpt.SetMaxOpenConns(1)
	for _, s := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&db.savepoint, "SAVEPOINT w"},
		{&db.release, "RELEASE w"},
		{&db.rollbackTo, "ROLLBACK TO w"},
		{&db.changes, "SELECT total_changes()"},
	} {
		if *s.stmt, err = db.write.Prepare(s.sql); err != nil {
			return fail(err)
		}
	}
	go db.checkpointer()
	return db, nil
}

// create makes an empty database file at path with FileMode, unless a
// file is there: SQLite opens an empty file as a new database, and gives
// the log and shared memory files it creates the database file's mode.
func create(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, FileMode)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return f.Close()
}

// Read returns the pool for queries. It refuses writes.
func (db *DB) Read() *sql.DB { return db.read }

// Prepare prepares a statement on the write connection, for use inside
// Write functions with tx.Stmt.
func (db *DB) Prepare(query string) (*sql.Stmt, error) { return db.write.Prepare(query) }

// ErrClosed is returned by writes after Close.
var ErrClosed = errors.New("sqlitedb: database is closed")

// Write runs fn in a transaction shared with other concurrent writes and
// returns once that transaction is durable, or fn's error (in which case
// nothing fn did remains). fn must not keep tx and must do nothing but
// database work and setting its own results: it may run twice (when another
// write of its batch fails), and only its last run counts. It may run in
// another goroutine than Write's. If ctx ends before fn starts, fn does not
// run and ctx's error is returned. SQLite's errors an operator can act on
// come back with a fault kind: a full disk is ResourceExhausted, a busy or
// read-only database Unavailable. A batch whose writes changed no row
// (SQLite's total_changes) is rolled back instead of committed: there is
// nothing to make durable, so an idle server's periodic checks cost no
// sync and do not count in Stats; a write of schema alone must therefore
// also change a row (Migrate records the version).
//
// Each Write is an OpenTelemetry span, sqlite.write (from the call to the
// durable commit, waiting for the shared transaction included), with the
// number of writes its transaction held; it is a no-op unless a tracer
// provider is installed (internal/telemetry).
func (db *DB) Write(ctx context.Context, fn func(tx *sql.Tx) error) (err error) {
	ctx, span := tracer.Start(ctx, "sqlite.write", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.DBSystemNameSQLite))
	r := &writeReq{ctx: ctx, fn: fn, wake: make(chan struct{}, 1)}
	defer func() {
		span.SetAttributes(attribute.Int("kioku.sqlite.batch_writes", r.batch))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	return db.runWrite(r)
}

// tracer makes the spans of Write.
var tracer = otel.Tracer("github.com/kioku-ai/kioku/internal/sqlitedb")

// runWrite is Write without its span.
func (db *DB) runWrite(r *writeReq) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return ErrClosed
	}
	db.queue = append(db.queue, r)
	lead := !db.leading
	db.leading = true
	db.mu.Unlock()
	if !lead {
		<-r.wake
		if r.finished {
			return classify(r.err)
		}
		// Made leader by the previous one; r is in the queue.
	}
	db.lead()
	return classify(r.err)
}

// lead commits the queued writes (the leader's own among them), wakes their
// callers, and hands leadership to the first write queued meanwhile.
func (db *DB) lead() {
	db.mu.Lock()
	n := min(len(db.queue), MaxBatch)
	batch := db.queue[:n:n]
	db.queue = db.queue[n:]
	db.mu.Unlock()

	if db.commit(batch) {
		db.dirty.Add(1)
	}

	db.mu.Lock()
	var next *writeReq
	if len(db.queue) > 0 {
		next = db.queue[0]
	} else {
		db.leading = false
		db.idle.Broadcast()
	}
	db.mu.Unlock()
	for _, r := range batch {
		r.finished = true
		r.batch = len(batch)
		r.wake <- struct{}{}
	}
	if next != nil {
		next.wake <- struct{}{}
	}
}

// commit runs a batch in one transaction. The fast path runs the writes
// one after another with no savepoints. If one fails, the transaction is
// rolled back and the batch runs again with each write in its own
// savepoint, so that a failed write undoes only itself; every write's
// outcome is then that of the second run, in the same order. It reports
// whether a transaction was committed.
func (db *DB) commit(batch []*writeReq) bool {
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = err
		}
	}
	if done, committed := db.runBatch(batch, false); done {
		return committed
	}
	for _, r := range batch {
		if r.err != nil && r.ctx.Err() == nil {
			r.err = nil
		}
	}
	_, committed := db.runBatch(batch, true)
	return committed
}

// runBatch runs the writes of batch that have no error yet in one
// transaction and commits it. Without savepoints it stops at the first
// failing write, rolls back and returns done=false. Otherwise it returns
// done=true with every write's outcome in its err, and whether it
// committed.
func (db *DB) runBatch(batch []*writeReq, savepoints bool) (done, committed bool) {
	tx, err := db.write.BeginTx(context.Background(), nil)
	if err != nil {
		failAll(batch, fmt.Errorf("sqlitedb: begin: %w", err))
		return true, false
	}
	var before, after int64
	if err := tx.Stmt(db.changes).QueryRow().Scan(&before); err != nil {
		tx.Rollback()
		failAll(batch, fmt.Errorf("sqlitedb: counting changes: %w", err))
		return true, false
	}
	ok := 0
	for _, r := range batch {
		if r.err != nil {
			continue
		}
		if !savepoints {
			if r.err = run(r.fn, tx); r.err != nil {
				tx.Rollback()
				return false, false
			}
			ok++
			continue
		}
		if _, err := tx.Stmt(db.savepoint).Exec(); err != nil {
			r.err = fmt.Errorf("sqlitedb: savepoint: %w", err)
			continue
		}
		if r.err = run(r.fn, tx); r.err != nil {
			if _, err := tx.Stmt(db.rollbackTo).Exec(); err != nil {
				// The transaction is unusable: fail the whole batch.
				tx.Rollback()
				failAll(batch, fmt.Errorf("sqlitedb: rollback to savepoint: %w", err))
				return true, false
			}
		}
		if _, err := tx.Stmt(db.release).Exec(); err != nil && r.err == nil {
			r.err = fmt.Errorf("sqlitedb: release savepoint: %w", err)
		}
		if r.err == nil {
			ok++
		}
	}
	if ok == 0 {
		tx.Rollback()
		return true, false
	}
	// Writes that changed no row (a claim that found nothing, a sweep with
	// nothing to sweep) leave nothing to make durable: no commit, no sync.
	if err := tx.Stmt(db.changes).QueryRow().Scan(&after); err == nil && after == before {
		tx.Rollback()
		return true, false
	}
	var keys []seal.WrappedKey
	if db.keyring != nil {
		if keys, err = db.storeKeys(tx); err != nil {
			tx.Rollback()
			failAll(batch, err)
			return true, false
		}
	}
	start := time.Now()
	if err := tx.Commit(); err != nil {
		failAll(batch, fmt.Errorf("sqlitedb: commit: %w", err))
		return true, false
	}
	if len(keys) > 0 {
		db.keyring.Stored(keys)
	}
	db.stats.commitNanos.Add(uint64(time.Since(start)))
	db.stats.commits.Add(1)
	db.stats.writes.Add(uint64(ok))
	return true, true
}

// Stats are counts of a database's work since it was opened.
type Stats struct {
	// Commits made, and the writes they held (Writes/Commits is the
	// average batch of the group commit).
	Commits, Writes uint64
	// CommitTime is the time spent committing: writing the log and, for a
	// durable database, syncing it.
	CommitTime time.Duration
	// FileBytes and LogBytes are the sizes of the database file and of its
	// write-ahead log now.
	FileBytes, LogBytes int64
}

// Stats returns the database's counts so far and its files' sizes.
func (db *DB) Stats() Stats {
	st := Stats{
		Commits:    db.stats.commits.Load(),
		Writes:     db.stats.writes.Load(),
		CommitTime: time.Duration(db.stats.commitNanos.Load()),
	}
	if fi, err := os.Stat(db.path); err == nil {
		st.FileBytes = fi.Size()
	}
	if fi, err := os.Stat(db.path + "-wal"); err == nil {
		st.LogBytes = fi.Size()
	}
	return st
}

// fileURI is the SQLite URI of a file path.
func fileURI(path string) string { return "file:" + (&url.URL{Path: path}).EscapedPath() }

// failAll sets err on every write of the batch that has not failed yet.
func failAll(batch []*writeReq, err error) {
	for _, r := range batch {
		if r.err == nil {
			r.err = err
		}
	}
}

// run calls fn, turning a panic into an error so one bad write cannot take
// the others down.
func run(fn func(*sql.Tx) error, tx *sql.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("sqlitedb: write panicked: %v", p)
		}
	}()
	return fn(tx)
}

// checkpointInterval is how often the checkpointer looks for new commits.
// A checkpoint copies every page the commits since the last one changed,
// once however often they changed it, and syncs the file twice: under a
// steady stream of appends the same pages (a session's last page of
// events, its row) change in every commit, so a checkpoint a second costs
// a tenth of what ten do, for a log of at most a second of commits.
const checkpointInterval = time.Second

// checkpointer runs passive checkpoints on its own connection whenever
// there were commits, so that the log stays short without writers stopping
// to copy it.
func (db *DB) checkpointer() {
	defer close(db.ckptDone)
	t := time.NewTicker(checkpointInterval)
	defer t.Stop()
	for {
		select {
		case <-db.quit:
			return
		case <-t.C:
		}
		if db.dirty.Swap(0) == 0 {
			continue
		}
		// A failed or partial passive checkpoint is retried at the next
		// tick; it never affects correctness, only the log's length.
		db.ckpt.Exec("PRAGMA wal_checkpoint(PASSIVE)")
	}
}

// Migrate brings a component's tables to the latest of its schema steps.
// Step i (from 0) is applied once, in order, when the stored version of the
// component is at most i. Steps of one call are applied in one transaction.
func (db *DB) Migrate(component string, steps []string) error {
	st := make([]Step, len(steps))
	for i, q := range steps {
		st[i] = Step{SQL: q}
	}
	return db.MigrateSteps(component, st)
}

// Step is one step of a schema migration: SQL statements, or a function
// for what SQL alone cannot do (rewriting stored records), run in the
// migration's transaction.
type Step struct {
	SQL  string
	Func func(tx *sql.Tx) error
}

// MigrateSteps is Migrate with steps that may be functions.
func (db *DB) MigrateSteps(component string, steps []Step) error {
	return db.Write(context.Background(), func(tx *sql.Tx) error {
		var version int
		err := tx.QueryRow("SELECT version FROM schema_versions WHERE component = ?", component).Scan(&version)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if version > len(steps) {
			return fmt.Errorf("the database's %s schema is version %d, newer than this kioku (%d); upgrade kioku", component, version, len(steps))
		}
		for i := version; i < len(steps); i++ {
			if steps[i].Func != nil {
				err = steps[i].Func(tx)
			} else {
				_, err = tx.Exec(steps[i].SQL)
			}
			if err != nil {
				return fmt.Errorf("migrating %s to version %d: %w", component, i+1, err)
			}
		}
		_, err = tx.Exec("INSERT INTO schema_versions (component, version) VALUES (?, ?) ON CONFLICT (component) DO UPDATE SET version = excluded.version", component, len(steps))
		return err
	})
}

// Close refuses new writes, waits for the commit in progress and the writes
// queued for it, and closes the file.
func (db *DB) Close() error {
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return nil
	}
	db.closed = true
	for db.leading {
		db.idle.Wait()
	}
	db.mu.Unlock()
	close(db.quit)
	<-db.ckptDone
	for _, s := range []*sql.Stmt{db.savepoint, db.release, db.rollbackTo, db.changes} {
		s.Close()
	}
	return errors.Join(db.read.Close(), db.ckpt.Close(), db.write.Close())
}
