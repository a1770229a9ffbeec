// Package memstore is a core memory block store that keeps everything in
// memory, behind one mutex: the smallest complete backend of blocks.Store,
// for tests and programs that need no files. Blocks and revisions are
// copied in and out, so no caller shares one with the store, and times
// are kept in UTC to the nanosecond, as the durable stores keep them.
package memstore

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/kioku-ai/kioku/blocks"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/unixnano"
)

// Store is an in-memory block store. New returns one; it is safe for
// concurrent use.
type Store struct {
	mu     sync.Mutex
	blocks map[blocks.Key]*entry
}

var _ blocks.Store = (*Store)(nil)

// entry is a stored block and its revisions by number.
type entry struct {
	block blocks.Block
	revs  map[int64]blocks.Revision
}

// New returns an empty store.
func New() *Store { return &Store{blocks: map[blocks.Key]*entry{}} }

// norm returns b with its times as a store keeps them.
func norm(b blocks.Block) blocks.Block {
	b.CreateTime = unixnano.Time(unixnano.From(b.CreateTime))
	b.UpdateTime = unixnano.Time(unixnano.From(b.UpdateTime))
	return b
}

// normRev returns r with its time as a store keeps it.
func normRev(r blocks.Revision) blocks.Revision {
	r.CreateTime = unixnano.Time(unixnano.From(r.CreateTime))
	return r
}

// count returns how many blocks the owner of k has.
func (s *Store) count(k blocks.Key) int {
	n := 0
	for o := range s.blocks {
		if o.App == k.App && o.User == k.User {
			n++
		}
	}
	return n
}

// Get implements blocks.Store.
func (s *Store) Get(_ context.Context, k blocks.Key) (*blocks.Block, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.blocks[k]
	if e == nil {
		return nil, fault.NotFoundf("block %s not found", k.Name())
	}
	b := e.block
	return &b, nil
}

// List implements blocks.Store.
func (s *Store) List(_ context.Context, app, user, after string, limit int) ([]*blocks.Block, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*blocks.Block
	for k, e := range s.blocks {
		if k.App == app && k.User == user && k.Label > after {
			b := e.block
			out = append(out, &b)
		}
	}
	slices.SortFunc(out, func(a, b *blocks.Block) int { return strings.Compare(a.Label, b.Label) })
	return out[:min(len(out), limit)], nil
}

// Write implements blocks.Store.
func (s *Store) Write(_ context.Context, b *blocks.Block, rev *blocks.Revision, expected int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.blocks[b.Key]
	var at int64
	if e != nil {
		at = e.block.Revision
	}
	if at != expected {
		return fault.New(fault.Aborted, "block %s changed meanwhile (revision %d, expected %d)", b.Name(), at, expected)
	}
	if e == nil {
		if n := s.count(b.Key); n >= blocks.MaxBlocks {
			return fault.New(fault.ResourceExhausted, "%s has %d blocks, the limit; delete one to create %q", b.Owner(), n, b.Label)
		}
		e = &entry{block: norm(*b), revs: map[int64]blocks.Revision{}}
		s.blocks[b.Key] = e
	} else {
		created := e.block.CreateTime
		e.block = norm(*b)
		e.block.CreateTime = created
	}
	if _, ok := e.revs[rev.Number]; !ok {
		e.revs[rev.Number] = normRev(*rev)
	}
	for n := range e.revs {
		if n <= rev.Number-blocks.MaxRevisions {
			delete(e.revs, n)
		}
	}
	return nil
}

// Delete implements blocks.Store.
func (s *Store) Delete(_ context.Context, k blocks.Key) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.blocks[k] == nil {
		return fault.NotFoundf("block %s not found", k.Name())
	}
	delete(s.blocks, k)
	return nil
}

// ListRevisions implements blocks.Store.
func (s *Store) ListRevisions(_ context.Context, k blocks.Key, before int64, limit int) ([]*blocks.Revision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.blocks[k]
	if e == nil {
		return nil, nil
	}
	var out []*blocks.Revision
	for n, r := range e.revs {
		if before <= 0 || n < before {
			r := r
			out = append(out, &r)
		}
	}
	slices.SortFunc(out, func(a, b *blocks.Revision) int { return cmp.Compare(b.Number, a.Number) })
	return out[:min(len(out), limit)], nil
}

// Apps implements blocks.Store.
func (s *Store) Apps(_ context.Context, after string, limit int) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return firsts(s.blocks, func(k blocks.Key) (string, bool) { return k.App, k.App > after }, limit), nil
}

// Users implements blocks.Store.
func (s *Store) Users(_ context.Context, app, after string, limit int) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return firsts(s.blocks, func(k blocks.Key) (string, bool) { return k.User, k.App == app && k.User > after }, limit), nil
}

// firsts returns the first limit distinct ids pick selects of the keys,
// in ascending order.
func firsts(m map[blocks.Key]*entry, pick func(blocks.Key) (string, bool), limit int) []string {
	seen := map[string]bool{}
	var out []string
	for k := range m {
		if id, ok := pick(k); ok && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out[:min(len(out), limit)]
}

// Import implements blocks.Store.
func (s *Store) Import(_ context.Context, b *blocks.Block, revs []*blocks.Revision) (bool, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.blocks[b.Key]
	if e == nil {
		if n := s.count(b.Key); n >= blocks.MaxBlocks {
			return false, 0, fault.New(fault.ResourceExhausted, "%s has %d blocks in this store, the limit; the archive brings %q", b.Owner(), n, b.Label)
		}
	} else {
		cur := e.block
		if err := blocks.CheckImport(&cur, b); err != nil {
			return false, 0, err
		}
	}
	if e == nil {
		e = &entry{revs: map[int64]blocks.Revision{}}
	}
	n := 0
	for _, r := range revs {
		if _, ok := e.revs[r.Number]; ok || r.Number <= b.Revision-blocks.MaxRevisions {
			continue
		}
		e.revs[r.Number] = normRev(*r)
		n++
	}
	if s.blocks[b.Key] != nil && e.block.Revision == b.Revision {
		return false, n, nil
	}
	e.block = norm(*b)
	s.blocks[b.Key] = e
	return true, n, nil
}

// DeleteUser implements blocks.Store.
func (s *Store) DeleteUser(_ context.Context, app, user string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k := range s.blocks {
		if k.App == app && k.User == user {
			delete(s.blocks, k)
			n++
		}
	}
	return n, nil
}
