// Package sqlitedb is the embedded database under kioku's sqlite backends:
// one SQLite file (modernc.org/sqlite, pure Go) in WAL mode with
// synchronous=FULL, a pool of read connections, and a single writer that
// groups concurrent writes into shared commits.
//
// Every write is a function run inside a transaction by the writer
// goroutine. While one commit is being made durable (fsync), new writes
// queue; the writer then runs all of them in one transaction, each inside its
// own savepoint so that one failing write rolls back only itself, and commits
// once. Write returns only after the commit holding its function is durable,
// so an acknowledged write survives a crash, and the cost of an fsync is
// shared by everything that arrived while the previous one ran.
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

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// MaxBatch bounds how many writes share one commit.
const MaxBatch = 256

// DB is an open kioku database file.
type DB struct {
	read  *sql.DB
	write *sql.DB
	reqs  chan *writeReq
	quit  chan struct{}
	done  chan struct{}
	once  sync.Once

	savepoint, release, rollbackTo *sql.Stmt
}

type writeReq struct {
	ctx  context.Context
	fn   func(*sql.Tx) error
	err  error
	done chan struct{}
}

// Open opens (creating if needed) the database at path, whose directory must
// exist and be writable.
func Open(path string) (*DB, error) {
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("data directory %s is not a directory", dir)
	}
	base := "file:" + (&url.URL{Path: path}).EscapedPath()
	common := "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(OFF)&_pragma=temp_store(MEMORY)"
	write, err := sql.Open("sqlite", base+"?"+common+"&_pragma=synchronous(FULL)&_pragma=cache_size(-65536)&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	if err := write.Ping(); err != nil {
		write.Close()
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	// Check the file is writable now rather than at the first write.
	if _, err := write.Exec("CREATE TABLE IF NOT EXISTS schema_versions (component TEXT PRIMARY KEY, version INTEGER NOT NULL)"); err != nil {
		write.Close()
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	read, err := sql.Open("sqlite", base+"?"+common+"&_pragma=query_only(1)&_pragma=cache_size(-16384)")
	if err != nil {
		write.Close()
		return nil, err
	}
	n := max(4, 2*runtime.GOMAXPROCS(0))
	read.SetMaxOpenConns(n)
	read.SetMaxIdleConns(n)
	db := &DB{
		read:  read,
		write: write,
		reqs:  make(chan *writeReq, MaxBatch),
		quit:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	for _, s := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&db.savepoint, "SAVEPOINT w"},
		{&db.release, "RELEASE w"},
		{&db.rollbackTo, "ROLLBACK TO w"},
	} {
		if *s.stmt, err = write.Prepare(s.sql); err != nil {
			read.Close()
			write.Close()
			return nil, err
		}
	}
	go db.writer()
	return db, nil
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
// nothing fn did remains). fn must not keep tx, must do nothing but database
// work, and may run at most once. If ctx ends before fn starts, fn does not
// run and ctx's error is returned.
func (db *DB) Write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	r := &writeReq{ctx: ctx, fn: fn, done: make(chan struct{})}
	select {
	case db.reqs <- r:
	case <-db.quit:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	<-r.done
	return r.err
}

func (db *DB) writer() {
	defer close(db.done)
	batch := make([]*writeReq, 0, MaxBatch)
	for {
		select {
		case r := <-db.reqs:
			batch = append(batch[:0], r)
		case <-db.quit:
			// Fail whatever is still queued.
			for {
				select {
				case r := <-db.reqs:
					r.err = ErrClosed
					close(r.done)
				default:
					return
				}
			}
		}
	drain:
		for len(batch) < MaxBatch {
			select {
			case r := <-db.reqs:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		db.commit(batch)
		for _, r := range batch {
			close(r.done)
		}
	}
}

// commit runs a batch in one transaction, each write in its own savepoint.
func (db *DB) commit(batch []*writeReq) {
	tx, err := db.write.BeginTx(context.Background(), nil)
	if err != nil {
		for _, r := range batch {
			r.err = fmt.Errorf("sqlitedb: begin: %w", err)
		}
		return
	}
	ok := 0
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			continue
		}
		if _, err := tx.Stmt(db.savepoint).Exec(); err != nil {
			r.err = fmt.Errorf("sqlitedb: savepoint: %w", err)
			continue
		}
		r.err = run(r.fn, tx)
		if r.err != nil {
			if _, err := tx.Stmt(db.rollbackTo).Exec(); err != nil {
				// The transaction is unusable: fail the whole batch.
				tx.Rollback()
				for _, r := range batch {
					if r.err == nil {
						r.err = fmt.Errorf("sqlitedb: rollback to savepoint: %w", err)
					}
				}
				return
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
		return
	}
	if err := tx.Commit(); err != nil {
		for _, r := range batch {
			if r.err == nil {
				r.err = fmt.Errorf("sqlitedb: commit: %w", err)
			}
		}
	}
}

// run calls fn, turning a panic into an error so one bad write cannot take
// the writer down.
func run(fn func(*sql.Tx) error, tx *sql.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("sqlitedb: write panicked: %v", p)
		}
	}()
	return fn(tx)
}

// Migrate brings a component's tables to the latest of its schema steps.
// Step i (from 0) is applied once, in order, when the stored version of the
// component is at most i. Steps of one call are applied in one transaction.
func (db *DB) Migrate(component string, steps []string) error {
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
			if _, err := tx.Exec(steps[i]); err != nil {
				return fmt.Errorf("migrating %s to version %d: %w", component, i+1, err)
			}
		}
		_, err = tx.Exec("INSERT INTO schema_versions (component, version) VALUES (?, ?) ON CONFLICT (component) DO UPDATE SET version = excluded.version", component, len(steps))
		return err
	})
}

// Close stops the writer (failing queued writes) and closes the file.
func (db *DB) Close() error {
	db.once.Do(func() { close(db.quit) })
	<-db.done
	for _, s := range []*sql.Stmt{db.savepoint, db.release, db.rollbackTo} {
		s.Close()
	}
	return errors.Join(db.read.Close(), db.write.Close())
}
