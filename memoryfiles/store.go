package memoryfiles

import (
	"context"
	"time"
)

// Store persists memory files. Service validates inputs and computes every
// change; a Store stores, looks up, and applies a Write atomically when its
// one precondition holds.
//
// Errors are of package fault's kinds (NotFound, Aborted for a Write whose
// precondition failed); any other error is Internal.
type Store interface {
	// Usage returns a user's usage: zero (Version 0) for a user with no
	// stored usage. A write depends on what it read, so the service reads
	// the usage first and the files after it: a write that lands in
	// between moves the version on and fails the Write computed from them.
	Usage(ctx context.Context, app, user string) (Usage, error)

	// FindFile returns the user's file at a path (not deleted), with its
	// content, or NotFound.
	FindFile(ctx context.Context, app, user, path string) (*File, error)

	// GetFile returns a file by id, deleted or not, with its content, or
	// NotFound.
	GetFile(ctx context.Context, app, user, id string) (*File, error)

	// ListFiles returns up to q.Limit files of a user at or below q.Dir
	// (Root for all) in (path, id) order after the cursor: the files not
	// deleted, and with q.ShowDeleted the deleted ones too. Their content
	// only with q.Content.
	ListFiles(ctx context.Context, q ListQuery) ([]*File, error)

	// OldestDeleted returns up to limit deleted files of a user, without
	// content, the earliest deleted first (UpdateTime, then id).
	OldestDeleted(ctx context.Context, app, user string, limit int) ([]*File, error)

	// ListRevisions returns up to limit revisions of a file, newest first,
	// with numbers below before (0: from the newest).
	ListRevisions(ctx context.Context, app, user, id string, before int64, limit int) ([]*Revision, error)

	// Write applies a Write atomically, if the user's stored usage version
	// is still w.Version (0 when none is stored); otherwise it writes
	// nothing and returns Aborted. It stores w.Usage with version
	// w.Version+1, every file of w.Files (only the metadata when the
	// change says its content is unchanged), every revision of
	// w.Revisions, removing for each the file's revision
	// Number-MaxRevisions, removes the revisions of w.Drop, and removes
	// the files of w.Purge with their revisions.
	Write(ctx context.Context, w *Write) error

	// Apps returns up to limit ids of the apps with memory files (or a
	// stored usage), in ascending order after the id after ("" for the
	// first).
	Apps(ctx context.Context, after string, limit int) ([]string, error)

	// Users returns up to limit ids of an app's users with memory files
	// (or a stored usage), in ascending order after the id after.
	Users(ctx context.Context, app, after string, limit int) ([]string, error)

	// ImportFile stores a file as an archive has it (id, path, revision,
	// deletion and all) and the given revisions of it, in one write that
	// brings the user's usage up to date and, like Write, moves its
	// version on. A file absent from the store is created; one with the
	// same id and create time is brought to f unless it moved on past it
	// (a later revision: FailedPrecondition); a file with another id at
	// f's path (neither deleted) is AlreadyExists. Revisions already
	// stored, and those older than f.Revision-MaxRevisions, are left out.
	// It reports whether it wrote the file and how many revisions it
	// wrote.
	ImportFile(ctx context.Context, f *File, revs []*Revision) (bool, int, error)

	// DeleteUser removes every file of a user, deleted ones too, with
	// their revisions and the user's usage, and returns how many files it
	// removed. No revision records it. Calling it again finishes a
	// deletion that stopped.
	DeleteUser(ctx context.Context, app, user string) (int, error)
}

// ListQuery selects files for ListFiles.
type ListQuery struct {
	App, User string
	// Dir is a clean path: the file at it, or the files below it (Root:
	// all).
	Dir         string
	ShowDeleted bool
	Content     bool
	// AfterPath and AfterID are the cursor: the last file of the previous
	// page; empty for the first page.
	AfterPath, AfterID string
	Limit              int
}

// Write is a set of changes to one user's files, applied atomically.
type Write struct {
	App, User string
	// Version is the usage version the changes were computed from.
	Version int64
	// Usage is the user's usage after the changes.
	Usage Usage
	// Files are the files' new states.
	Files []FileChange
	// Revisions record the changes, one per changed file.
	Revisions []*Revision
	// Purge are deleted files to remove for good, with their revisions
	// (their Revision says which are left: the MaxRevisions up to it).
	Purge []*File
	// Drop are revisions to remove (App, User, FileID and Number name
	// each): the oldest history of files that stay, removed to keep the
	// user within MaxHistoryBytes.
	Drop []*Revision
	// Now is the time of the write.
	Now time.Time
}

// FileChange is the new state of one file.
type FileChange struct {
	File *File
	// Content says the content changed (or the file is new): without it
	// a store may write only the file's path, size, revision, times and
	// deletion.
	Content bool
}
