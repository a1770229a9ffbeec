package jobs

import (
	"context"
	"time"
)

// Store persists operations. The Engine computes every transition; a
// Store finds work and applies conditional writes atomically. A store of a
// domain that commits its effects with the completion of operations (the
// memory bank's Write) applies the same Updates in its own transactions.
//
// Errors are of package fault's kinds (NotFound, AlreadyExists, Aborted for
// a failed expectation of an Update); any other error is Internal. Package
// jobstest is the conformance suite.
type Store interface {
	// CreateOperation stores a new operation (AlreadyExists when its id is
	// taken in its app).
	CreateOperation(ctx context.Context, op *Operation) error

	// GetOperation returns an operation, or NotFound.
	GetOperation(ctx context.Context, app, id string) (*Operation, error)

	// ListOperations returns up to q.Limit operations of an app, newest
	// first, after the cursor.
	ListOperations(ctx context.Context, q Query) ([]*Operation, error)

	// QueuedOperations returns up to limit operations that are pending or
	// running, across apps, earliest ClaimTime first: the work a worker may
	// claim now (ClaimTime at or before now), then the work that becomes
	// claimable next.
	QueuedOperations(ctx context.Context, limit int) ([]*Operation, error)

	// PendingOperations returns up to limit pending operations of an app's
	// key of the given kind whose ClaimTime is at or before now, earliest
	// first (those a claim may coalesce).
	PendingOperations(ctx context.Context, app, key, kind string, now time.Time, limit int) ([]*Operation, error)

	// CountPending counts the pending operations of app, of one key when
	// key is not empty, up to limit (it stops counting there).
	CountPending(ctx context.Context, app, key string, limit int) (int, error)

	// CountPendingOfOwner counts the pending operations of an app's owner
	// (Operation.Owner, not empty), whatever their keys, up to limit.
	CountPendingOfOwner(ctx context.Context, app, owner string, limit int) (int, error)

	// CountRunningOfOwner counts the running operations of an app's owner
	// (not empty), whatever their keys and whichever process holds them,
	// up to limit: the owner's share of every process's workers. One whose
	// lease expired counts until another process claims it again.
	CountRunningOfOwner(ctx context.Context, app, owner string, limit int) (int, error)

	// UpdateOperations applies updates atomically at now, after checking
	// every expectation: if one fails nothing is written.
	UpdateOperations(ctx context.Context, now time.Time, updates []Update) error

	// DeleteFinishedOperations deletes up to limit finished operations
	// created before the given time and returns how many.
	DeleteFinishedOperations(ctx context.Context, before time.Time, limit int) (int, error)

	// DeleteOperations removes operations of an app, whatever their state
	// (ids that do not exist are skipped). A worker running one fails its
	// next write (the operation is gone) and writes nothing.
	DeleteOperations(ctx context.Context, app string, ids []string) error
}
