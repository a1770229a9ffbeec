// Package memstore is a memory files store that keeps everything in
// memory, behind one mutex: the smallest complete backend of
// memoryfiles.Store, for tests and programs that need no files.
//
// Each user is a usage, files by id and revisions by file and number,
// present once a write stored the usage (as the durable stores keep a
// usage row or document) and gone with DeleteUser. Files and revisions
// are copied in and out, so no caller shares one with the store, and
// times are kept in UTC to the nanosecond, as the durable stores keep
// them. A write checks everything before it changes anything: the mutex
// is its transaction.
package memstore

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/memoryfiles"
	"github.com/kioku-ai/kioku/resource"
)

// Store is an in-memory memory files store. New returns one; it is safe
// for concurrent use.
type Store struct {
	mu    sync.Mutex
	users map[userKey]*user
}

var _ memoryfiles.Store = (*Store)(nil)

type userKey struct{ app, user string }

// user is what the store keeps of one user.
type user struct {
	usage memoryfiles.Usage
	files map[string]*memoryfiles.File               // by id, content included
	revs  map[string]map[int64]*memoryfiles.Revision // by file id, then number
}

func newUser() *user {
	return &user{files: map[string]*memoryfiles.File{}, revs: map[string]map[int64]*memoryfiles.Revision{}}
}

// New returns an empty store.
func New() *Store { return &Store{users: map[userKey]*user{}} }

// normFile returns a copy of f with its times as a store keeps them.
func normFile(f *memoryfiles.File) *memoryfiles.File {
	c := *f
	c.CreateTime = unixnano.Time(unixnano.From(f.CreateTime))
	c.UpdateTime = unixnano.Time(unixnano.From(f.UpdateTime))
	return &c
}

// normRev returns a copy of r with its time as a store keeps it.
func normRev(r *memoryfiles.Revision) *memoryfiles.Revision {
	c := *r
	c.CreateTime = unixnano.Time(unixnano.From(r.CreateTime))
	return &c
}

// copyFile returns a copy of a stored file, with its content or without.
func copyFile(f *memoryfiles.File, content bool) *memoryfiles.File {
	c := *f
	if !content {
		c.Content = ""
	}
	return &c
}

// get returns a user's record, nil when none is stored; the mutex is
// held.
func (s *Store) get(app, name string) *user { return s.users[userKey{app, name}] }

// Usage implements memoryfiles.Store.
func (s *Store) Usage(_ context.Context, app, name string) (memoryfiles.Usage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.get(app, name); u != nil {
		return u.usage, nil
	}
	return memoryfiles.Usage{}, nil
}

// FindFile implements memoryfiles.Store.
func (s *Store) FindFile(_ context.Context, app, name, path string) (*memoryfiles.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.get(app, name).at(path, ""); f != nil {
		return copyFile(f, true), nil
	}
	return nil, fault.NotFoundf("no memory file at %s", path)
}

// at returns the user's file at path that is not deleted, other than the
// file of id except, nil when none (or no user).
func (u *user) at(path, except string) *memoryfiles.File {
	if u == nil {
		return nil
	}
	for _, f := range u.files {
		if f.Path == path && !f.Deleted && f.ID != except {
			return f
		}
	}
	return nil
}

// GetFile implements memoryfiles.Store.
func (s *Store) GetFile(_ context.Context, app, name, id string) (*memoryfiles.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.get(app, name); u != nil && u.files[id] != nil {
		return copyFile(u.files[id], true), nil
	}
	return nil, fault.NotFoundf("memory file %s not found", id)
}

// files returns copies of the user's files keep selects, sorted by order,
// at most limit, with their content or without; the mutex is held.
func (s *Store) files(app, name string, keep func(*memoryfiles.File) bool, order func(a, b *memoryfiles.File) int, limit int, content bool) []*memoryfiles.File {
	u := s.get(app, name)
	if u == nil {
		return nil
	}
	var out []*memoryfiles.File
	for _, f := range u.files {
		if keep(f) {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, order)
	out = out[:min(len(out), max(limit, 0))]
	for i, f := range out {
		out[i] = copyFile(f, content)
	}
	return out
}

// byPath orders files by path, then id.
func byPath(a, b *memoryfiles.File) int {
	return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(a.ID, b.ID))
}

// ListFiles implements memoryfiles.Store.
func (s *Store) ListFiles(_ context.Context, q memoryfiles.ListQuery) ([]*memoryfiles.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.files(q.App, q.User, func(f *memoryfiles.File) bool {
		switch {
		case f.Path != q.Dir && !strings.HasPrefix(f.Path, q.Dir+"/"):
			return false
		case f.Deleted && !q.ShowDeleted:
			return false
		}
		return q.AfterPath == "" || byPath(f, &memoryfiles.File{Path: q.AfterPath, ID: q.AfterID}) > 0
	}, byPath, q.Limit, q.Content), nil
}

// OldestDeleted implements memoryfiles.Store.
func (s *Store) OldestDeleted(_ context.Context, app, name string, limit int) ([]*memoryfiles.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.files(app, name, func(f *memoryfiles.File) bool { return f.Deleted }, func(a, b *memoryfiles.File) int {
		return cmp.Or(a.UpdateTime.Compare(b.UpdateTime), strings.Compare(a.ID, b.ID))
	}, limit, false), nil
}

// ListRevisions implements memoryfiles.Store.
func (s *Store) ListRevisions(_ context.Context, app, name, id string, before int64, limit int) ([]*memoryfiles.Revision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.get(app, name)
	if u == nil {
		return nil, nil
	}
	var out []*memoryfiles.Revision
	for n, r := range u.revs[id] {
		if before <= 0 || n < before {
			c := *r
			out = append(out, &c)
		}
	}
	slices.SortFunc(out, func(a, b *memoryfiles.Revision) int { return cmp.Compare(b.Number, a.Number) })
	return out[:min(len(out), max(limit, 0))], nil
}

// addRevision stores r unless the user has it already, and reports
// whether it did.
func (u *user) addRevision(r *memoryfiles.Revision) bool {
	revs := u.revs[r.FileID]
	if revs == nil {
		revs = map[int64]*memoryfiles.Revision{}
		u.revs[r.FileID] = revs
	}
	if revs[r.Number] != nil {
		return false
	}
	revs[r.Number] = normRev(r)
	return true
}

// dropRevision removes a revision of a file, if the user has it.
func (u *user) dropRevision(id string, n int64) {
	delete(u.revs[id], n)
	if len(u.revs[id]) == 0 {
		delete(u.revs, id)
	}
}

// Write implements memoryfiles.Store.
func (s *Store) Write(_ context.Context, w *memoryfiles.Write) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.get(w.App, w.User)
	var version int64
	if u != nil {
		version = u.usage.Version
	}
	if version != w.Version {
		return fault.New(fault.Aborted, "the memory files of user %s of app %s changed meanwhile (version %d, expected %d)", w.User, w.App, version, w.Version)
	}
	whole := map[string]bool{} // the files written whole before
	for _, c := range w.Files {
		if !c.Content && !whole[c.File.ID] && (u == nil || u.files[c.File.ID] == nil) {
			return fault.New(fault.Internal, "memory file %s: no such file to update", c.File.Name())
		}
		whole[c.File.ID] = whole[c.File.ID] || c.Content
	}
	if u == nil {
		u = newUser()
		s.users[userKey{w.App, w.User}] = u
	}
	u.usage = w.Usage
	u.usage.Version = w.Version + 1
	for _, c := range w.Files {
		f := normFile(c.File)
		if old := u.files[f.ID]; !c.Content {
			f.Content, f.CreateTime = old.Content, old.CreateTime
		}
		u.files[f.ID] = f
	}
	for _, r := range w.Revisions {
		u.addRevision(r)
		u.dropRevision(r.FileID, r.Number-memoryfiles.MaxRevisions)
	}
	for _, r := range w.Drop {
		u.dropRevision(r.FileID, r.Number)
	}
	for _, f := range w.Purge {
		delete(u.files, f.ID)
		delete(u.revs, f.ID)
	}
	return nil
}

// Apps implements memoryfiles.Store.
func (s *Store) Apps(_ context.Context, after string, limit int) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids(func(k userKey) (string, bool) { return k.app, k.app > after }, limit), nil
}

// Users implements memoryfiles.Store.
func (s *Store) Users(_ context.Context, app, after string, limit int) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids(func(k userKey) (string, bool) { return k.user, k.app == app && k.user > after }, limit), nil
}

// ids returns the first limit distinct ids pick selects of the users'
// keys, in ascending order; the mutex is held.
func (s *Store) ids(pick func(userKey) (string, bool), limit int) []string {
	seen := map[string]bool{}
	var out []string
	for k := range s.users {
		if id, ok := pick(k); ok && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out[:min(len(out), max(limit, 0))]
}

// ImportFile implements memoryfiles.Store.
func (s *Store) ImportFile(_ context.Context, f *memoryfiles.File, revs []*memoryfiles.Revision) (bool, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.get(f.App, f.User)
	var cur *memoryfiles.File
	if u != nil {
		cur = u.files[f.ID]
	}
	switch {
	case cur == nil:
	case !cur.CreateTime.Equal(f.CreateTime):
		return false, 0, fault.New(fault.AlreadyExists, "another memory file %s (created %v) is in this store", f.Name(), cur.CreateTime)
	case cur.Revision > f.Revision:
		return false, 0, fault.New(fault.FailedPrecondition, "memory file %s moved on in this store (revision %d) past the archive's (revision %d)", f.Name(), cur.Revision, f.Revision)
	}
	if other := u.at(f.Path, f.ID); other != nil && !f.Deleted {
		return false, 0, fault.New(fault.AlreadyExists, "memory file %s is at %s in this store; the archive has %s there", resource.MemoryFileName(f.App, f.User, other.ID), f.Path, f.Name())
	}
	stored := u != nil
	if !stored {
		u = newUser()
	}
	usage := u.usage
	var fresh []*memoryfiles.Revision // the revisions written
	for _, r := range revs {
		if r.Number > f.Revision-memoryfiles.MaxRevisions && u.addRevision(r) {
			fresh = append(fresh, r)
		}
	}
	usage = memoryfiles.Account(usage, nil, nil, fresh)
	wrote := cur == nil || cur.Revision < f.Revision
	if wrote {
		usage = memoryfiles.Account(usage, cur, f, nil)
		u.files[f.ID] = normFile(f)
	}
	if !wrote && len(fresh) == 0 {
		return false, 0, nil
	}
	u.usage = usage
	u.usage.Version++
	if !stored {
		s.users[userKey{f.App, f.User}] = u
	}
	return wrote, len(fresh), nil
}

// DeleteUser implements memoryfiles.Store.
func (s *Store) DeleteUser(_ context.Context, app, name string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.get(app, name)
	if u == nil {
		return 0, nil
	}
	delete(s.users, userKey{app, name})
	return len(u.files), nil
}
