package firestore

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/record"
)

// dispatchRef is the document of an app's webhook dispatch: the lease
// and the change feed's cursor deliveries were made up to.
func (s *Store) dispatchRef(app string) *firestore.DocumentRef {
	return s.app(app).Collection("kioku_feed").Doc("webhooks")
}

func (s *Store) deliveries(app string) *firestore.CollectionRef {
	return s.app(app).Collection("kioku_webhook_deliveries")
}

type dispatchDoc struct {
	Owner    string `firestore:"owner"`
	ExpiryNS int64  `firestore:"expiry_ns"`
	Cursor   int64  `firestore:"cursor"`
}

// deliveryDoc is a delivery: its id and state for the queries, the
// record in body.
type deliveryDoc struct {
	ID    string `firestore:"id"`
	State string `firestore:"state"`
	Body  string `firestore:"body"`
}

func readDispatch(snap *firestore.DocumentSnapshot, err error) (dispatchDoc, error) {
	var d dispatchDoc
	if firestoredb.IsNotFound(err) {
		return d, nil
	}
	if err != nil {
		return d, err
	}
	return d, snap.DataTo(&d)
}

// ClaimWebhookLease implements memorydriver.Webhooks in one
// transaction on the dispatch document.
func (s *Store) ClaimWebhookLease(ctx context.Context, app, owner string, now, expiry time.Time) (bool, int64, error) {
	var (
		held   bool
		cursor int64
	)
	err := s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		d, err := readDispatch(tx.Get(s.dispatchRef(app)))
		if err != nil {
			return err
		}
		cursor = d.Cursor
		if held = d.Owner == "" || d.Owner == owner || d.ExpiryNS <= unixnano.From(now); !held {
			return nil
		}
		return tx.Set(s.dispatchRef(app), map[string]any{"owner": owner, "expiry_ns": unixnano.From(expiry)}, firestore.MergeAll)
	}, s.txn...)
	return held, cursor, firestoredb.Wrap(err)
}

// AddDeliveries implements memorydriver.Webhooks in one transaction:
// the dispatch document checked and moved, the deliveries not stored yet
// created.
func (s *Store) AddDeliveries(ctx context.Context, app, owner string, now time.Time, from, to int64, ds []*memorytype.Delivery) error {
	docs := make([]deliveryDoc, len(ds))
	for i, d := range ds {
		b, err := record.MarshalDelivery(d)
		if err != nil {
			return err
		}
		docs[i] = deliveryDoc{ID: d.ID, State: d.State.String(), Body: string(b)}
	}
	err := s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		d, err := readDispatch(tx.Get(s.dispatchRef(app)))
		if err != nil {
			return err
		}
		if d.Owner != owner || d.ExpiryNS <= unixnano.From(now) || d.Cursor != from {
			return fault.New(fault.Aborted, "the webhook dispatch of app %s moved on (lease or cursor)", app)
		}
		refs := make([]*firestore.DocumentRef, len(docs))
		for i, doc := range docs {
			refs[i] = s.deliveries(app).Doc(doc.ID)
		}
		snaps, err := tx.GetAll(refs)
		if err != nil {
			return err
		}
		for i, snap := range snaps {
			if snap.Exists() {
				continue
			}
			if err := tx.Create(refs[i], docs[i]); err != nil {
				return err
			}
		}
		return tx.Set(s.dispatchRef(app), map[string]any{"cursor": to}, firestore.MergeAll)
	}, s.txn...)
	return firestoredb.Wrap(err)
}

func deliveriesOf(app string, snaps []*firestore.DocumentSnapshot) ([]*memorytype.Delivery, error) {
	out := make([]*memorytype.Delivery, 0, len(snaps))
	for _, snap := range snaps {
		var doc deliveryDoc
		if err := snap.DataTo(&doc); err != nil {
			return nil, err
		}
		d, err := record.UnmarshalDelivery(app, snap.Ref.ID, []byte(doc.Body))
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// PendingDeliveries implements memorydriver.Webhooks (the composite
// index on (state, id)).
func (s *Store) PendingDeliveries(ctx context.Context, app string, limit int) ([]*memorytype.Delivery, error) {
	snaps, err := s.deliveries(app).Where("state", "==", memorytype.DeliveryPending.String()).
		OrderBy("id", firestore.Asc).Limit(limit).Documents(ctx).GetAll()
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	return deliveriesOf(app, snaps)
}

// PutDelivery implements memorydriver.Webhooks.
func (s *Store) PutDelivery(ctx context.Context, d *memorytype.Delivery) error {
	b, err := record.MarshalDelivery(d)
	if err != nil {
		return err
	}
	_, err = s.deliveries(d.App).Doc(d.ID).Update(ctx, []firestore.Update{
		{Path: "state", Value: d.State.String()}, {Path: "body", Value: string(b)},
	})
	if firestoredb.IsNotFound(err) {
		return fault.NotFoundf("webhook delivery %s not found", d.Name())
	}
	return firestoredb.Wrap(err)
}

// GetDelivery implements memorydriver.Webhooks.
func (s *Store) GetDelivery(ctx context.Context, app, id string) (*memorytype.Delivery, error) {
	snap, err := s.deliveries(app).Doc(id).Get(ctx)
	if firestoredb.IsNotFound(err) {
		return nil, fault.NotFoundf("webhook delivery %s not found", memorytype.DeliveryName(app, id))
	}
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	ds, err := deliveriesOf(app, []*firestore.DocumentSnapshot{snap})
	if err != nil {
		return nil, err
	}
	return ds[0], nil
}

// ListDeliveries implements memorydriver.Webhooks (with a state: the
// composite index on (state, id descending)).
func (s *Store) ListDeliveries(ctx context.Context, q memorydriver.DeliveryQuery) ([]*memorytype.Delivery, error) {
	query := s.deliveries(q.App).Query
	if q.State != memorytype.DeliveryUnspecified {
		query = query.Where("state", "==", q.State.String())
	}
	if q.BeforeID != "" {
		query = query.Where("id", "<", q.BeforeID)
	}
	snaps, err := query.OrderBy("id", firestore.Desc).Limit(q.Limit).Documents(ctx).GetAll()
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	return deliveriesOf(q.App, snaps)
}

// DeleteDeliveries implements memorydriver.Webhooks.
func (s *Store) DeleteDeliveries(ctx context.Context, app string, ids []string) error {
	refs := make([]*firestore.DocumentRef, len(ids))
	for i, id := range ids {
		refs[i] = s.deliveries(app).Doc(id)
	}
	return firestoredb.DeleteDocs(ctx, s.c, refs)
}
