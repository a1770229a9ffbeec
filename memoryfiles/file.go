package memoryfiles

import (
	"time"

	"github.com/kioku-ai/kioku/internal/enumname"
	"github.com/kioku-ai/kioku/resource"
)

// File is one memory file of a user.
type File struct {
	App, User string
	// ID is assigned when the file is created and stays through renames.
	ID string
	// Path is where the file is now: Root, "/", and its segments.
	Path string
	// Content is the file's text. Listings leave it empty (Size is
	// always set).
	Content string
	Size    int64
	// Revision is the number of the file's latest revision (1 once
	// created).
	Revision   int64
	CreateTime time.Time
	// UpdateTime is when the latest revision was made (for a deleted
	// file, when it was deleted).
	UpdateTime time.Time
	// Deleted files are invisible to the tool but keep their revisions.
	Deleted bool
}

// Name returns the file's resource name,
// apps/{app}/users/{user}/memoryFiles/{file}.
func (f *File) Name() string { return resource.MemoryFileName(f.App, f.User, f.ID) }

// Action is what a revision did to its file.
type Action int

// The actions of revisions.
const (
	ActionUnspecified Action = iota
	// Created: the file was created (create, or an import's first
	// revision).
	Created
	// Edited: the content changed (str_replace, insert).
	Edited
	// Renamed: the file, or a directory above it, was renamed.
	Renamed
	// Deleted: the file, or a directory above it, was deleted.
	Deleted
)

// actionNames are the stored names of the actions.
var actionNames = map[Action]string{Created: "CREATED", Edited: "EDITED", Renamed: "RENAMED", Deleted: "DELETED"}

// String returns the action's name (CREATED, ...); ACTION_UNSPECIFIED for
// the zero action.
func (a Action) String() string { return enumname.String(actionNames, a, "ACTION_UNSPECIFIED") }

// ParseAction returns the action of a name String returns.
func ParseAction(name string) (Action, error) {
	return enumname.Parse(actionNames, name, "memory file revision action")
}

// Revision is one change of a file. Revisions are never rewritten; each
// file keeps its latest MaxRevisions.
type Revision struct {
	App, User, FileID string
	// Number is 1 for the file's creation, then one more per change.
	Number int64
	Action Action
	// Path is the file's path after the change.
	Path string
	// Content is the file's content after the change, for the actions
	// that change it (Created, Edited); empty for the others.
	Content string
	// Size is the content's size after the change, for every action.
	Size       int64
	CreateTime time.Time
}

// Name returns the revision's resource name,
// apps/{app}/users/{user}/memoryFiles/{file}/revisions/{n}.
func (r *Revision) Name() string {
	return resource.MemoryFileRevisionName(r.App, r.User, r.FileID, r.Number)
}

// Usage is what a user's memory files hold, kept with every write: the
// limits are checked against it, and its Version orders the writes of the
// user (see Store.Write).
type Usage struct {
	// Files and Bytes are the user's files (not deleted) and their
	// content's bytes; Deleted the deleted files kept.
	Files, Deleted int
	Bytes          int64
	// History is the bytes of content kept besides the files' own: the
	// content of every revision kept (of the files and of the deleted
	// ones) and the last content of every deleted file kept. It is kept
	// within MaxHistoryBytes.
	History int64
	// Version counts the user's writes: 0 for a user who never had a
	// file.
	Version int64
}

// Account returns a user's usage with a file's old state (nil: none)
// replaced by its new one, and the revisions revs added: how an import
// keeps the usage current. The version is left as it is.
func Account(u Usage, old, f *File, revs []*Revision) Usage {
	for _, x := range []struct {
		f    *File
		sign int
	}{{old, -1}, {f, 1}} {
		switch {
		case x.f == nil:
		case x.f.Deleted:
			u.Deleted += x.sign
			u.History += int64(x.sign) * x.f.Size
		default:
			u.Files += x.sign
			u.Bytes += int64(x.sign) * x.f.Size
		}
	}
	for _, r := range revs {
		u.History += int64(len(r.Content))
	}
	return u
}
