// Package memstore is a store of the jobs engine's operations that keeps
// everything in memory, behind one mutex: the smallest complete backend of
// jobs.Store, for tests and programs that need no files.
//
// An operation is kept as a durable store reads it back: written in its
// stored form (jobs.MarshalOperation, which refuses what no store could
// keep) and decoded from it, so times are in UTC to the nanosecond; reads
// return copies, so no caller shares one with the store. Every query scans
// all operations: a store for tens of thousands of operations, not for a
// server's queue.
//
// A store of a domain that completes operations in its own writes (the
// memory bank's in-memory store) shares the store's mutex (NewLocked) and
// applies the updates with its writes (PrepareUpdates), so that both
// commit at once.
package memstore

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/resource"
)

// Store is an in-memory store of operations. New returns one; it is safe
// for concurrent use.
type Store struct {
	mu  *sync.Mutex
	ops map[opKey]*jobs.Operation
}

var _ jobs.Store = (*Store)(nil)

// opKey names an operation: ids are unique in an app.
type opKey struct{ app, id string }

func keyOf(op *jobs.Operation) opKey { return opKey{op.App, op.ID} }

// New returns an empty store.
func New() *Store { return NewLocked(new(sync.Mutex)) }

// NewLocked returns an empty store whose operations mu guards: the mutex
// of a store that keeps its own data under it too and updates operations
// in its writes with PrepareUpdates.
func NewLocked(mu *sync.Mutex) *Store { return &Store{mu: mu, ops: map[opKey]*jobs.Operation{}} }

// stored returns op as a durable store reads it back: through its stored
// form.
func stored(op *jobs.Operation) (*jobs.Operation, error) {
	b, err := jobs.MarshalOperation(op)
	if err != nil {
		return nil, err
	}
	return jobs.UnmarshalOperation(op.App, op.ID, b)
}

// CreateOperation implements jobs.Store.
func (s *Store) CreateOperation(_ context.Context, op *jobs.Operation) error {
	st, err := stored(op)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ops[keyOf(op)] != nil {
		return fault.New(fault.AlreadyExists, "operation %s already exists", op.Name())
	}
	s.ops[keyOf(op)] = st
	return nil
}

// GetOperation implements jobs.Store.
func (s *Store) GetOperation(_ context.Context, app, id string) (*jobs.Operation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	op := s.ops[opKey{app, id}]
	if op == nil {
		return nil, fault.NotFoundf("operation %s not found", resource.OperationName(app, id))
	}
	return op.Clone(), nil
}

// find returns copies of the operations keep selects, sorted by order, at
// most limit.
func (s *Store) find(keep func(*jobs.Operation) bool, order func(a, b *jobs.Operation) int, limit int) []*jobs.Operation {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.selectLocked(keep, order, limit)
	for i, op := range out {
		out[i] = op.Clone()
	}
	return out
}

// selectLocked returns the operations keep selects, sorted by order, at
// most limit, with the mutex held: the stored ones, not copies.
func (s *Store) selectLocked(keep func(*jobs.Operation) bool, order func(a, b *jobs.Operation) int, limit int) []*jobs.Operation {
	var out []*jobs.Operation
	for _, op := range s.ops {
		if keep(op) {
			out = append(out, op)
		}
	}
	slices.SortFunc(out, order)
	return out[:min(len(out), max(limit, 0))]
}

// count counts the operations keep selects, up to limit.
func (s *Store) count(keep func(*jobs.Operation) bool, limit int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, op := range s.ops {
		if n < limit && keep(op) {
			n++
		}
	}
	return n
}

// newestFirst orders operations by create time, then id, both descending.
func newestFirst(a, b *jobs.Operation) int {
	return cmp.Or(b.CreateTime.Compare(a.CreateTime), strings.Compare(b.ID, a.ID))
}

// byClaimTime orders operations by claim time, then app and id.
func byClaimTime(a, b *jobs.Operation) int {
	return cmp.Or(a.ClaimTime().Compare(b.ClaimTime()), strings.Compare(a.App, b.App), strings.Compare(a.ID, b.ID))
}

// ListOperations implements jobs.Store.
func (s *Store) ListOperations(_ context.Context, q jobs.Query) ([]*jobs.Operation, error) {
	return s.find(func(op *jobs.Operation) bool {
		if op.App != q.App || len(q.States) > 0 && !slices.Contains(q.States, op.State) {
			return false
		}
		return q.AfterID == "" || newestFirst(op, &jobs.Operation{CreateTime: q.AfterCreate, ID: q.AfterID}) > 0
	}, newestFirst, q.Limit), nil
}

// QueuedOperations implements jobs.Store.
func (s *Store) QueuedOperations(_ context.Context, limit int) ([]*jobs.Operation, error) {
	return s.find(func(op *jobs.Operation) bool { return !op.State.Done() }, byClaimTime, limit), nil
}

// PendingOperations implements jobs.Store.
func (s *Store) PendingOperations(_ context.Context, app, key, kind string, now time.Time, limit int) ([]*jobs.Operation, error) {
	return s.find(func(op *jobs.Operation) bool {
		return op.App == app && op.Key == key && op.Kind == kind && op.State == jobs.Pending && !op.ClaimTime().After(now)
	}, byClaimTime, limit), nil
}

// CountPending implements jobs.Store.
func (s *Store) CountPending(_ context.Context, app, key string, limit int) (int, error) {
	return s.count(func(op *jobs.Operation) bool {
		return op.App == app && op.State == jobs.Pending && (key == "" || op.Key == key)
	}, limit), nil
}

// CountPendingOfOwner implements jobs.Store.
func (s *Store) CountPendingOfOwner(_ context.Context, app, owner string, limit int) (int, error) {
	return s.count(func(op *jobs.Operation) bool {
		return op.App == app && op.Owner == owner && op.State == jobs.Pending
	}, limit), nil
}

// CountRunningOfOwner implements jobs.Store.
func (s *Store) CountRunningOfOwner(_ context.Context, app, owner string, limit int) (int, error) {
	return s.count(func(op *jobs.Operation) bool {
		return op.App == app && op.Owner == owner && op.State == jobs.Running
	}, limit), nil
}

// UpdateOperations implements jobs.Store: every expectation is checked
// under the mutex before anything is written.
func (s *Store) UpdateOperations(_ context.Context, now time.Time, updates []jobs.Update) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	commit, err := s.PrepareUpdates(now, updates)
	if err != nil {
		return err
	}
	commit()
	return nil
}

// PrepareUpdates checks updates at now as UpdateOperations does, with the
// mutex held by the caller, and returns what writes them, which the caller
// calls with the mutex still held: nothing is written when an update
// fails its checks, or when the caller drops commit (one of its own checks
// failed).
func (s *Store) PrepareUpdates(now time.Time, updates []jobs.Update) (commit func(), err error) {
	next := make([]*jobs.Operation, len(updates))
	for i, u := range updates {
		if next[i], err = stored(u.Op); err != nil {
			return nil, err
		}
	}
	for _, u := range updates {
		if err := s.check(now, u, updates); err != nil {
			return nil, err
		}
	}
	return func() {
		for _, op := range next {
			s.ops[keyOf(op)] = op
		}
	}, nil
}

// check checks an update's expectations, with the mutex held: its
// operation in the expected state at the expected attempt, and for a
// claim, no other operation of its key (other than those of the same
// write) running under a lease live at now.
func (s *Store) check(now time.Time, u jobs.Update, updates []jobs.Update) error {
	cur := s.ops[keyOf(u.Op)]
	if cur == nil {
		return fault.NotFoundf("operation %s not found", u.Op.Name())
	}
	if cur.State != u.ExpectState || cur.Attempt != u.ExpectAttempt {
		return fault.New(fault.Aborted, "operation %s is %s at attempt %d, not %s at attempt %d", u.Op.Name(), cur.State, cur.Attempt, u.ExpectState, u.ExpectAttempt)
	}
	if !u.ClaimKey || u.Op.Key == "" {
		return nil
	}
	for k, op := range s.ops {
		if k.app != u.Op.App || op.Key != u.Op.Key || op.State != jobs.Running || !op.LeaseExpiry.After(now) {
			continue
		}
		if !slices.ContainsFunc(updates, func(o jobs.Update) bool { return keyOf(o.Op) == k }) {
			return fault.New(fault.Aborted, "key %q of app %s has a running operation (%s)", u.Op.Key, u.Op.App, op.ID)
		}
	}
	return nil
}

// DeleteFinishedOperations implements jobs.Store: the earliest created
// first.
func (s *Store) DeleteFinishedOperations(_ context.Context, before time.Time, limit int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.selectLocked(func(op *jobs.Operation) bool { return op.State.Done() && op.CreateTime.Before(before) }, func(a, b *jobs.Operation) int { return newestFirst(b, a) }, limit)
	for _, op := range old {
		delete(s.ops, keyOf(op))
	}
	return len(old), nil
}

// DeleteOperations implements jobs.Store.
func (s *Store) DeleteOperations(_ context.Context, app string, ids []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		delete(s.ops, opKey{app, id})
	}
	return nil
}
