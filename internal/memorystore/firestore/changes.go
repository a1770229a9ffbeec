package firestore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/record"
)

// feedRef is the document of an app's change feed: the cursor of its
// latest change and the highest one the retention sweep removed.
func (s *Store) feedRef(app string) *firestore.DocumentRef {
	return s.app(app).Collection("kioku_feed").Doc("changes")
}

func (s *Store) changes(app string) *firestore.CollectionRef {
	return s.app(app).Collection("kioku_changes")
}

// feedDoc is the document of an app's change feed.
type feedDoc struct {
	Last  int64 `firestore:"last"`
	Swept int64 `firestore:"swept"`
}

// changeDoc is a change of the feed.
type changeDoc struct {
	Cursor   int64  `firestore:"cursor"`
	ScopeKey string `firestore:"scope_key"`
	MemoryID string `firestore:"memory_id"`
	TimeNS   int64  `firestore:"time_ns"`
	Body     string `firestore:"body"`
}

func readFeed(snap *firestore.DocumentSnapshot, err error) (feedDoc, error) {
	var d feedDoc
	if firestoredb.IsNotFound(err) {
		return d, nil
	}
	if err != nil {
		return d, err
	}
	return d, snap.DataTo(&d)
}

// lockFeeds takes this process's locks on the feed documents of apps (in
// order, so that two writes cannot deadlock): the writes of one app's
// changes from one server queue instead of conflicting on the document,
// which every one of them reads and raises. The function it returns gives
// them back.
func (s *Store) lockFeeds(ctx context.Context, apps ...string) (func(), error) {
	return s.feeds.Lock(ctx, "this server's earlier writes to the app's change feed", slices.Compact(slices.Sorted(slices.Values(apps)))...)
}

// readFeedFor reads the app's feed document in a Write's transaction
// when the Write has changes to append (nil otherwise): every Write that
// changes an app's memories reads and writes this one document, which
// serialises them per app (Firestore sustains about one write a second
// per document under contention; see the package doc).
func (s *Store) readFeedFor(tx *firestore.Transaction, w *memorydriver.Write) (*feedDoc, error) {
	if len(w.ChangeRecords(0)) == 0 {
		return nil, nil
	}
	d, err := readFeed(tx.Get(s.feedRef(w.App)))
	return &d, err
}

// appendChanges writes a Write's changes and its app's raised cursor, in
// the Write's transaction, after readFeedFor.
func (s *Store) appendChanges(tx *firestore.Transaction, w *memorydriver.Write, feed *feedDoc) error {
	if feed == nil {
		return nil
	}
	recs := w.ChangeRecords(feed.Last)
	for _, c := range recs {
		body, err := record.MarshalChange(c)
		if err != nil {
			return err
		}
		d := changeDoc{Cursor: c.Cursor, ScopeKey: c.Scope.Key(), MemoryID: c.MemoryID, TimeNS: unixnano.From(c.Time), Body: string(body)}
		if err := tx.Create(s.changes(w.App).Doc(fmt.Sprintf("%020d", c.Cursor)), d); err != nil {
			return err
		}
	}
	feed.Last = recs[len(recs)-1].Cursor
	return tx.Set(s.feedRef(w.App), map[string]any{"last": feed.Last}, firestore.MergeAll)
}

// ListChanges implements memorydriver.ChangeFeed: in one read-only
// transaction (one snapshot), the feed's document and a query on the
// cursor (and scope key, with the composite index on (scope_key,
// cursor)).
func (s *Store) ListChanges(ctx context.Context, q memorydriver.ChangeQuery) (*memorytype.ChangePage, error) {
	var p *memorytype.ChangePage
	err := s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		p = &memorytype.ChangePage{}
		d, err := readFeed(tx.Get(s.feedRef(q.App)))
		if err != nil {
			return err
		}
		p.Last, p.Swept = d.Last, d.Swept
		if q.Limit <= 0 {
			return nil
		}
		query := s.changes(q.App).Query
		if q.ScopeKey != "" {
			query = query.Where("scope_key", "==", q.ScopeKey)
		}
		snaps, err := tx.Documents(query.Where("cursor", ">", q.After).OrderBy("cursor", firestore.Asc).Limit(q.Limit)).GetAll()
		if err != nil {
			return err
		}
		for _, snap := range snaps {
			var d changeDoc
			if err := snap.DataTo(&d); err != nil {
				return err
			}
			c, err := record.UnmarshalChange(q.App, d.Cursor, []byte(d.Body))
			if err != nil {
				return err
			}
			p.Changes = append(p.Changes, c)
		}
		return nil
	}, firestore.ReadOnly)
	return p, firestoredb.Wrap(err)
}

// DeleteExpiredChanges implements memorydriver.ChangeFeed: a collection
// group query on time_ns, then per app one transaction that deletes its
// changes found and raises its swept cursor.
func (s *Store) DeleteExpiredChanges(ctx context.Context, now time.Time, limit int) (int, error) {
	snaps, err := s.c.CollectionGroup("kioku_changes").Where("time_ns", "<=", unixnano.From(now.Add(-memorydriver.ChangeRetention))).
		OrderBy("time_ns", firestore.Asc).Limit(limit).Documents(ctx).GetAll()
	if err != nil {
		return 0, firestoredb.Wrap(err)
	}
	byApp := map[string][]*firestore.DocumentSnapshot{}
	for _, snap := range snaps {
		if s.ours(snap.Ref) {
			app := snap.Ref.Parent.Parent.ID
			byApp[app] = append(byApp[app], snap)
		}
	}
	n := 0
	for app, old := range byApp {
		unlock, err := s.lockFeeds(ctx, app)
		if err != nil {
			return n, err
		}
		err = s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			feed, err := readFeed(tx.Get(s.feedRef(app)))
			if err != nil {
				return err
			}
			for _, snap := range old {
				v, _ := snap.DataAt("cursor")
				cursor, _ := v.(int64)
				feed.Swept = max(feed.Swept, cursor)
				if err := tx.Delete(snap.Ref); err != nil {
					return err
				}
			}
			return tx.Set(s.feedRef(app), map[string]any{"swept": feed.Swept}, firestore.MergeAll)
		}, s.txn...)
		unlock()
		if err != nil {
			return n, firestoredb.Wrap(err)
		}
		n += len(old)
	}
	return n, nil
}
