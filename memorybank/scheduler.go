package memorybank

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/kioku-ai/kioku/fault"
)

// coalesceMax is the most operations of one scope claimed together.
const coalesceMax = 8

// Run runs this process's share of the memory bank's background work until
// ctx is done: Workers operation workers, the expiry sweeper, re-embedding
// of memories whose vectors come from another embedder, and the idle
// generation trigger.
func (s *Service) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range s.cfg.Workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				n, err := s.RunOnce(ctx)
				if err != nil && ctx.Err() == nil {
					s.log.WarnContext(ctx, "memory bank worker", "error", err)
				}
				if n > 0 {
					continue
				}
				t := time.NewTimer(s.cfg.PollInterval)
				select {
				case <-ctx.Done():
				case <-s.wake:
				case <-t.C:
				}
				t.Stop()
			}
		})
	}
	wg.Go(func() { s.maintain(ctx) })
	wg.Wait()
}

// RunOnce claims a batch of operations and runs it. It returns how many
// operations it claimed.
func (s *Service) RunOnce(ctx context.Context) (int, error) {
	ops, err := s.store.ClaimOperations(ctx, Claim{Owner: s.cfg.WorkerID, Now: s.now(), Lease: s.cfg.Lease, Max: coalesceMax, MaxAttempts: s.cfg.MaxAttempts})
	if err != nil || len(ops) == 0 {
		return 0, err
	}
	for _, group := range compatibleGroups(ops) {
		r := &run{s: s, ops: group}
		hctx, stop := context.WithCancel(ctx)
		go r.heartbeat(hctx)
		err := r.execute(ctx)
		stop()
		if err != nil {
			s.log.WarnContext(ctx, "memory operation", "operation", group[0].Name(), "error", err)
		}
	}
	return len(ops), nil
}

// compatibleGroups splits claimed operations into groups that can share one
// pipeline run: generations of one scope with the same options and the same
// kind of input (facts or events). A purge runs alone.
func compatibleGroups(ops []*Operation) [][]*Operation {
	key := func(op *Operation) string {
		if op.Method != MethodGenerate {
			return op.ID
		}
		g := op.Generate
		return fmt.Sprintf("%v|%v|%v", g.DisableConsolidation, g.AllowedTopics, len(g.Facts) > 0)
	}
	var groups [][]*Operation
	index := map[string]int{}
	for _, op := range ops {
		k := key(op)
		if i, ok := index[k]; ok {
			groups[i] = append(groups[i], op)
			continue
		}
		index[k] = len(groups)
		groups = append(groups, []*Operation{op})
	}
	return groups
}

// run is one pipeline run over claimed operations.
type run struct {
	s   *Service
	mu  sync.Mutex
	ops []*Operation
}

// update changes every operation of the run under the run's lock.
func (r *run) update(f func(op *Operation)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, op := range r.ops {
		f(op)
	}
}

// updates returns the store updates that replace the run's operations,
// each expected to be running at its claimed attempt.
func (r *run) updates(f func(op *Operation)) []OpUpdate {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []OpUpdate
	for _, op := range r.ops {
		c := *op
		f(&c)
		out = append(out, OpUpdate{Op: &c, ExpectState: OpRunning, ExpectAttempt: op.Attempt})
	}
	return out
}

// heartbeat renews the run's leases until ctx is done.
func (r *run) heartbeat(ctx context.Context) {
	s := r.s
	t := time.NewTicker(s.cfg.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ups := r.updates(func(op *Operation) { op.LeaseExpiry = s.now().Add(s.cfg.Lease) })
		if err := s.store.Write(ctx, &Write{App: r.ops[0].App, Now: s.now(), Operations: ups}); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "renewing operation lease", "operation", r.ops[0].Name(), "error", err)
		}
	}
}

// execute runs the pipeline and records its outcome.
func (r *run) execute(ctx context.Context) error {
	s := r.s
	var (
		w   *Write
		err error
	)
	switch r.ops[0].Method {
	case MethodGenerate:
		w, err = r.generate(ctx)
	case MethodPurge:
		w, err = r.purge(ctx)
	default:
		err = fault.Invalidf("unknown operation method %q", r.ops[0].Method)
	}
	if err == nil {
		err = s.store.Write(ctx, w)
		if err == nil {
			for _, u := range w.Operations {
				s.finished(u.Op)
			}
			return nil
		}
	}
	return r.fail(ctx, err)
}

// fail records a failed attempt: retried later for transient errors (with
// backoff, up to MaxAttempts), failed for good otherwise.
func (r *run) fail(ctx context.Context, cause error) error {
	s := r.s
	now := s.now()
	kind := fault.KindOf(cause)
	retry := kind == fault.Unavailable || kind == fault.Aborted || kind == fault.DeadlineExceeded
	ups := r.updates(func(op *Operation) {
		if retry && op.Attempt < s.cfg.MaxAttempts {
			op.State = OpPending
			op.LeaseOwner, op.LeaseExpiry = "", time.Time{}
			backoff := time.Duration(math.Pow(2, float64(op.Attempt))) * time.Second
			if kind == fault.Aborted {
				backoff = 0
			}
			op.NotBefore = now.Add(backoff)
			op.Progress = fmt.Sprintf("attempt %d failed (%v); retrying", op.Attempt, cause)
			return
		}
		op.State, op.EndTime = OpFailed, now
		op.ErrorKind, op.ErrorMessage = kind, cause.Error()
		if retry {
			op.ErrorMessage = fmt.Sprintf("gave up after %d attempts: %v", op.Attempt, cause)
		}
		op.Progress = "failed"
	})
	if err := s.store.Write(context.WithoutCancel(ctx), &Write{App: r.ops[0].App, Now: now, Operations: ups}); err != nil {
		if fault.Is(err, fault.Aborted) {
			return nil // cancelled or taken over meanwhile: not ours to record
		}
		return err
	}
	for _, u := range ups {
		if u.Op.State.Done() {
			s.finished(u.Op)
		}
	}
	return cause
}

func (r *run) progress(msg string) { r.update(func(op *Operation) { op.Progress = msg }) }
