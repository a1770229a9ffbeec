package firestore

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/record"
)

// DeleteExpiredRevisions implements memorydriver.Store.
func (s *Store) DeleteExpiredRevisions(ctx context.Context, now time.Time, limit int) (int, error) {
	return firestoredb.DeleteQuery(ctx, s.c, s.c.CollectionGroup("kioku_revisions").Where("expire_ns", ">", 0).Where("expire_ns", "<=", now.UnixNano()).Limit(limit))
}

// revisionDoc is a revision document.
type revisionDoc struct {
	Number   int64  `firestore:"number"`
	ExpireNS int64  `firestore:"expire_ns"`
	Body     string `firestore:"body"`
}

func revisionToDoc(r *memorytype.Revision) (*revisionDoc, error) {
	body, err := record.MarshalRevision(r)
	if err != nil {
		return nil, err
	}
	return &revisionDoc{Number: r.Number, ExpireNS: unixnano.From(r.ExpireTime), Body: string(body)}, nil
}

func revisionFromSnap(app, memoryID string, snap *firestore.DocumentSnapshot) (*memorytype.Revision, error) {
	var d revisionDoc
	if err := snap.DataTo(&d); err != nil {
		return nil, err
	}
	r, err := record.UnmarshalRevision(app, memoryID, d.Number, []byte(d.Body))
	if err != nil {
		return nil, err
	}
	// The expiry is a field of the document (queries filter on it); bodies
	// written before it was also in the body lack it.
	r.ExpireTime = unixnano.Time(d.ExpireNS)
	return r, nil
}

// ListRevisions implements memorydriver.Store.
func (s *Store) ListRevisions(ctx context.Context, app, memoryID string, before int64, limit int, now time.Time) ([]*memorytype.Revision, error) {
	q := s.memories(app).Doc(memoryID).Collection("kioku_revisions").OrderBy("number", firestore.Desc)
	if before > 0 {
		q = q.Where("number", "<", before)
	}
	var out []*memorytype.Revision
	for len(out) < limit {
		want := limit - len(out)
		snaps, err := q.Limit(want).Documents(ctx).GetAll()
		if err != nil {
			return nil, firestoredb.Wrap(err)
		}
		for _, snap := range snaps {
			r, err := revisionFromSnap(app, memoryID, snap)
			if err != nil {
				return nil, err
			}
			before = r.Number
			if r.ExpireTime.IsZero() || r.ExpireTime.After(now) {
				out = append(out, r)
			}
		}
		if len(snaps) < want {
			break
		}
		q = s.memories(app).Doc(memoryID).Collection("kioku_revisions").OrderBy("number", firestore.Desc).Where("number", "<", before)
	}
	return out, nil
}

// GetRevision implements memorydriver.Store.
func (s *Store) GetRevision(ctx context.Context, app, memoryID string, number int64) (*memorytype.Revision, error) {
	snap, err := s.revisionRef(app, memoryID, number).Get(ctx)
	if firestoredb.IsNotFound(err) {
		return nil, fault.NotFoundf("revision %d of memory apps/%s/memories/%s not found", number, app, memoryID)
	}
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	return revisionFromSnap(app, memoryID, snap)
}

func (s *Store) configRef(app string) *firestore.DocumentRef {
	return s.app(app).Collection("kioku_config").Doc("memory_bank")
}

// GetConfig implements memorydriver.Store.
func (s *Store) GetConfig(ctx context.Context, app string) (*appconfig.Config, error) {
	snap, err := s.configRef(app).Get(ctx)
	if firestoredb.IsNotFound(err) {
		return &appconfig.Config{App: app}, nil
	}
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	return decodeConfig(app, snap)
}

func decodeConfig(app string, snap *firestore.DocumentSnapshot) (*appconfig.Config, error) {
	body, err := snap.DataAt("body")
	if err != nil {
		return nil, err
	}
	return record.UnmarshalConfig(app, []byte(body.(string)))
}

// ListConfigs implements memorydriver.Store. It lists the app documents
// (which may exist only as parents of collections) and reads their
// configuration documents: no index is needed.
func (s *Store) ListConfigs(ctx context.Context) ([]*appconfig.Config, error) {
	apps, err := s.c.Collection(s.root).DocumentRefs(ctx).GetAll()
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	refs := make([]*firestore.DocumentRef, len(apps))
	for i, a := range apps {
		refs[i] = s.configRef(a.ID)
	}
	var out []*appconfig.Config
	for start := 0; start < len(refs); start += 300 {
		snaps, err := s.c.GetAll(ctx, refs[start:min(start+300, len(refs))])
		if err != nil {
			return nil, firestoredb.Wrap(err)
		}
		for i, snap := range snaps {
			if !snap.Exists() {
				continue
			}
			c, err := decodeConfig(apps[start+i].ID, snap)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// PutConfig implements memorydriver.Store.
func (s *Store) PutConfig(ctx context.Context, c *appconfig.Config) error {
	body, err := record.MarshalConfig(c)
	if err != nil {
		return err
	}
	_, err = s.configRef(c.App).Set(ctx, map[string]any{"body": string(body)})
	return firestoredb.Wrap(err)
}

// opDoc is an operation document: the operation's stored form (body)
// with what queries need beside it.
