package memorybank

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/kioku-ai/kioku/fault"
)

// The scheduler: this process claims operations from the store and runs
// them, Workers at a time. The claim state machine lives here, once; the
// stores provide finding work (QueuedOperations, PendingOperations) and
// conditional writes (Write with OpUpdate's expectations and ClaimScope).
//
//	PENDING --claim (Attempt+1, lease)--> RUNNING --result written--> SUCCEEDED
//	RUNNING --transient error, attempts left--> PENDING (after a backoff)
//	RUNNING --other error, or attempts used up--> FAILED
//	RUNNING --this worker stops (Run's ctx ends)--> PENDING (Attempt-1: the
//	         interrupted attempt does not count; lease released, due at once)
//	RUNNING --lease expired (its worker died)--> claimed again by any worker,
//	         or FAILED once MaxAttempts claims ended that way
//	PENDING, RUNNING --CancelOperation--> CANCELLED
//
// Every transition is one Write expecting the state and attempt it read:
// a worker whose lease was taken over (or whose operation was cancelled)
// can change nothing.
//
// Wake-ups replace polling: a GenerateMemories or PurgeMemories of this
// process, and the end of a run, wake the scheduler at once; with nothing
// to claim it sleeps until the earliest due time among the queued
// operations (a retry's backoff, a dead worker's lease). On a store other
// processes also queue operations in (Firestore), it looks again after
// PollInterval, doubling while idle up to MaxPollInterval. With
// Config.LocalQueue (the embedded store) it never polls: an idle server
// reads and writes nothing for its operations.

// coalesceMax is the most operations of one scope claimed together.
const coalesceMax = 8

// queueScan is how many queued operations one claim looks at.
const queueScan = 32

// handBackTimeout bounds the writes that record a run's end when the
// worker is stopping.
const handBackTimeout = 10 * time.Second

// Run runs this process's share of the memory bank's background work until
// ctx is done: the scheduler and up to Workers operations at once, the
// lease heartbeat, the expiry sweeper, re-embedding of memories whose
// vectors come from another embedder, and the idle generation trigger.
// When ctx ends, the operations running here go back to pending with their
// attempt unchanged, so that the next server (or this one restarted) takes
// them at once; Run returns after that, with the heartbeat stopped.
func (s *Service) Run(ctx context.Context) {
	hbCtx, stopHeartbeat := context.WithCancel(context.WithoutCancel(ctx))
	heartbeat := make(chan struct{})
	go func() {
		defer close(heartbeat)
		s.heartbeat(hbCtx)
	}()
	var runs, other sync.WaitGroup
	other.Go(func() { s.maintain(ctx) })
	s.schedule(ctx, &runs)
	runs.Wait()
	stopHeartbeat()
	<-heartbeat
	other.Wait()
}

// signal wakes the scheduler (without blocking).
func (s *Service) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// schedule claims and starts runs until ctx ends.
func (s *Service) schedule(ctx context.Context, runs *sync.WaitGroup) {
	slots := make(chan struct{}, s.cfg.Workers)
	poll := s.cfg.PollInterval
	for {
		select {
		case slots <- struct{}{}: // a free worker
		case <-ctx.Done():
			return
		}
		batch, next, err := s.claim(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "claiming memory operations", "error", err)
		}
		if len(batch) > 0 {
			poll = s.cfg.PollInterval
			runs.Go(func() {
				defer func() {
					<-slots
					s.signal() // its scope is free, its slot too
				}()
				s.runBatch(ctx, batch)
			})
			continue
		}
		<-slots
		wait := time.Duration(-1)
		if !next.IsZero() {
			wait = max(0, next.Sub(s.now()))
		}
		if !s.cfg.LocalQueue || err != nil {
			if wait < 0 || poll < wait {
				wait = poll
			}
			poll = min(2*poll, s.cfg.MaxPollInterval)
		}
		var (
			timer   *time.Timer
			timeout <-chan time.Time
		)
		if wait >= 0 {
			timer = time.NewTimer(wait)
			timeout = timer.C
		}
		select {
		case <-ctx.Done():
		case <-s.wake:
			poll = s.cfg.PollInterval
		case <-timeout:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// claim claims the earliest claimable operation with the pending
// generations of its scope it can coalesce. With nothing to claim it
// returns when the earliest queued operation becomes claimable (zero when
// none is queued).
func (s *Service) claim(ctx context.Context) (batch []*Operation, next time.Time, err error) {
	now := s.now()
	queued, err := s.store.QueuedOperations(ctx, queueScan)
	if err != nil {
		return nil, time.Time{}, err
	}
	busy := map[[2]string]bool{} // scopes with a running operation under a live lease
	for _, op := range queued {
		if op.State == OpRunning && op.LeaseExpiry.After(now) && op.ScopeKey != "" {
			busy[[2]string{op.App, op.ScopeKey}] = true
		}
	}
	for _, op := range queued {
		if at := op.ClaimTime(); at.After(now) {
			if !s.holds(op) && (next.IsZero() || at.Before(next)) {
				next = at
			}
			continue
		}
		switch {
		case s.holds(op):
			continue // running here; its heartbeat is late
		case op.State == OpRunning && op.Attempt >= s.cfg.MaxAttempts:
			s.giveUp(ctx, op, now)
			continue
		case op.State == OpPending && op.ScopeKey != "" && busy[[2]string{op.App, op.ScopeKey}]:
			continue // waits for its scope; the end of that run wakes us
		}
		batch, err := s.claimOp(ctx, op, now)
		if err == nil {
			return batch, time.Time{}, nil
		}
		if !fault.Is(err, fault.Aborted) && !fault.Is(err, fault.NotFound) {
			return nil, time.Time{}, err
		}
		// Taken by another worker meanwhile, or its scope is busy: next.
	}
	if len(queued) == queueScan && next.IsZero() {
		next = now.Add(s.cfg.PollInterval) // more beyond the scan
	}
	return nil, next, nil
}

// claimOp claims op and up to coalesceMax-1 pending generations of its
// scope in one write.
func (s *Service) claimOp(ctx context.Context, op *Operation, now time.Time) ([]*Operation, error) {
	group := []*Operation{op}
	if op.Method == MethodGenerate {
		more, err := s.store.PendingOperations(ctx, op.App, op.ScopeKey, MethodGenerate, now, coalesceMax)
		if err != nil {
			return nil, err
		}
		for _, m := range more {
			if m.ID != op.ID && len(group) < coalesceMax {
				group = append(group, m)
			}
		}
	}
	w := &Write{App: op.App, Now: now}
	claimed := make([]*Operation, len(group))
	for i, g := range group {
		c := *g
		c.State, c.Attempt = OpRunning, g.Attempt+1
		c.LeaseOwner, c.LeaseExpiry = s.cfg.WorkerID, now.Add(s.cfg.Lease)
		c.StartTime, c.Progress = now, "claimed by "+s.cfg.WorkerID
		claimed[i] = &c
		w.Operations = append(w.Operations, OpUpdate{Op: &c, ExpectState: g.State, ExpectAttempt: g.Attempt, ClaimScope: i == 0})
	}
	if err := s.store.Write(ctx, w); err != nil {
		return nil, err
	}
	return claimed, nil
}

// giveUp fails an operation whose workers kept dying.
func (s *Service) giveUp(ctx context.Context, op *Operation, now time.Time) {
	c := *op
	c.State, c.EndTime = OpFailed, now
	c.ErrorKind = fault.Unavailable
	c.ErrorMessage = fmt.Sprintf("gave up after %d attempts: the worker running it stopped each time (lease expired)", op.Attempt)
	c.LeaseOwner, c.LeaseExpiry, c.Progress = "", time.Time{}, "failed"
	err := s.store.Write(ctx, &Write{App: op.App, Now: now, Operations: []OpUpdate{{Op: &c, ExpectState: op.State, ExpectAttempt: op.Attempt}}})
	switch {
	case err == nil:
		s.finished(&c)
	case !fault.Is(err, fault.Aborted) && ctx.Err() == nil:
		s.log.WarnContext(ctx, "failing an abandoned memory operation", "operation", op.Name(), "error", err)
	}
}

// RunOnce claims a batch of operations and runs it, without renewing
// leases (Run's heartbeat does that). It returns how many operations it
// claimed.
func (s *Service) RunOnce(ctx context.Context) (int, error) {
	batch, _, err := s.claim(ctx)
	if err != nil || len(batch) == 0 {
		return 0, err
	}
	s.runBatch(ctx, batch)
	return len(batch), nil
}

// runBatch runs the compatible groups of a claimed batch one after the
// other. All of them are held (their leases renewed) from the claim on;
// when ctx ends, those not done go back to pending.
func (s *Service) runBatch(ctx context.Context, batch []*Operation) {
	groups := compatibleGroups(batch)
	runs := make([]*run, len(groups))
	for i, g := range groups {
		runs[i] = &run{s: s, ops: g}
		s.hold(runs[i])
	}
	for _, r := range runs {
		if ctx.Err() != nil {
			r.handBack(ctx)
		} else if err := r.execute(ctx); err != nil {
			s.log.WarnContext(ctx, "memory operation", "operation", r.ops[0].Name(), "error", err)
		}
		s.release(r)
	}
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
	// lose cancels the pipeline when the run's lease is lost (the
	// operation was cancelled, or another worker took it over).
	lose context.CancelCauseFunc
}

// errLeaseLost ends a run whose operations another writer changed.
var errLeaseLost = errors.New("the operation was cancelled or taken over by another worker")

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

// hold registers a run for the heartbeat.
func (s *Service) hold(r *run) {
	s.heldMu.Lock()
	s.held[r] = struct{}{}
	s.heldMu.Unlock()
}

func (s *Service) release(r *run) {
	s.heldMu.Lock()
	delete(s.held, r)
	s.heldMu.Unlock()
}

// holds reports whether op is held by a run of this process.
func (s *Service) holds(op *Operation) bool {
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	for r := range s.held {
		for _, o := range r.ops {
			if o.App == op.App && o.ID == op.ID {
				return true
			}
		}
	}
	return false
}

// heartbeat renews the leases of every run held here, every Lease/3, until
// ctx ends. A run whose renewal is refused has lost its operations: its
// pipeline is stopped.
func (s *Service) heartbeat(ctx context.Context) {
	t := time.NewTicker(s.cfg.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.heldMu.Lock()
		runs := make([]*run, 0, len(s.held))
		for r := range s.held {
			runs = append(runs, r)
		}
		s.heldMu.Unlock()
		for _, r := range runs {
			r.renew(ctx)
		}
	}
}

// renew extends the run's leases.
func (r *run) renew(ctx context.Context) {
	s := r.s
	expiry := s.now().Add(s.cfg.Lease)
	ups := r.updates(func(op *Operation) { op.LeaseExpiry = expiry })
	err := s.store.Write(ctx, &Write{App: r.ops[0].App, Now: s.now(), Operations: ups})
	switch {
	case err == nil:
		r.update(func(op *Operation) { op.LeaseExpiry = expiry })
	case fault.Is(err, fault.Aborted) || fault.Is(err, fault.NotFound):
		r.mu.Lock()
		if r.lose != nil {
			r.lose(errLeaseLost)
		}
		r.mu.Unlock()
	case ctx.Err() == nil:
		s.log.WarnContext(ctx, "renewing operation lease", "operation", r.ops[0].Name(), "error", err)
	}
}

// execute runs the pipeline and records its outcome: the result, a failed
// attempt, or, when ctx ended (the worker is stopping), the operations
// handed back.
func (r *run) execute(ctx context.Context) error {
	s := r.s
	pctx, lose := context.WithCancelCause(ctx)
	defer lose(nil)
	r.mu.Lock()
	r.lose = lose
	r.mu.Unlock()
	var (
		w   *Write
		err error
	)
	switch r.ops[0].Method {
	case MethodGenerate:
		w, err = r.generate(pctx)
	case MethodPurge:
		w, err = r.purge(pctx)
	case MethodCompact:
		w, err = r.compact(pctx)
	default:
		err = fault.Invalidf("unknown operation method %q", r.ops[0].Method)
	}
	if err == nil {
		// The result is complete: record it even if the worker is stopping.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(pctx), handBackTimeout)
		err = s.store.Write(wctx, w)
		cancel()
		if err == nil {
			for _, u := range w.Operations {
				s.finished(u.Op)
			}
			return nil
		}
	}
	switch {
	case errors.Is(context.Cause(pctx), errLeaseLost):
		return nil // not ours any more: nothing to record
	case ctx.Err() != nil:
		r.handBack(ctx)
		return nil
	}
	return r.fail(ctx, err)
}

// handBack returns the run's operations to pending, due at once, with the
// attempt they had before this worker claimed them and no lease: the
// worker is stopping, and the interrupted attempt does not count.
func (r *run) handBack(ctx context.Context) {
	s := r.s
	ups := r.updates(func(op *Operation) {
		op.State, op.Attempt = OpPending, op.Attempt-1
		op.LeaseOwner, op.LeaseExpiry, op.NotBefore = "", time.Time{}, time.Time{}
		op.Progress = "interrupted: " + s.cfg.WorkerID + " stopped; queued again"
	})
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handBackTimeout)
	defer cancel()
	if err := s.store.Write(wctx, &Write{App: r.ops[0].App, Now: s.now(), Operations: ups}); err != nil && !fault.Is(err, fault.Aborted) {
		// Its lease expires instead; the next claim counts the attempt.
		s.log.WarnContext(ctx, "handing back an interrupted memory operation", "operation", r.ops[0].Name(), "error", err)
	}
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
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handBackTimeout)
	defer cancel()
	if err := s.store.Write(wctx, &Write{App: r.ops[0].App, Now: now, Operations: ups}); err != nil {
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
