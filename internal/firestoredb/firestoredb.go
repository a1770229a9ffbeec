// Package firestoredb holds what kioku's Firestore stores share: the
// mapping of Firestore's errors to the domain's kinds, bulk deletion, the
// listing of apps for export, and a Meter that counts the documents they
// read, write and delete (Firestore's billing units).
package firestoredb

import (
	"context"
	"errors"
	"slices"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kioku-ai/kioku/fault"
)

// IsNotFound reports whether err is Firestore's NOT_FOUND.
func IsNotFound(err error) bool { return status.Code(err) == codes.NotFound }

// Wrap turns Firestore's errors into the domain's: contention that
// outlasted the retries is Aborted, an unreachable or overloaded service
// Unavailable, a missed deadline DeadlineExceeded. Domain errors pass as
// they are.
func Wrap(err error) error {
	if err == nil {
		return nil
	}
	var fe *fault.Error
	if errors.As(err, &fe) {
		return err
	}
	switch status.Code(err) {
	case codes.Aborted:
		return fault.Wrap(fault.Aborted, err, "too much contention; retry")
	case codes.Unavailable, codes.ResourceExhausted:
		return fault.Wrap(fault.Unavailable, err, "Firestore is unavailable")
	case codes.DeadlineExceeded:
		return fault.Wrap(fault.DeadlineExceeded, err, "Firestore did not answer in time")
	case codes.Canceled:
		return fault.Wrap(fault.Canceled, err, "canceled")
	}
	return err
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
