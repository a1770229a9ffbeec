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
		// The slots free besides the one taken: only this loop takes them,
		// so at least as many are free when the claim returns.
		room := cap(slots) - len(slots)
		claims, next, err := e.claim(ctx, l, room)
		if err != nil && ctx.Err() == nil {
			e.log.WarnContext(ctx, "claiming operations", "error", err)
		}
		for i, claimed := range claims {
			poll = e.cfg.PollInterval
			op := claimed[0] // a claim's operations share their key, so their owner
			l.add(op, 1)
			batches := e.holdClaimed(claimed)
			slot := &cpuSlot{gate: cpu}
			if i == 0 {
				slot.took() // the CPU slot this loop took
			} else {
				slots <- struct{}{} // free (room)
			}
			runs.Go(func() {
				defer func() {
					slot.release()
					l.add(op, -1)
					<-slots
					e.signal() // its key is free, its slot too
				}()
				if i > 0 {
					// Taken over with the first: it computes when a CPU
					// slot is free (held meanwhile, its lease renewed).
					select {
					case cpu <- struct{}{}:
						slot.took()
					case <-ctx.Done(): // handed back below
					}
				}
				e.runBatches(context.WithValue(ctx, cpuSlotKey{}, slot), batches)
			})
		}
		if len(claims) > 0 {
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
// operations of its key it can coalesce and, with l and up to room more
// (the workers free besides the one it claims for), the operations of the
// scan whose workers died (takeovers), each with those of its key, in the
// same write; it returns the operations of each claim, the earliest's
// first. With l, the runs going here (nil: none counted), it passes over the operations of the owners at
// their share of the workers (MaxWorkersPerOwner), and those of the apps
// at theirs (MaxWorkersPerApp) while an operation of another app can be
// claimed. A full scan that held nothing to claim but operations that
// wait for their key or for a run of their owner to end is followed by a
// longer one (up to maxQueueScan operations), so that a few keys' or
// owners' queued work does not hide the others'. With nothing to claim it returns when the earliest queued
// operation becomes claimable (zero when none is queued).
func (e *Engine) claim(ctx context.Context, l *load, room int) (claims [][]*Operation, next time.Time, err error) {
	for limit := queueScan; ; limit = min(8*limit, maxQueueScan) {
		claims, next, passed, err := e.claimIn(ctx, l, limit, room)
		if len(claims) > 0 || err != nil || !passed || limit == maxQueueScan {
			return claims, next, err
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
func (e *Engine) claimIn(ctx context.Context, l *load, limit, room int) (claims [][]*Operation, next time.Time, passed bool, err error) {
	now := e.now()
	queued, err := e.store.QueuedOperations(ctx, limit)
	if err != nil {
		return nil, time.Time{}, false, err
	}
	busy := map[[2]string]bool{}   // keys with a running operation under a live lease, or awaiting its takeover here
	running := map[[2]string]int{} // owners' running operations under live leases, on any process
	for _, op := range queued {
		if op.State == Running && op.Key != "" && e.claimTime(op).After(now) {
			busy[[2]string{op.App, op.Key}] = true
		}
		if op.State == Running && op.LeaseExpiry.After(now) && op.Key != "" && op.Owner != "" {
			running[[2]string{op.App, op.Owner}]++
		}
	}
	var claimable, later []*Operation // later: of apps at their share
	for _, op := range queued {
		if at := e.claimTime(op); at.After(now) {
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
		case l.ownerFull(op, 0):
			passed = true
			continue // waits for a run of its owner to end, which wakes us
		case l.appFull(op.App, 0):
			later = append(later, op)
			continue
		}
		claimable = append(claimable, op)
	}
	// With no other app's operation to claim, an app may use every worker.
	ordered := append(e.inTurn(claimable), e.inTurn(later)...)
	complete := len(queued) < limit
	for i, op := range ordered {
		if l != nil {
			full, err := e.ownerFullAcross(ctx, op, running, complete, 0)
			if err != nil {
				return nil, time.Time{}, false, err
			}
			if full {
				passed = true
				continue // waits for a run of its owner, on any process, to end
			}
		}
		leads := []*Operation{op}
		if l != nil && room > 0 {
			more, err := e.takeovers(ctx, l, op, ordered[i+1:], running, complete, room, now)
			if err != nil {
				return nil, time.Time{}, false, err
			}
			leads = append(leads, more...)
		}
		claims, err := e.claimOps(ctx, leads, now)
		if len(leads) > 1 && (fault.Is(err, fault.Aborted) || fault.Is(err, fault.NotFound)) {
			// One of them was taken meanwhile: the first alone.
			claims, err = e.claimOps(ctx, leads[:1], now)
		}
		if err == nil {
			for _, c := range claims {
				e.serve(c[0])
			}
			return claims, time.Time{}, false, nil
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

// takeoverStep is how much longer than the one before it each process,
// in its rank (Config.Rank), waits after a dead worker's lease expired
// before it takes the worker's operations over (at most Lease/8).
const takeoverStep = 250 * time.Millisecond

// claimTime is when op may be claimed here: its ClaimTime, and for a
// running operation (its lease expired: its worker died) rank takeover
// steps later, so that one process takes a dead worker's operations over
// alone, in one claim, while the others wait their turn. Two processes
// claiming together conflict in the store (Firestore's emulator holds
// such conflicting transactions for seconds).
func (e *Engine) claimTime(op *Operation) time.Time {
	at := op.ClaimTime()
	if op.State != Running || e.cfg.Rank == nil {
		return at
	}
	if r := e.cfg.Rank(op.LeaseOwner); r > 0 {
		at = at.Add(time.Duration(r) * min(takeoverStep, e.cfg.Lease/8))
	}
	return at
}

// takeovers returns, to be claimed with lead, up to room operations of
// ops (claimable, in their turn) that a dead worker held (running, their
// lease expired), each of a key of its own that is not lead's, within the
// shares of their apps and owners counting those taken with them. Work
// that waited a lease already is taken over at once, up to the free
// workers, instead of one claim at a time; it computes when a CPU slot is
// free. Pending operations are claimed one at a time, as CPU slots free.
func (e *Engine) takeovers(ctx context.Context, l *load, lead *Operation, ops []*Operation, running map[[2]string]int, complete bool, room int, now time.Time) ([]*Operation, error) {
	keys := map[[2]string]bool{{lead.App, lead.Key}: true}
	apps := map[string]int{lead.App: 1}
	owners := map[[2]string]int{}
	if lead.Owner != "" {
		owners[[2]string{lead.App, lead.Owner}] = 1
	}
	var out []*Operation
	for _, op := range ops {
		if len(out) == room {
			break
		}
		k, o := [2]string{op.App, op.Key}, [2]string{op.App, op.Owner}
		if op.State != Running || op.LeaseExpiry.After(now) || (op.Key != "" && keys[k]) ||
			l.appFull(op.App, apps[op.App]) || l.ownerFull(op, owners[o]) {
			continue
		}
		full, err := e.ownerFullAcross(ctx, op, running, complete, owners[o])
		if err != nil {
			return nil, err
		}
		if full {
			continue
		}
		out = append(out, op)
		if op.Key != "" {
			keys[k] = true
		}
		apps[op.App]++
		if op.Owner != "" {
			owners[o]++
		}
	}
	return out, nil
}

// ownerFullAcross reports whether op has an owner whose operations run
// by every process sharing the store, and more about to be claimed with
// it, hold their share of the workers (MaxWorkersPerOwner): the lease
// records say who runs what. A scan that
// held every queued operation (complete) counted them already (running);
// otherwise the store counts them, one read on Firestore. Coalesced
// operations count one each, so an owner whose runs coalesce is held to
// fewer runs, never more. Two processes that claim at the same moment may
// each see the owner below their share: the owner then holds up to one
// run more per other process, until one ends. With LocalQueue the
// process's own count (load) is the whole count.
func (e *Engine) ownerFullAcross(ctx context.Context, op *Operation, running map[[2]string]int, complete bool, more int) (bool, error) {
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
	return n+more >= e.cfg.MaxWorkersPerOwner, nil
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

// appFull reports whether app holds its share of the workers with more
// runs; false on a nil load.
func (l *load) appFull(app string, more int) bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.apps[app]+more >= l.maxPerApp
}

// ownerFull reports whether op has an owner who holds their share of the
// workers with more runs; false on a nil load.
func (l *load) ownerFull(op *Operation, more int) bool {
	if l == nil || op.Owner == "" {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.owners[[2]string{op.App, op.Owner}]+more >= l.maxPerOwner
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

// maxClaimWrite bounds the operations one claim writes, with those taken
// over (a Firestore transaction writes at most 500 documents).
const maxClaimWrite = 200

// claimOps claims each of leads with up to its kind's Coalesce-1
// pending operations of its key, all in one write of at most
// maxClaimWrite operations (the leads past it are left for the next
// claim), and returns the operations of each claim.
func (e *Engine) claimOps(ctx context.Context, leads []*Operation, now time.Time) ([][]*Operation, error) {
	var (
		updates []Update
		claims  [][]*Operation
	)
	for _, op := range leads {
		if len(updates) >= maxClaimWrite {
			break
		}
		group := []*Operation{op}
		if k := e.kind(op.Kind); k != nil && k.Coalesce > 1 && op.Key != "" {
			more, err := e.store.PendingOperations(ctx, op.App, op.Key, op.Kind, now, k.Coalesce)
			if err != nil {
				return nil, err
			}
			for _, m := range more {
				if m.ID != op.ID && len(group) < k.Coalesce && len(updates)+len(group) < maxClaimWrite {
					group = append(group, m)
				}
			}
		}
		claimed := make([]*Operation, len(group))
		for i, g := range group {
			c := g.Clone()
			c.State, c.Attempt = Running, g.Attempt+1
			c.LeaseOwner, c.LeaseExpiry = e.cfg.WorkerID, now.Add(e.cfg.Lease)
			c.StartTime, c.Progress = now, "claimed by "+e.cfg.WorkerID
			claimed[i] = c
			updates = append(updates, Update{Op: c, ExpectState: g.State, ExpectAttempt: g.Attempt, ClaimKey: i == 0})
		}
		claims = append(claims, claimed)
	}
	if err := e.store.UpdateOperations(ctx, now, updates); err != nil {
		return nil, err
	}
	return claims, nil
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
	claims, _, err := e.claim(ctx, nil, 0)
	if err != nil || len(claims) == 0 {
		return 0, err
	}
	e.runBatches(ctx, e.holdClaimed(claims[0]))
	return len(claims[0]), nil
}

// holdClaimed splits the operations of a claim into the batches of their
// groups, held (their leases renewed) from now on.
func (e *Engine) holdClaimed(claimed []*Operation) []*Batch {
	groups := e.groups(claimed)
	batches := make([]*Batch, len(groups))
	for i, g := range groups {
		batches[i] = &Batch{e: e, kind: e.kind(g[0].Kind), ops: g}
		e.hold(batches[i])
	}
	return batches
}

// runBatches runs held batches, one after the other; when ctx ends, those
// not done go back to pending.
func (e *Engine) runBatches(ctx context.Context, batches []*Batch) {
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
