// Package firestoredb holds what kioku's Firestore stores share: their
// options (StoreOptions), how their client is connected (Dial), the fault
// policy of that connection and the health of Firestore (Guard), the
// mapping of Firestore's errors to the domain's kinds (Wrap), reading
// documents page by page or one by one (PageByID, PageIDs, EachDoc) and
// revisions newest first (RevisionsBelow), bulk deletion (DeleteDocs,
// WithSub), the listing of apps for export (Apps, AppsWith), the locks on
// which one process's transactions on a document queue (Locks), and a
// Meter that counts the documents they read, write and delete
// (Firestore's billing units).
package firestoredb

import (
	"context"
	"errors"
	"slices"
	"strings"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kioku-ai/kioku/fault"
)

// StoreOptions configures one of kioku's Firestore stores.
type StoreOptions struct {
	// Root is the root collection. Default "kioku_apps".
	Root string
	// MaxAttempts bounds the tries of one transaction under contention.
	// Default 30.
	MaxAttempts int
}

// Resolve returns the root collection and the options of the store's
// transactions, with the defaults where o leaves a field unset.
func (o StoreOptions) Resolve() (root string, txn []firestore.TransactionOption) {
	root, attempts := o.Root, o.MaxAttempts
	if root == "" {
		root = "kioku_apps"
	}
	if attempts <= 0 {
		attempts = 30
	}
	return root, []firestore.TransactionOption{firestore.MaxAttempts(attempts)}
}

// IsNotFound reports whether err is Firestore's NOT_FOUND.
func IsNotFound(err error) bool { return status.Code(err) == codes.NotFound }

// Wrap turns Firestore's errors into the domain's, each of the kind that
// tells the caller what to do:
//
//   - Unavailable, to retry (kioku's clients retry it for calls safe to
//     repeat, appends with the same event id): Firestore could not be
//     reached (ErrUnreachable) or was unavailable or overloaded; a write
//     whose outcome is unknown (ErrOutcomeUnknown); and Firestore's own
//     failures (INTERNAL, UNKNOWN, DATA_LOSS), which Firestore's
//     documentation asks callers to retry.
//   - Aborted, to retry as well: contention that outlasted the
//     transaction's attempts, and a transaction Firestore closed before it
//     finished ("Transaction is invalid or closed", "Transaction lock
//     timeout"), whose writes then may or may not have been applied.
//   - DeadlineExceeded and Canceled: the caller's deadline passed, or it
//     gave up.
//
// Domain errors pass as they are; any other error stays a kioku fault
// (Internal).
func Wrap(err error) error {
	if err == nil {
		return nil
	}
	var fe *fault.Error
	switch {
	case errors.As(err, &fe):
		return err
	case errors.Is(err, ErrUnreachable):
		return fault.Wrap(fault.Unavailable, err, "Firestore is unavailable; retry later")
	case errors.Is(err, ErrOutcomeUnknown):
		return fault.Wrap(fault.Unavailable, err, "Firestore did not confirm the write; retry it with the same ids (an append with the same event id is stored once)")
	}
	switch status.Code(err) {
	case codes.Aborted:
		return fault.Wrap(fault.Aborted, err, "too much contention; retry")
	case codes.Unavailable, codes.ResourceExhausted:
		return fault.Wrap(fault.Unavailable, err, "Firestore is unavailable; retry later")
	case codes.Internal, codes.Unknown, codes.DataLoss:
		if _, ok := status.FromError(err); ok {
			return fault.Wrap(fault.Unavailable, err, "Firestore failed; retry with the same ids")
		}
	case codes.InvalidArgument, codes.FailedPrecondition:
		if closedTransaction(err) {
			return fault.Wrap(fault.Aborted, err, "Firestore closed the transaction before it finished; retry with the same ids")
		}
	case codes.DeadlineExceeded:
		return fault.Wrap(fault.DeadlineExceeded, err, "Firestore did not answer in time")
	case codes.Canceled:
		return fault.Wrap(fault.Canceled, err, "canceled")
	}
	return err
}

// closedTransaction reports whether err is Firestore's refusal of a
// transaction it no longer holds open (expired, rolled back, or already
// committed by an earlier sending): the only such refusals it makes, of
// codes it also uses for malformed requests, name the transaction.
func closedTransaction(err error) bool {
	msg := strings.ToLower(status.Convert(err).Message())
	return strings.Contains(msg, "transaction") && (strings.Contains(msg, "invalid") || strings.Contains(msg, "closed") || strings.Contains(msg, "expired")) ||
		strings.Contains(msg, "from closed") // the emulator's "Can't swap from CLOSED to ACTIVE"
}

// DeleteDocs deletes documents with a bulk writer and waits for every
// deletion; a document already gone is no error.
func DeleteDocs(ctx context.Context, c *firestore.Client, refs []*firestore.DocumentRef) error {
	if len(refs) == 0 {
		return nil
	}
	bw := c.BulkWriter(ctx)
	jobs := make([]*firestore.BulkWriterJob, 0, len(refs))
	for _, ref := range refs {
		j, err := bw.Delete(ref)
		if err != nil {
			bw.End()
			return err
		}
		jobs = append(jobs, j)
	}
	bw.End()
	for _, j := range jobs {
		if _, err := j.Results(); err != nil && !IsNotFound(err) {
			return Wrap(err)
		}
	}
	return nil
}

// DeleteQuery deletes the documents a query returns, reading only their
// names, and returns how many.
func DeleteQuery(ctx context.Context, c *firestore.Client, q firestore.Query) (int, error) {
	snaps, err := q.Select().Documents(ctx).GetAll()
	if err != nil {
		return 0, Wrap(err)
	}
	refs := make([]*firestore.DocumentRef, len(snaps))
	for i, snap := range snaps {
		refs[i] = snap.Ref
	}
	return len(refs), DeleteDocs(ctx, c, refs)
}

// PageByID reads the documents of q in document id order: at most limit,
// after the id after ("" from the first). The stores' export listings
// use it.
func PageByID(ctx context.Context, q firestore.Query, after string, limit int) ([]*firestore.DocumentSnapshot, error) {
	q = q.OrderBy(firestore.DocumentID, firestore.Asc).Limit(limit)
	if after != "" {
		q = q.StartAfter(after)
	}
	snaps, err := q.Documents(ctx).GetAll()
	return snaps, Wrap(err)
}

// EachDoc calls f with each document of it in order, until the documents
// end or f returns an error, and stops the iterator. An error of the query
// is wrapped (Wrap); f's passes as it is.
func EachDoc(it *firestore.DocumentIterator, f func(*firestore.DocumentSnapshot) error) error {
	defer it.Stop()
	for {
		snap, err := it.Next()
		if err == iterator.Done {
			return nil
		}
		if err != nil {
			return Wrap(err)
		}
		if err := f(snap); err != nil {
			return err
		}
	}
}

// Apps lists the app documents under the root collection (which exist only
// as the parents of their collections) in order after the cursor, at most
// limit; no index is needed. The stores' export listings use it.
func Apps(ctx context.Context, c *firestore.Client, root, after string, limit int) ([]string, error) {
	refs, err := c.Collection(root).DocumentRefs(ctx).GetAll()
	if err != nil {
		return nil, Wrap(err)
	}
	var out []string
	for _, r := range refs {
		if r.ID > after {
			out = append(out, r.ID)
		}
	}
	slices.Sort(out)
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// PageIDs is PageByID's documents' ids: a listing of names such as a
// store's users, whose documents hold nothing the listing needs.
func PageIDs(ctx context.Context, q firestore.Query, after string, limit int) ([]string, error) {
	snaps, err := PageByID(ctx, q, after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(snaps))
	for i, snap := range snaps {
		out[i] = snap.Ref.ID
	}
	return out, nil
}

// AppsWith is Apps for a store that has data in only some of the apps
// under the root: those that has reports, in order after the cursor, at
// most limit.
func AppsWith(ctx context.Context, c *firestore.Client, root, after string, limit int, has func(app string) (bool, error)) ([]string, error) {
	var out []string
	for len(out) < limit {
		page, err := Apps(ctx, c, root, after, limit)
		if err != nil || len(page) == 0 {
			return out, err
		}
		for _, app := range page {
			ok, err := has(app)
			if err != nil {
				return nil, err
			}
			if ok && len(out) < limit {
				out = append(out, app)
			}
		}
		after = page[len(page)-1]
	}
	return out, nil
}

// RevisionsBelow reads the revisions in revs (documents with a number
// field): those numbered below before (all when it is 0), newest first,
// at most limit.
func RevisionsBelow(ctx context.Context, revs *firestore.CollectionRef, before int64, limit int) ([]*firestore.DocumentSnapshot, error) {
	q := revs.OrderBy("number", firestore.Desc).Limit(limit)
	if before > 0 {
		q = q.Where("number", "<", before)
	}
	snaps, err := q.Documents(ctx).GetAll()
	return snaps, Wrap(err)
}

// WithSub returns the references of the documents of snaps, each after
// those of its collection named sub: what deletes them with what they
// hold, in an order that leaves no orphan when it stops part way.
func WithSub(ctx context.Context, snaps []*firestore.DocumentSnapshot, sub string) ([]*firestore.DocumentRef, error) {
	var refs []*firestore.DocumentRef
	for _, snap := range snaps {
		below, err := snap.Ref.Collection(sub).DocumentRefs(ctx).GetAll()
		if err != nil {
			return nil, Wrap(err)
		}
		refs = append(append(refs, below...), snap.Ref)
	}
	return refs, nil
}
