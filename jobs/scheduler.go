package jobs

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kioku-ai/kioku/fault"
)

// queueScan is how many queued operations one claim looks at.
const queueScan = 32

// handBackTimeout bounds the writes that record a run's end when the
// worker is stopping.
const handBackTimeout = 10 * time.Second

// Run runs this process's share of the queued work until ctx is done: the
// scheduler and up to Workers batches at once, the lease heartbeat, and
// the sweeper of finished operations past the retention. When ctx ends,
// the operations running here go back to pending with their attempt
// unchanged, so that the next process (or this one restarted) takes them
// at once; Run returns after that, with the heartbeat stopped.
func (e *Engine) Run(ctx context.Context) {
	hbCtx, stopHeartbeat := context.WithCancel(context.WithoutCancel(ctx))
	heartbeat := make(chan struct{})
	go func() {
		defer close(heartbeat)
		e.heartbeat(hbCtx)
	}()
	var runs, sweeper sync.WaitGroup
	sweeper.Go(func() { e.sweep(ctx) })
	e.schedule(ctx, &runs)
	runs.Wait()
	stopHeartbeat()
	<-heartbeat
	sweeper.Wait()
}

// sweep deletes finished operations past the retention every
// SweepInterval until ctx ends.
func (e *Engine) sweep(ctx context.Context) {
	t := time.NewTicker(e.cfg.SweepInterval)
	defer t.Stop()
	for {
		if _, err := e.SweepFinished(ctx); err != nil && ctx.Err() == nil {
			e.log.WarnContext(ctx, "deleting finished operations", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// signal wakes the scheduler (without blocking).
func (e *Engine) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// schedule claims and starts batches until ctx ends. Wake-ups replace
// polling: an Enqueue of this process, and the end of a run, wake it at
// once; with nothing to claim it sleeps until the earliest due time among
// the queued operations (a retry's backoff, a dead worker's lease). On a
// store other processes also queue operations in, it looks again after
// PollInterval, doubling while idle up to MaxPollInterval; with
// LocalQueue it never polls.
func (e *Engine) schedule(ctx context.Context, runs *sync.WaitGroup) {
	slots := make(chan struct{}, e.cfg.Workers)
	cpu := make(chan struct{}, e.cfg.CPUWorkers)
	poll := e.cfg.PollInterval
	l := newLoad(e.cfg)
	for {
		select {
		case slots <- struct{}{}: // a free worker
		case <-ctx.Done():
			return
		}
		select {
		case cpu <- struct{}{}: // fewer than CPUWorkers runs computing
		case <-ctx.Done():
			<-slots
			return
		}
		claimed, next, err := e.claim(ctx, l)
		if err != nil && ctx.Err() == nil {
			e.log.WarnContext(ctx, "claiming operations", "error", err)
		}
		if len(claimed) > 0 {
			poll = e.cfg.PollInterval
			op := claimed[0] // a claim's operations share their key, so their owner
			l.add(op, 1)
			slot := &cpuSlot{gate: cpu}
			slot.took()
			runs.Go(func() {
				defer func() {
					slot.release()
					l.add(op, -1)
					<-slots
					e.signal() // its key is free, its slot too
				}()
				e.runClaimed(context.WithValue(ctx, cpuSlotKey{}, slot), claimed)
			})
			continue
		}
		<-cpu
		<-slots
		wait := time.Duration(-1)
		if !next.IsZero() {
			wait = max(0, next.Sub(e.now()))
		}
		if !e.cfg.LocalQueue || err != nil {
			if wait < 0 || poll < wait {
				wait = poll
			}
			poll = min(2*poll, e.cfg.MaxPollInterval)
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
		case <-e.wake:
			poll = e.cfg.PollInterval
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
// operations of its key it can coalesce. With l, the runs going here
// (nil: none counted), it passes over the operations of the owners at
// their share of the workers (MaxWorkersPerOwner), and those of the apps
// at theirs (MaxWorkersPerApp) while an operation of another app can be
// claimed. A full scan that held nothing to claim but operations that
// wait for their key or for a run of their owner to end is followed by a
// longer one (up to maxQueueScan operations), so that a few keys' or
// owners' queued work does not hide the others'. With nothing to claim it returns when the earliest queued
// operation becomes claimable (zero when none is queued).
func (e *Engine) claim(ctx context.Context, l *load) (claimed []*Operation, next time.Time, err error) {
	for limit := queueScan; ; limit = min(8*limit, maxQueueScan) {
		claimed, next, passed, err := e.claimIn(ctx, l, limit)
		if len(claimed) > 0 || err != nil || !passed || limit == maxQueueScan {
			return claimed, next, err
		}
	}
}

// maxQueueScan bounds the scan of a claim that passes over operations
// that wait: enough for every owner that can be at their share at once
// (Workers/MaxWorkersPerOwner, 8 by default) with all their pending
// operations (MaxQueuedPerOwner, 30 by default).
const maxQueueScan = 1024

// claimIn is claim over the first limit queued operations; passed reports
// that the scan was full and held operations due that it passed over,
// their key busy or their owner at their share.
func (e *Engine) claimIn(ctx context.Context, l *load, limit int) (claimed []*Operation, next time.Time, passed bool, err error) {
	now := e.now()
	queued, err := e.store.QueuedOperations(ctx, limit)
	if err != nil {
		return nil, time.Time{}, false, err
	}
	busy := map[[2]string]bool{}   // keys with a running operation under a live lease
	running := map[[2]string]int{} // owners' running operations under live leases, on any process
	for _, op := range queued {
		if op.State == Running && op.LeaseExpiry.After(now) && op.Key != "" {
			busy[[2]string{op.App, op.Key}] = true
			if op.Owner != "" {
				running[[2]string{op.App, op.Owner}]++
			}
		}
	}
	var claimable, later []*Operation // later: of apps at their share
	for _, op := range queued {
		if at := op.ClaimTime(); at.After(now) {
			if !e.holds(op) && (next.IsZero() || at.Before(next)) {
				next = at
			}
			continue
		}
		switch {
		case e.holds(op):
			continue // running here; its heartbeat is late
		case op.State == Running && op.Attempt >= e.cfg.MaxAttempts:
			e.giveUp(ctx, op, now)
			continue
		case op.State == Pending && op.Key != "" && busy[[2]string{op.App, op.Key}]:
			passed = true
			continue // waits for its key; the end of that run wakes us
		case l.ownerFull(op):
			passed = true
			continue // waits for a run of its owner to end, which wakes us
		case l.appFull(op.App):
			later = append(later, op)
			continue
		}
		claimable = append(claimable, op)
	}
	// With no other app's operation to claim, an app may use every worker.
	for _, op := range append(e.inTurn(claimable), e.inTurn(later)...) {
		if l != nil {
			full, err := e.ownerFullAcross(ctx, op, running, len(queued) < limit)
			if err != nil {
				return nil, time.Time{}, false, err
			}
			if full {
				passed = true
				continue // waits for a run of its owner, on any process, to end
			}
		}
		claimed, err := e.claimOp(ctx, op, now)
		if err == nil {
			e.serve(op)
			return claimed, time.Time{}, false, nil
		}
		if !fault.Is(err, fault.Aborted) && !fault.Is(err, fault.NotFound) {
			return nil, time.Time{}, false, err
		}
		// Taken by another worker meanwhile, or its key is busy (its run
		// beyond the scan): next.
		passed = true
	}
	full := len(queued) == limit
	if full && next.IsZero() {
		next = now.Add(e.cfg.PollInterval) // more beyond the scan
	}
	return nil, next, passed && full, nil
}

// ownerFullAcross reports whether op has an owner whose operations run
// by every process sharing the store hold their share of the workers
// (MaxWorkersPerOwner): the lease records say who runs what. A scan that
// held every queued operation (complete) counted them already (running);
// otherwise the store counts them, one read on Firestore. Coalesced
// operations count one each, so an owner whose runs coalesce is held to
// fewer runs, never more. Two processes that claim at the same moment may
// each see the owner below their share: the owner then holds up to one
// run more per other process, until one ends. With LocalQueue the
// process's own count (load) is the whole count.
func (e *Engine) ownerFullAcross(ctx context.Context, op *Operation, running map[[2]string]int, complete bool) (bool, error) {
	if op.Owner == "" || e.cfg.LocalQueue {
		return false, nil
	}
	n := running[[2]string{op.App, op.Owner}]
	if !complete {
		var err error
		if n, err = e.store.CountRunningOfOwner(ctx, op.App, op.Owner, e.cfg.MaxWorkersPerOwner); err != nil {
			return false, err
		}
	}
	return n >= e.cfg.MaxWorkersPerOwner, nil
}

// load counts the runs going in a process's scheduler, per app and per
// owner of an app, against their shares of its workers.
type load struct {
	maxPerApp, maxPerOwner int

	mu     sync.Mutex
	apps   map[string]int
	owners map[[2]string]int // app and owner (not empty)
}

func newLoad(cfg Config) *load {
	return &load{maxPerApp: cfg.MaxWorkersPerApp, maxPerOwner: cfg.MaxWorkersPerOwner, apps: map[string]int{}, owners: map[[2]string]int{}}
}

// add counts n more runs (n < 0: fewer) of op's app and owner.
func (l *load) add(op *Operation, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.apps[op.App] += n; l.apps[op.App] <= 0 {
		delete(l.apps, op.App)
	}
	if op.Owner == "" {
		return
	}
	k := [2]string{op.App, op.Owner}
	if l.owners[k] += n; l.owners[k] <= 0 {
		delete(l.owners, k)
	}
}

// appFull reports whether app holds its share of the workers; false on a
// nil load.
func (l *load) appFull(app string) bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.apps[app] >= l.maxPerApp
}

// ownerFull reports whether op has an owner who holds their share of the
// workers; false on a nil load.
func (l *load) ownerFull(op *Operation) bool {
	if l == nil || op.Owner == "" {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.owners[[2]string{op.App, op.Owner}] >= l.maxPerOwner
}

// maxServed bounds the owners whose turns the engine remembers; past it
// it forgets them all (and every owner starts a new round).
const maxServed = 10000

// inTurn orders claimable operations by their owners' turns: those of
// the owners (users, per app; Operation.Owner) this engine served least
// recently first, and within an owner, or among owners never served, in
// the scan's order (earliest first). So that when the queue is long, one
// user's operations, however many keys they spread over, take their turn
// with every other user's and with the app's own (no owner), instead of
// all running before theirs; the turns are those of this process.
func (e *Engine) inTurn(ops []*Operation) []*Operation {
	if len(ops) < 2 {
		return ops
	}
	e.servedMu.Lock()
	turn := make(map[*Operation]uint64, len(ops))
	for _, op := range ops {
		turn[op] = e.served[[2]string{op.App, op.Owner}]
	}
	e.servedMu.Unlock()
	slices.SortStableFunc(ops, func(a, b *Operation) int { return cmp.Compare(turn[a], turn[b]) })
	return ops
}

// serve records that op's owner was served.
func (e *Engine) serve(op *Operation) {
	e.servedMu.Lock()
	defer e.servedMu.Unlock()
	if len(e.served) >= maxServed {
		clear(e.served)
	}
	e.claims++
	e.served[[2]string{op.App, op.Owner}] = e.claims
}

// claimOp claims op and up to its kind's Coalesce-1 pending operations of
// its key in one write.
func (e *Engine) claimOp(ctx context.Context, op *Operation, now time.Time) ([]*Operation, error) {
	group := []*Operation{op}
	if k := e.kind(op.Kind); k != nil && k.Coalesce > 1 && op.Key != "" {
		more, err := e.store.PendingOperations(ctx, op.App, op.Key, op.Kind, now, k.Coalesce)
		if err != nil {
			return nil, err
		}
		for _, m := range more {
			if m.ID != op.ID && len(group) < k.Coalesce {
				group = append(group, m)
			}
		}
	}
	updates := make([]Update, len(group))
	claimed := make([]*Operation, len(group))
	for i, g := range group {
		c := g.Clone()
		c.State, c.Attempt = Running, g.Attempt+1
		c.LeaseOwner, c.LeaseExpiry = e.cfg.WorkerID, now.Add(e.cfg.Lease)
		c.StartTime, c.Progress = now, "claimed by "+e.cfg.WorkerID
		claimed[i] = c
		updates[i] = Update{Op: c, ExpectState: g.State, ExpectAttempt: g.Attempt, ClaimKey: i == 0}
	}
	if err := e.store.UpdateOperations(ctx, now, updates); err != nil {
		return nil, err
	}
	return claimed, nil
}

// giveUp fails an operation whose workers kept dying.
func (e *Engine) giveUp(ctx context.Context, op *Operation, now time.Time) {
	c := op.Clone()
	c.State, c.EndTime = Failed, now
	c.ErrorKind = fault.Unavailable
	c.ErrorMessage = fmt.Sprintf("gave up after %d attempts: the worker running it stopped each time (lease expired)", op.Attempt)
	c.LeaseOwner, c.LeaseExpiry, c.Progress = "", time.Time{}, "failed"
	err := e.store.UpdateOperations(ctx, now, []Update{{Op: c, ExpectState: op.State, ExpectAttempt: op.Attempt}})
	switch {
	case err == nil:
		e.finished(c)
	case !fault.Is(err, fault.Aborted) && ctx.Err() == nil:
		e.log.WarnContext(ctx, "failing an abandoned operation", "operation", op.Name(), "error", err)
	}
}

// RunOnce claims operations and runs them, without renewing leases (Run's
// heartbeat does that). It returns how many operations it claimed.
func (e *Engine) RunOnce(ctx context.Context) (int, error) {
	claimed, _, err := e.claim(ctx, nil)
	if err != nil || len(claimed) == 0 {
		return 0, err
	}
	e.runClaimed(ctx, claimed)
	return len(claimed), nil
}

// runClaimed runs the groups of a claim as batches, one after the other.
// All of them are held (their leases renewed) from the claim on; when ctx
// ends, those not done go back to pending.
func (e *Engine) runClaimed(ctx context.Context, claimed []*Operation) {
	groups := e.groups(claimed)
	batches := make([]*Batch, len(groups))
	for i, g := range groups {
		batches[i] = &Batch{e: e, kind: e.kind(g[0].Kind), ops: g}
		e.hold(batches[i])
	}
	for _, b := range batches {
		if ctx.Err() != nil {
			b.handBack(ctx)
		} else if err := b.execute(ctx); err != nil {
			e.log.WarnContext(ctx, "operation", "operation", b.ops[0].Name(), "kind", b.ops[0].Kind, "error", err)
		}
		e.release(b)
	}
}

// groups splits claimed operations into the groups of their kind
// (Kind.Group); an operation of a kind without groups runs alone.
func (e *Engine) groups(ops []*Operation) [][]*Operation {
	key := func(op *Operation) string {
		k := e.kind(op.Kind)
		if k == nil || k.Group == nil {
			return "\x00" + op.ID
		}
		return op.Kind + "\x00" + k.Group(op)
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

// hold registers a batch for the heartbeat.
func (e *Engine) hold(b *Batch) {
	e.heldMu.Lock()
	e.held[b] = struct{}{}
	e.heldMu.Unlock()
}

func (e *Engine) release(b *Batch) {
	e.heldMu.Lock()
	delete(e.held, b)
	e.heldMu.Unlock()
}

// holds reports whether op is held by a batch of this process.
func (e *Engine) holds(op *Operation) bool {
	e.heldMu.Lock()
	defer e.heldMu.Unlock()
	for b := range e.held {
		for _, o := range b.ops {
			if o.App == op.App && o.ID == op.ID {
				return true
			}
		}
	}
	return false
}

// heartbeat renews the leases of every batch held here, every Lease/3,
// until ctx ends. A batch whose renewal is refused has lost its
// operations: its handler is stopped.
func (e *Engine) heartbeat(ctx context.Context) {
	t := time.NewTicker(e.cfg.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e.heldMu.Lock()
		batches := make([]*Batch, 0, len(e.held))
		for b := range e.held {
			batches = append(batches, b)
		}
		e.heldMu.Unlock()
		for _, b := range batches {
			b.renew(ctx)
		}
	}
}
