package blocks

import "context"

// Store persists blocks and their revisions. Service validates inputs and
// computes every change; a Store stores, looks up, and applies a write
// atomically when its precondition holds.
//
// Errors are of package fault's kinds (NotFound, Aborted for a Write
// whose precondition failed, ResourceExhausted past MaxBlocks); any other
// error is Internal.
type Store interface {
	// Get returns a block, or NotFound.
	Get(ctx context.Context, k Key) (*Block, error)

	// List returns up to limit blocks of an owner (app and user; user
	// empty for the app's shared blocks) in label order, with labels
	// after the label after ("" for the first).
	List(ctx context.Context, app, user, after string, limit int) ([]*Block, error)

	// Write stores b and its revision rev (rev.Number is b.Revision) if
	// the block's stored revision is still expected (0: the block must
	// not exist), removing the block's revision
	// rev.Number-MaxRevisions; otherwise it writes nothing and returns
	// Aborted. Creating a block when its owner has MaxBlocks already is
	// ResourceExhausted.
	Write(ctx context.Context, b *Block, rev *Revision, expected int64) error

	// Delete removes a block with its revisions, or returns NotFound.
	Delete(ctx context.Context, k Key) error

	// ListRevisions returns up to limit revisions of a block, newest
	// first, with numbers below before (0: from the newest).
	ListRevisions(ctx context.Context, k Key, before int64, limit int) ([]*Revision, error)

	// Apps returns up to limit ids of the apps with blocks (a user's or
	// shared), in ascending order after the id after ("" for the first).
	Apps(ctx context.Context, after string, limit int) ([]string, error)

	// Users returns up to limit ids of an app's users with blocks, in
	// ascending order after the id after.
	Users(ctx context.Context, app, after string, limit int) ([]string, error)

	// Import stores a block as an archive has it (revision, times and
	// all) and the given revisions of it, in one write. A block absent
	// from the store is created (ResourceExhausted when its owner has
	// MaxBlocks already); one with the same create time is brought to b
	// unless it moved on past it (a later revision: FailedPrecondition);
	// one with another create time is AlreadyExists. Revisions already
	// stored, and those older than b.Revision-MaxRevisions, are left
	// out. It reports whether it wrote the block and how many revisions
	// it wrote.
	Import(ctx context.Context, b *Block, revs []*Revision) (bool, int, error)

	// DeleteUser removes every block of a user with their revisions and
	// returns how many blocks it removed. The app's shared blocks stay.
	DeleteUser(ctx context.Context, app, user string) (int, error)
}
