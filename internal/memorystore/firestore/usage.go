package firestore

import (
	"context"

	"cloud.google.com/go/firestore"
	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
)

// usageRef is the document of an app's usage of one day.
func (s *Store) usageRef(app, day string) *firestore.DocumentRef {
	return s.app(app).Collection("kioku_usage").Doc(day)
}

type usageDoc struct {
	Generations int64 `firestore:"generations"`
	Tokens      int64 `firestore:"tokens"`
}

// AddUsage implements memorydriver.UsageMeter: a transaction that reads
// when a bound applies, else one of server-side increments only (no
// read, so servers counting tokens at once take no lock of each other's).
// The increments go in a transaction all the same: a write that waits
// for a bounded add's lock can be ABORTED, which means it was not
// applied, and the transaction tries it again.
func (s *Store) AddUsage(ctx context.Context, app, day string, add, below memorytype.Usage) (memorytype.Usage, bool, error) {
	ref := s.usageRef(app, day)
	if below == (memorytype.Usage{}) {
		if err := s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			return tx.Set(ref, map[string]any{
				"generations": firestore.Increment(add.Generations),
				"tokens":      firestore.Increment(add.Tokens),
			}, firestore.MergeAll)
		}, s.txn...); err != nil {
			return memorytype.Usage{}, false, firestoredb.Wrap(err)
		}
		u, err := s.GetUsage(ctx, app, day)
		return u, err == nil, err
	}
	var u memorytype.Usage
	var added bool
	err := s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(ref)
		if err != nil && !firestoredb.IsNotFound(err) {
			return err
		}
		u, added = memorytype.Usage{}, false
		if err == nil {
			var d usageDoc
			if err := snap.DataTo(&d); err != nil {
				return err
			}
			u = memorytype.Usage{Generations: d.Generations, Tokens: d.Tokens}
		}
		if below.Generations > 0 && u.Generations >= below.Generations || below.Tokens > 0 && u.Tokens >= below.Tokens {
			return nil
		}
		u.Generations += add.Generations
		u.Tokens += add.Tokens
		added = true
		return tx.Set(ref, usageDoc{Generations: u.Generations, Tokens: u.Tokens})
	}, s.txn...)
	if err != nil {
		return memorytype.Usage{}, false, firestoredb.Wrap(err)
	}
	return u, added, nil
}

// GetUsage implements memorydriver.UsageMeter.
func (s *Store) GetUsage(ctx context.Context, app, day string) (memorytype.Usage, error) {
	snap, err := s.usageRef(app, day).Get(ctx)
	if firestoredb.IsNotFound(err) {
		return memorytype.Usage{}, nil
	}
	if err != nil {
		return memorytype.Usage{}, firestoredb.Wrap(err)
	}
	var d usageDoc
	if err := snap.DataTo(&d); err != nil {
		return memorytype.Usage{}, err
	}
	return memorytype.Usage{Generations: d.Generations, Tokens: d.Tokens}, nil
}
