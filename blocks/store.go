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

	// DeleteUser removes every block of a user with their revisions and
	// returns how many blocks it removed. The app's shared blocks stay.
	DeleteUser(ctx context.Context, app, user string) (int, error)
}
