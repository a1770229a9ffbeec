package blocks

import (
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/enumname"
	"github.com/kioku-ai/kioku/resource"
)

// Key names a block: an app's shared block when User is empty, else a
// user's.
type Key struct {
	App, User, Label string
}

// Name returns the block's resource name.
func (k Key) Name() string { return resource.BlockName(k.App, k.User, k.Label) }

// Owner says whose block it is, for messages: "user U of app A" or "app
// A".
func (k Key) Owner() string {
	if k.User == "" {
		return "app " + k.App
	}
	return "user " + k.User + " of app " + k.App
}

// Block is a core memory block.
type Block struct {
	Key
	Value       string
	Description string
	// Limit is the most characters Value may hold.
	Limit int
	// ReadOnly refuses the agent's edits (Append, Replace).
	ReadOnly bool
	// Revision is the number of the block's latest revision (1 once
	// created).
	Revision   int64
	CreateTime time.Time
	UpdateTime time.Time
}

// Action is what a revision did to its block.
type Action int

// The actions of revisions.
const (
	ActionUnspecified Action = iota
	// Updated: Update created or replaced the block (or an import's).
	Updated
	// Appended: Append added to its value.
	Appended
	// Replaced: Replace changed text in its value.
	Replaced
	// Rewritten: Rewrite, the background rewrite from a session's events,
	// replaced its value.
	Rewritten
)

// actionNames are the stored names of the actions.
var actionNames = map[Action]string{Updated: "UPDATED", Appended: "APPENDED", Replaced: "REPLACED", Rewritten: "REWRITTEN"}

// String returns the action's name (UPDATED, ...); ACTION_UNSPECIFIED for
// the zero action.
func (a Action) String() string { return enumname.String(actionNames, a, "ACTION_UNSPECIFIED") }

// ParseAction returns the action of a name String returns.
func ParseAction(name string) (Action, error) {
	return enumname.Parse(actionNames, name, "block revision action")
}

// Source is one session a revision was written from, with the events of
// it that the writer read. Its JSON form (its tags) is part of the stored
// formats, which keep a revision's sources as a JSON array of them.
type Source struct {
	// Session is the session's resource name.
	Session  string   `json:"session"`
	EventIDs []string `json:"event_ids,omitempty"`
}

// Revision is one change of a block: the block as the change left it.
// Revisions are never rewritten; each block keeps its latest
// MaxRevisions.
type Revision struct {
	Key
	// Number is 1 for the block's creation, then one more per change.
	Number      int64
	Action      Action
	Value       string
	Description string
	Limit       int
	ReadOnly    bool
	CreateTime  time.Time
	// Sources are the sessions (and their events) a Rewrite was written
	// from; none for the other actions.
	Sources []Source
}

// Name returns the revision's resource name, {block}/revisions/{n}.
func (r *Revision) Name() string {
	return resource.BlockRevisionName(r.App, r.User, r.Label, r.Number)
}

// revisionOf returns the revision that records b as an action left it,
// written from sources.
func revisionOf(b *Block, a Action, sources []Source) *Revision {
	return &Revision{
		Key: b.Key, Number: b.Revision, Action: a, Value: b.Value, Description: b.Description,
		Limit: b.Limit, ReadOnly: b.ReadOnly, CreateTime: b.UpdateTime, Sources: sources,
	}
}

// CheckImport refuses to bring a stored block cur to an archive's b: one
// of another create time is another block (AlreadyExists), and one at a
// later revision moved on past the archive (FailedPrecondition). Stores
// call it in Import.
func CheckImport(cur, b *Block) error {
	switch {
	case !cur.CreateTime.Equal(b.CreateTime):
		return fault.New(fault.AlreadyExists, "another block %s (created %v) is in this store", b.Name(), cur.CreateTime)
	case cur.Revision > b.Revision:
		return fault.New(fault.FailedPrecondition, "block %s moved on in this store (revision %d) past the archive's (revision %d)", b.Name(), cur.Revision, b.Revision)
	}
	return nil
}
