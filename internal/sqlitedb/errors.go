package sqlitedb

import (
	"errors"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/kioku-ai/kioku/fault"
)

// classify gives SQLite's errors that are not bugs a kind and a message an
// operator can act on; other errors, and errors that already have a kind,
// are returned as they are.
func classify(err error) error {
	var se *sqlite.Error
	if err == nil || !errors.As(err, &se) {
		return err
	}
	var fe *fault.Error
	if errors.As(err, &fe) {
		return err
	}
	switch se.Code() & 0xff { // the primary result code
	case sqlite3.SQLITE_FULL:
		return fault.Wrap(fault.ResourceExhausted, err, "the database's disk is full: nothing was written; free space where --data-dir is")
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return fault.Wrap(fault.Unavailable, err, "the database is busy (another process holds it?); retry")
	case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN:
		return fault.Wrap(fault.Unavailable, err, "the database cannot be written: check that --data-dir and its files are writable")
	}
	return err
}
