// Package firestore is the memory files store for deployments of several
// kioku servers, in Cloud Firestore (native mode).
//
// # Document layout
//
// Under the root collection (kioku_apps by default), beside the sessions'
// and the memory bank's collections:
//
//	kioku_apps/{app}/kioku_memory_file_users/{user}
//	    files, deleted, bytes, history, version: the user's memoryfiles.Usage,
//	    whose version orders the user's writes
//	kioku_apps/{app}/kioku_memory_file_users/{user}/kioku_memory_files/{file}
//	    path, content, size, revision, create_ns, update_ns, deleted
//	kioku_apps/{app}/kioku_memory_file_users/{user}/kioku_memory_files/{file}/kioku_revisions/{number, 20 digits}
//	    number, action (CREATED, EDITED, RENAMED, DELETED), path, content,
//	    size, create_ns
//
// A Write is one transaction: it reads the user's usage document, refuses
// with Aborted when its version moved on, and writes the usage, the files
// (a file whose content did not change is updated field by field), the
// revisions, the deletion of each file's revision that falls out of the
// kept ones and of the revisions dropped (Write.Drop), and the purged
// deleted files with their revisions (whose numbers the file's revision
// gives, so no query is needed). For a usage document written before the
// history field was kept, Usage counts the history from the documents
// (countHistory), and the user's next write stores it. A file is
// read outside the transaction: the usage version covers it (see
// memoryfiles.Store).
//
// # Indexes
//
// firestore.indexes.json at the repository root lists the two composite
// indexes production needs (the emulator needs none), on the
// kioku_memory_files collection: (deleted, path) for the listings of the
// files not deleted and the lookup of a path, and (deleted, update_ns) for
// the oldest deleted files.
package firestore

import (
	"context"
	"fmt"

	"cloud.google.com/go/firestore"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/memoryfiles"
	"github.com/kioku-ai/kioku/resource"
)

// Options configures a Store: its root collection and its transactions'
// tries.
type Options = firestoredb.StoreOptions

// Store is the Firestore memory files store.
type Store struct {
	c    *firestore.Client
	root string
	txn  []firestore.TransactionOption
}

var _ memoryfiles.Store = (*Store)(nil)

// New returns a Store on a Firestore client.
func New(c *firestore.Client, o Options) *Store {
	root, txn := o.Resolve()
	return &Store{c: c, root: root, txn: txn}
}

func (s *Store) users(app string) *firestore.CollectionRef {
	return s.c.Collection(s.root).Doc(app).Collection("kioku_memory_file_users")
}

func (s *Store) usageRef(app, user string) *firestore.DocumentRef { return s.users(app).Doc(user) }

func (s *Store) files(app, user string) *firestore.CollectionRef {
	return s.usageRef(app, user).Collection("kioku_memory_files")
}

func (s *Store) revisionRef(app, user, id string, n int64) *firestore.DocumentRef {
	return s.files(app, user).Doc(id).Collection("kioku_revisions").Doc(fmt.Sprintf("%020d", n))
}

// usageDoc is a user's usage document.
type usageDoc struct {
	Files   int   `firestore:"files"`
	Deleted int   `firestore:"deleted"`
	Bytes   int64 `firestore:"bytes"`
	History int64 `firestore:"history"`
	Version int64 `firestore:"version"`
}

// fileDoc is a file document.
type fileDoc struct {
	Path     string `firestore:"path"`
	Content  string `firestore:"content"`
	Size     int64  `firestore:"size"`
	Revision int64  `firestore:"revision"`
	CreateNS int64  `firestore:"create_ns"`
	UpdateNS int64  `firestore:"update_ns"`
	Deleted  bool   `firestore:"deleted"`
}

// revisionDoc is a revision document.
type revisionDoc struct {
	Number   int64  `firestore:"number"`
	Action   string `firestore:"action"`
	Path     string `firestore:"path"`
	Content  string `firestore:"content"`
	Size     int64  `firestore:"size"`
	CreateNS int64  `firestore:"create_ns"`
}

func toFileDoc(f *memoryfiles.File) *fileDoc {
	return &fileDoc{Path: f.Path, Content: f.Content, Size: f.Size, Revision: f.Revision,
		CreateNS: unixnano.From(f.CreateTime), UpdateNS: unixnano.From(f.UpdateTime), Deleted: f.Deleted}
}

func fileOf(app, user string, snap *firestore.DocumentSnapshot) (*memoryfiles.File, error) {
	var d fileDoc
	if err := snap.DataTo(&d); err != nil {
		return nil, fmt.Errorf("decoding memory file %s: %w", snap.Ref.ID, err)
	}
	return &memoryfiles.File{App: app, User: user, ID: snap.Ref.ID, Path: d.Path, Content: d.Content, Size: d.Size,
		Revision: d.Revision, CreateTime: unixnano.Time(d.CreateNS), UpdateTime: unixnano.Time(d.UpdateNS), Deleted: d.Deleted}, nil
}

// Usage implements memoryfiles.Store.
func (s *Store) Usage(ctx context.Context, app, user string) (memoryfiles.Usage, error) {
	snap, err := s.usageRef(app, user).Get(ctx)
	u, err := usageOf(snap, err)
	if err == nil && !keptHistory(snap) {
		u.History, err = s.countHistory(ctx, app, user)
	}
	return u, err
}

// usageOf reads a usage document's snapshot (zero when it does not
// exist).
func usageOf(snap *firestore.DocumentSnapshot, err error) (memoryfiles.Usage, error) {
	if firestoredb.IsNotFound(err) {
		return memoryfiles.Usage{}, nil
	}
	if err != nil {
		return memoryfiles.Usage{}, firestoredb.Wrap(err)
	}
	var d usageDoc
	if err := snap.DataTo(&d); err != nil {
		return memoryfiles.Usage{}, err
	}
	return memoryfiles.Usage{Files: d.Files, Deleted: d.Deleted, Bytes: d.Bytes, History: d.History, Version: d.Version}, nil
}

// FindFile implements memoryfiles.Store.
func (s *Store) FindFile(ctx context.Context, app, user, path string) (*memoryfiles.File, error) {
	snaps, err := s.files(app, user).Where("deleted", "==", false).Where("path", "==", path).Limit(1).Documents(ctx).GetAll()
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	if len(snaps) == 0 {
		return nil, fault.NotFoundf("no memory file at %s", path)
	}
	return fileOf(app, user, snaps[0])
}

// GetFile implements memoryfiles.Store.
func (s *Store) GetFile(ctx context.Context, app, user, id string) (*memoryfiles.File, error) {
	snap, err := s.files(app, user).Doc(id).Get(ctx)
	if firestoredb.IsNotFound(err) {
		return nil, fault.NotFoundf("memory file %s not found", id)
	}
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	return fileOf(app, user, snap)
}

// ListFiles implements memoryfiles.Store: the files at Dir itself, then
// those below it (paths from Dir+"/" up to Dir+"0", the character after
// '/'), each in (path, id) order after the cursor.
func (s *Store) ListFiles(ctx context.Context, q memoryfiles.ListQuery) ([]*memoryfiles.File, error) {
	base := s.files(q.App, q.User).Query
	if !q.ShowDeleted {
		base = base.Where("deleted", "==", false)
	}
	if !q.Content {
		base = base.Select("path", "size", "revision", "create_ns", "update_ns", "deleted")
	}
	var out []*memoryfiles.File
	if q.Dir != memoryfiles.Root && q.AfterPath <= q.Dir {
		at := base.Where("path", "==", q.Dir).OrderBy(firestore.DocumentID, firestore.Asc).Limit(q.Limit)
		if q.AfterPath == q.Dir {
			at = at.StartAfter(q.AfterID)
		}
		page, err := s.query(ctx, q.App, q.User, at)
		if err != nil {
			return nil, err
		}
		out = page
	}
	if len(out) == q.Limit {
		return out, nil
	}
	below := base.Where("path", ">", q.Dir+"/").Where("path", "<", q.Dir+"0").
		OrderBy("path", firestore.Asc).OrderBy(firestore.DocumentID, firestore.Asc).Limit(q.Limit - len(out))
	if q.AfterPath > q.Dir {
		below = below.StartAfter(q.AfterPath, q.AfterID)
	}
	page, err := s.query(ctx, q.App, q.User, below)
	return append(out, page...), err
}

// query returns the files of a query.
func (s *Store) query(ctx context.Context, app, user string, q firestore.Query) ([]*memoryfiles.File, error) {
	snaps, err := q.Documents(ctx).GetAll()
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	out := make([]*memoryfiles.File, len(snaps))
	for i, snap := range snaps {
		if out[i], err = fileOf(app, user, snap); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// OldestDeleted implements memoryfiles.Store.
func (s *Store) OldestDeleted(ctx context.Context, app, user string, limit int) ([]*memoryfiles.File, error) {
	q := s.files(app, user).Where("deleted", "==", true).Select("path", "size", "revision", "create_ns", "update_ns", "deleted").
		OrderBy("update_ns", firestore.Asc).OrderBy(firestore.DocumentID, firestore.Asc).Limit(limit)
	return s.query(ctx, app, user, q)
}

// ListRevisions implements memoryfiles.Store.
func (s *Store) ListRevisions(ctx context.Context, app, user, id string, before int64, limit int) ([]*memoryfiles.Revision, error) {
	snaps, err := firestoredb.RevisionsBelow(ctx, s.files(app, user).Doc(id).Collection("kioku_revisions"), before, limit)
	if err != nil {
		return nil, err
	}
	out := make([]*memoryfiles.Revision, len(snaps))
	for i, snap := range snaps {
		var d revisionDoc
		if err := snap.DataTo(&d); err != nil {
			return nil, err
		}
		action, err := memoryfiles.ParseAction(d.Action)
		if err != nil {
			return nil, err
		}
		out[i] = &memoryfiles.Revision{App: app, User: user, FileID: id, Number: d.Number, Action: action, Path: d.Path,
			Content: d.Content, Size: d.Size, CreateTime: unixnano.Time(d.CreateNS)}
	}
	return out, nil
}

func toRevisionDoc(r *memoryfiles.Revision) *revisionDoc {
	return &revisionDoc{Number: r.Number, Action: r.Action.String(), Path: r.Path, Content: r.Content, Size: r.Size, CreateNS: unixnano.From(r.CreateTime)}
}

func toUsageDoc(u memoryfiles.Usage, version int64) *usageDoc {
	return &usageDoc{Files: u.Files, Deleted: u.Deleted, Bytes: u.Bytes, History: u.History, Version: version}
}

// Write implements memoryfiles.Store.
func (s *Store) Write(ctx context.Context, w *memoryfiles.Write) error {
	err := s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		cur, err := usageOf(tx.Get(s.usageRef(w.App, w.User)))
		if err != nil {
			return err
		}
		if cur.Version != w.Version {
			return fault.New(fault.Aborted, "the memory files of user %s of app %s changed meanwhile (version %d, expected %d)", w.User, w.App, cur.Version, w.Version)
		}
		if err := tx.Set(s.usageRef(w.App, w.User), toUsageDoc(w.Usage, w.Version+1)); err != nil {
			return err
		}
		for _, c := range w.Files {
			f, ref := c.File, s.files(w.App, w.User).Doc(c.File.ID)
			if c.Content {
				err = tx.Set(ref, toFileDoc(f))
			} else {
				err = tx.Update(ref, []firestore.Update{
					{Path: "path", Value: f.Path}, {Path: "size", Value: f.Size}, {Path: "revision", Value: f.Revision},
					{Path: "update_ns", Value: unixnano.From(f.UpdateTime)}, {Path: "deleted", Value: f.Deleted},
				})
			}
			if err != nil {
				return err
			}
		}
		for _, r := range w.Revisions {
			if err := tx.Set(s.revisionRef(w.App, w.User, r.FileID, r.Number), toRevisionDoc(r)); err != nil {
				return err
			}
			if old := r.Number - memoryfiles.MaxRevisions; old > 0 {
				if err := tx.Delete(s.revisionRef(w.App, w.User, r.FileID, old)); err != nil {
					return err
				}
			}
		}
		for _, r := range w.Drop {
			if err := tx.Delete(s.revisionRef(w.App, w.User, r.FileID, r.Number)); err != nil {
				return err
			}
		}
		for _, f := range w.Purge {
			if err := s.purge(tx, f); err != nil {
				return err
			}
		}
		return nil
	}, s.txn...)
	return firestoredb.Wrap(err)
}

// purge deletes a file and the revisions it keeps (the MaxRevisions up to
// its revision).
func (s *Store) purge(tx *firestore.Transaction, f *memoryfiles.File) error {
	for n := max(1, f.Revision-memoryfiles.MaxRevisions+1); n <= f.Revision; n++ {
		if err := tx.Delete(s.revisionRef(f.App, f.User, f.ID, n)); err != nil {
			return err
		}
	}
	return tx.Delete(s.files(f.App, f.User).Doc(f.ID))
}

// Apps implements memoryfiles.Store: the app documents under the root
// that have a user of memory files.
func (s *Store) Apps(ctx context.Context, after string, limit int) ([]string, error) {
	return firestoredb.AppsWith(ctx, s.c, s.root, after, limit, func(app string) (bool, error) {
		users, err := s.Users(ctx, app, "", 1)
		return len(users) > 0, err
	})
}

// Users implements memoryfiles.Store.
func (s *Store) Users(ctx context.Context, app, after string, limit int) ([]string, error) {
	return firestoredb.PageIDs(ctx, s.users(app).Select(), after, limit)
}

// ImportFile implements memoryfiles.Store: one transaction that reads the
// user's usage, the file and (for a file not deleted) the file at its
// path, then writes.
func (s *Store) ImportFile(ctx context.Context, f *memoryfiles.File, revs []*memoryfiles.Revision) (wrote bool, n int, err error) {
	ref := s.files(f.App, f.User).Doc(f.ID)
	err = s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		wrote, n = false, 0
		u, err := usageOf(tx.Get(s.usageRef(f.App, f.User)))
		if err != nil {
			return err
		}
		var cur *memoryfiles.File
		snap, err := tx.Get(ref)
		switch {
		case err == nil:
			if cur, err = fileOf(f.App, f.User, snap); err != nil {
				return err
			}
		case !firestoredb.IsNotFound(err):
			return err
		}
		switch {
		case cur == nil:
		case !cur.CreateTime.Equal(f.CreateTime):
			return fault.New(fault.AlreadyExists, "another memory file %s (created %v) is in this store", f.Name(), cur.CreateTime)
		case cur.Revision > f.Revision:
			return fault.New(fault.FailedPrecondition, "memory file %s moved on in this store (revision %d) past the archive's (revision %d)", f.Name(), cur.Revision, f.Revision)
		}
		if !f.Deleted {
			q := s.files(f.App, f.User).Where("deleted", "==", false).Where("path", "==", f.Path).Select().Limit(2)
			at, err := tx.Documents(q).GetAll()
			if err != nil {
				return err
			}
			for _, a := range at {
				if a.Ref.ID != f.ID {
					return fault.New(fault.AlreadyExists, "memory file %s is at %s in this store; the archive has %s there", resource.MemoryFileName(f.App, f.User, a.Ref.ID), f.Path, f.Name())
				}
			}
		}
		// Which revisions are new: those the store does not hold.
		var fresh []*memoryfiles.Revision
		for _, r := range revs {
			if r.Number <= f.Revision-memoryfiles.MaxRevisions {
				continue
			}
			if _, err := tx.Get(s.revisionRef(f.App, f.User, f.ID, r.Number)); firestoredb.IsNotFound(err) {
				fresh = append(fresh, r)
			} else if err != nil {
				return err
			}
		}
		u = memoryfiles.Account(u, nil, nil, fresh)
		if cur == nil || cur.Revision < f.Revision {
			u = memoryfiles.Account(u, cur, f, nil)
			if err := tx.Set(ref, toFileDoc(f)); err != nil {
				return err
			}
			wrote = true
		}
		for _, r := range fresh {
			if err := tx.Set(s.revisionRef(f.App, f.User, f.ID, r.Number), toRevisionDoc(r)); err != nil {
				return err
			}
		}
		n = len(fresh)
		if !wrote && n == 0 {
			return nil
		}
		return tx.Set(s.usageRef(f.App, f.User), toUsageDoc(u, u.Version+1))
	}, s.txn...)
	return wrote, n, firestoredb.Wrap(err)
}

// deletePage is how many files DeleteUser removes at a time.
const deletePage = 100

// DeleteUser implements memoryfiles.Store: the files page by page, each
// with its revisions, then the usage document; again while a file is
// left (one written meanwhile).
func (s *Store) DeleteUser(ctx context.Context, app, user string) (int, error) {
	n := 0
	for {
		snaps, err := s.files(app, user).Select().Limit(deletePage).Documents(ctx).GetAll()
		if err != nil {
			return n, firestoredb.Wrap(err)
		}
		if len(snaps) == 0 {
			if err := firestoredb.DeleteDocs(ctx, s.c, []*firestore.DocumentRef{s.usageRef(app, user)}); err != nil {
				return n, err
			}
			left, err := s.files(app, user).Select().Limit(1).Documents(ctx).GetAll()
			if err != nil || len(left) == 0 {
				return n, firestoredb.Wrap(err)
			}
			continue
		}
		refs, err := firestoredb.WithSub(ctx, snaps, "kioku_revisions")
		if err != nil {
			return n, err
		}
		if err := firestoredb.DeleteDocs(ctx, s.c, refs); err != nil {
			return n, err
		}
		n += len(snaps)
	}
}
