// Package firestore is the core memory block store for deployments of
// several kioku servers, in Cloud Firestore (native mode).
//
// # Document layout
//
// Under the root collection (kioku_apps by default), beside the other
// stores' collections:
//
//	kioku_apps/{app}/kioku_blocks/{label}
//	    an app's shared block: value, description, limit, read_only,
//	    revision, create_ns, update_ns
//	kioku_apps/{app}/kioku_block_users/{user}
//	    an empty document, so that the users with blocks can be listed
//	kioku_apps/{app}/kioku_block_users/{user}/kioku_blocks/{label}
//	    a user's block, as above
//	.../kioku_blocks/{label}/kioku_revisions/{number, 20 digits}
//	    number, action (UPDATED, APPENDED, REPLACED, REWRITTEN), value,
//	    description, limit, read_only, create_ns, sources (the sessions
//	    a rewrite was written from: session, event_ids; absent for none)
//
// A Write is one transaction: it reads the block, refuses with Aborted
// when its revision moved on, counts the owner's blocks when it creates
// one (at most MaxBlocks documents), and writes the block, its revision
// and the deletion of the revision that falls out of the kept ones. It
// needs no composite index.
package firestore

import (
	"context"
	"fmt"

	"cloud.google.com/go/firestore"

	"github.com/kioku-ai/kioku/blocks"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/internal/unixnano"
)

// Options configures a Store: its root collection and its transactions'
// tries.
type Options = firestoredb.StoreOptions

// Store is the Firestore block store.
type Store struct {
	c    *firestore.Client
	root string
	txn  []firestore.TransactionOption
}

var _ blocks.Store = (*Store)(nil)

// New returns a Store on a Firestore client.
func New(c *firestore.Client, o Options) *Store {
	root, txn := o.Resolve()
	return &Store{c: c, root: root, txn: txn}
}

func (s *Store) userRef(app, user string) *firestore.DocumentRef {
	return s.c.Collection(s.root).Doc(app).Collection("kioku_block_users").Doc(user)
}

// blocksOf returns the collection of an owner's blocks (user empty: the
// app's).
func (s *Store) blocksOf(app, user string) *firestore.CollectionRef {
	if user == "" {
		return s.c.Collection(s.root).Doc(app).Collection("kioku_blocks")
	}
	return s.userRef(app, user).Collection("kioku_blocks")
}

func (s *Store) blockRef(k blocks.Key) *firestore.DocumentRef {
	return s.blocksOf(k.App, k.User).Doc(k.Label)
}

func (s *Store) revisionRef(k blocks.Key, n int64) *firestore.DocumentRef {
	return s.blockRef(k).Collection("kioku_revisions").Doc(fmt.Sprintf("%020d", n))
}

// blockDoc is a block document.
type blockDoc struct {
	Value       string `firestore:"value"`
	Description string `firestore:"description"`
	Limit       int    `firestore:"limit"`
	ReadOnly    bool   `firestore:"read_only"`
	Revision    int64  `firestore:"revision"`
	CreateNS    int64  `firestore:"create_ns"`
	UpdateNS    int64  `firestore:"update_ns"`
}

// revisionDoc is a revision document.
type revisionDoc struct {
	Number      int64       `firestore:"number"`
	Action      string      `firestore:"action"`
	Value       string      `firestore:"value"`
	Description string      `firestore:"description"`
	Limit       int         `firestore:"limit"`
	ReadOnly    bool        `firestore:"read_only"`
	CreateNS    int64       `firestore:"create_ns"`
	Sources     []sourceDoc `firestore:"sources,omitempty"`
}

// sourceDoc is a revision's source.
type sourceDoc struct {
	Session  string   `firestore:"session"`
	EventIDs []string `firestore:"event_ids,omitempty"`
}

func blockOf(app, user string, snap *firestore.DocumentSnapshot) (*blocks.Block, error) {
	var d blockDoc
	if err := snap.DataTo(&d); err != nil {
		return nil, fmt.Errorf("decoding block %s: %w", snap.Ref.ID, err)
	}
	return &blocks.Block{
		Key: blocks.Key{App: app, User: user, Label: snap.Ref.ID}, Value: d.Value, Description: d.Description, Limit: d.Limit,
		ReadOnly: d.ReadOnly, Revision: d.Revision, CreateTime: unixnano.Time(d.CreateNS), UpdateTime: unixnano.Time(d.UpdateNS),
	}, nil
}

// Get implements blocks.Store.
func (s *Store) Get(ctx context.Context, k blocks.Key) (*blocks.Block, error) {
	snap, err := s.blockRef(k).Get(ctx)
	if firestoredb.IsNotFound(err) {
		return nil, fault.NotFoundf("block %s not found", k.Name())
	}
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	return blockOf(k.App, k.User, snap)
}

// List implements blocks.Store.
func (s *Store) List(ctx context.Context, app, user, after string, limit int) ([]*blocks.Block, error) {
	snaps, err := firestoredb.PageByID(ctx, s.blocksOf(app, user).Query, after, limit)
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	out := make([]*blocks.Block, 0, len(snaps))
	for _, snap := range snaps {
		b, err := blockOf(app, user, snap)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// Write implements blocks.Store.
func (s *Store) Write(ctx context.Context, b *blocks.Block, rev *blocks.Revision, expected int64) error {
	err := s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		var at int64
		snap, err := tx.Get(s.blockRef(b.Key))
		switch {
		case firestoredb.IsNotFound(err):
		case err != nil:
			return err
		default:
			cur, err := blockOf(b.App, b.User, snap)
			if err != nil {
				return err
			}
			at = cur.Revision
		}
		if at != expected {
			return fault.New(fault.Aborted, "block %s changed meanwhile (revision %d, expected %d)", b.Name(), at, expected)
		}
		if at == 0 {
			owned, err := tx.Documents(s.blocksOf(b.App, b.User).Select().Limit(blocks.MaxBlocks)).GetAll()
			if err != nil {
				return err
			}
			if len(owned) >= blocks.MaxBlocks {
				return fault.New(fault.ResourceExhausted, "%s has %d blocks, the limit; delete one to create %q", b.Owner(), len(owned), b.Label)
			}
			if b.User != "" {
				if err := tx.Set(s.userRef(b.App, b.User), map[string]any{}); err != nil {
					return err
				}
			}
		}
		if err := tx.Set(s.blockRef(b.Key), toBlockDoc(b)); err != nil {
			return err
		}
		if err := tx.Set(s.revisionRef(rev.Key, rev.Number), toRevisionDoc(rev)); err != nil {
			return err
		}
		if old := rev.Number - blocks.MaxRevisions; old > 0 {
			return tx.Delete(s.revisionRef(rev.Key, old))
		}
		return nil
	}, s.txn...)
	return firestoredb.Wrap(err)
}

func toBlockDoc(b *blocks.Block) *blockDoc {
	return &blockDoc{Value: b.Value, Description: b.Description, Limit: b.Limit, ReadOnly: b.ReadOnly, Revision: b.Revision,
		CreateNS: unixnano.From(b.CreateTime), UpdateNS: unixnano.From(b.UpdateTime)}
}

func toRevisionDoc(r *blocks.Revision) *revisionDoc {
	d := &revisionDoc{Number: r.Number, Action: r.Action.String(), Value: r.Value, Description: r.Description,
		Limit: r.Limit, ReadOnly: r.ReadOnly, CreateNS: unixnano.From(r.CreateTime)}
	for _, src := range r.Sources {
		d.Sources = append(d.Sources, sourceDoc{Session: src.Session, EventIDs: src.EventIDs})
	}
	return d
}

// Delete implements blocks.Store: the block in a transaction that finds
// it, then its revisions.
func (s *Store) Delete(ctx context.Context, k blocks.Key) error {
	err := s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		if _, err := tx.Get(s.blockRef(k)); err != nil {
			if firestoredb.IsNotFound(err) {
				return fault.NotFoundf("block %s not found", k.Name())
			}
			return err
		}
		return tx.Delete(s.blockRef(k))
	}, s.txn...)
	if err != nil {
		return firestoredb.Wrap(err)
	}
	_, err = firestoredb.DeleteQuery(ctx, s.c, s.blockRef(k).Collection("kioku_revisions").Query)
	return err
}

// ListRevisions implements blocks.Store.
func (s *Store) ListRevisions(ctx context.Context, k blocks.Key, before int64, limit int) ([]*blocks.Revision, error) {
	snaps, err := firestoredb.RevisionsBelow(ctx, s.blockRef(k).Collection("kioku_revisions"), before, limit)
	if err != nil {
		return nil, err
	}
	out := make([]*blocks.Revision, 0, len(snaps))
	for _, snap := range snaps {
		var d revisionDoc
		if err := snap.DataTo(&d); err != nil {
			return nil, fmt.Errorf("decoding a revision of block %s: %w", k.Name(), err)
		}
		a, err := blocks.ParseAction(d.Action)
		if err != nil {
			return nil, err
		}
		r := &blocks.Revision{Key: k, Number: d.Number, Action: a, Value: d.Value, Description: d.Description,
			Limit: d.Limit, ReadOnly: d.ReadOnly, CreateTime: unixnano.Time(d.CreateNS)}
		for _, src := range d.Sources {
			r.Sources = append(r.Sources, blocks.Source{Session: src.Session, EventIDs: src.EventIDs})
		}
		out = append(out, r)
	}
	return out, nil
}

// Apps implements blocks.Store: the app documents that have shared
// blocks or users with blocks.
func (s *Store) Apps(ctx context.Context, after string, limit int) ([]string, error) {
	return firestoredb.AppsWith(ctx, s.c, s.root, after, limit, func(app string) (bool, error) {
		users, err := s.Users(ctx, app, "", 1)
		if err != nil || len(users) > 0 {
			return len(users) > 0, err
		}
		shared, err := s.List(ctx, app, "", "", 1)
		return len(shared) > 0, err
	})
}

// Users implements blocks.Store.
func (s *Store) Users(ctx context.Context, app, after string, limit int) ([]string, error) {
	return firestoredb.PageIDs(ctx, s.c.Collection(s.root).Doc(app).Collection("kioku_block_users").Select(), after, limit)
}

// Import implements blocks.Store: one transaction that reads the block,
// the owner's blocks when it creates one, and the revisions to write.
func (s *Store) Import(ctx context.Context, b *blocks.Block, revs []*blocks.Revision) (wrote bool, n int, err error) {
	err = s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		wrote, n = false, 0
		var cur *blocks.Block
		snap, err := tx.Get(s.blockRef(b.Key))
		switch {
		case firestoredb.IsNotFound(err):
			owned, err := tx.Documents(s.blocksOf(b.App, b.User).Select().Limit(blocks.MaxBlocks)).GetAll()
			if err != nil {
				return err
			}
			if len(owned) >= blocks.MaxBlocks {
				return fault.New(fault.ResourceExhausted, "%s has %d blocks in this store, the limit; the archive brings %q", b.Owner(), len(owned), b.Label)
			}
		case err != nil:
			return err
		default:
			if cur, err = blockOf(b.App, b.User, snap); err != nil {
				return err
			}
			if err := blocks.CheckImport(cur, b); err != nil {
				return err
			}
		}
		var fresh []*blocks.Revision
		for _, r := range revs {
			if r.Number <= b.Revision-blocks.MaxRevisions {
				continue
			}
			_, err := tx.Get(s.revisionRef(r.Key, r.Number))
			switch {
			case firestoredb.IsNotFound(err):
				fresh = append(fresh, r)
			case err != nil:
				return err
			}
		}
		for _, r := range fresh {
			if err := tx.Set(s.revisionRef(r.Key, r.Number), toRevisionDoc(r)); err != nil {
				return err
			}
		}
		n = len(fresh)
		if cur != nil && cur.Revision == b.Revision {
			return nil
		}
		wrote = true
		if b.User != "" {
			if err := tx.Set(s.userRef(b.App, b.User), map[string]any{}); err != nil {
				return err
			}
		}
		return tx.Set(s.blockRef(b.Key), toBlockDoc(b))
	}, s.txn...)
	return wrote, n, firestoredb.Wrap(err)
}

// DeleteUser implements blocks.Store: each block's revisions, then the
// blocks, then the user's document.
func (s *Store) DeleteUser(ctx context.Context, app, user string) (int, error) {
	snaps, err := s.blocksOf(app, user).Select().Documents(ctx).GetAll()
	if err != nil {
		return 0, firestoredb.Wrap(err)
	}
	refs, err := firestoredb.WithSub(ctx, snaps, "kioku_revisions")
	if err != nil {
		return 0, err
	}
	if err := firestoredb.DeleteDocs(ctx, s.c, append(refs, s.userRef(app, user))); err != nil {
		return 0, err
	}
	return len(snaps), nil
}
