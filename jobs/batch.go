package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kioku-ai/kioku/fault"
)

// Batch is a claimed group of operations of one kind and key, running as
// one: what a handler (Kind.Run) works on. The engine renews its leases
// while it runs; the handler reads the operations, reports progress, and
// writes along the way with fenced Updates.
type Batch struct {
	e    *Engine
	kind *Kind
	mu   sync.Mutex
	ops  []*Operation
	// lose cancels the handler when the batch's lease is lost (the
	// operation was cancelled, or another worker took it over).
	lose context.CancelCauseFunc
}

// errLeaseLost ends a batch whose operations another writer changed.
var errLeaseLost = errors.New("the operation was cancelled or taken over by another worker")

// Operations returns copies of the batch's operations, the first claimed
// first.
func (b *Batch) Operations() []*Operation {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]*Operation, len(b.ops))
	for i, op := range b.ops {
		out[i] = op.Clone()
	}
	return out
}

// Update changes every operation of the batch as the engine holds them;
// the next lease renewal writes the change.
func (b *Batch) Update(f func(op *Operation)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, op := range b.ops {
		f(op)
	}
}

// Progress sets the operations' progress message.
func (b *Batch) Progress(msg string) { b.Update(func(op *Operation) { op.Progress = msg }) }

// SetResult sets the operations' result (the figures of a run so far).
func (b *Batch) SetResult(result []byte) {
	b.Update(func(op *Operation) { op.Result = slices.Clone(result) })
}

// Updates returns the store updates that replace the batch's operations
// with copies changed by f, each expected to be running at its claimed
// attempt: a write that carries them is refused once the batch lost its
// lease. A handler that writes along the way (a purge, page by page) puts
// them in its writes and applies f with Update once the write succeeded.
func (b *Batch) Updates(f func(op *Operation)) []Update {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Update, 0, len(b.ops))
	for _, op := range b.ops {
		c := op.Clone()
		f(c)
		out = append(out, Update{Op: c, ExpectState: Running, ExpectAttempt: op.Attempt})
	}
	return out
}

// done returns the updates that complete the batch with result.
func (b *Batch) done(result []byte) []Update {
	now := b.e.now()
	var names []string
	for _, op := range b.ops {
		names = append(names, op.Name())
	}
	return b.Updates(func(op *Operation) {
		op.State, op.EndTime, op.Progress = Succeeded, now, "done"
		op.Result = slices.Clone(result)
		op.LeaseOwner, op.LeaseExpiry = "", time.Time{}
		op.CoalescedWith = nil
		if len(names) > 1 {
			op.CoalescedWith = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == op.Name() })
		}
	})
}

// renew extends the batch's leases.
func (b *Batch) renew(ctx context.Context) {
	e := b.e
	expiry := e.now().Add(e.cfg.Lease)
	ups := b.Updates(func(op *Operation) { op.LeaseExpiry = expiry })
	err := e.store.UpdateOperations(ctx, e.now(), ups)
	switch {
	case err == nil:
		b.Update(func(op *Operation) { op.LeaseExpiry = expiry })
	case fault.Is(err, fault.Aborted) || fault.Is(err, fault.NotFound):
		b.mu.Lock()
		if b.lose != nil {
			b.lose(errLeaseLost)
		}
		b.mu.Unlock()
	case ctx.Err() == nil:
		e.log.WarnContext(ctx, "renewing an operation's lease", "operation", b.ops[0].Name(), "error", err)
	}
}

// execute runs the handler and records its outcome: the result, a failed
// attempt, or, when ctx ended (the worker is stopping), the operations
// handed back.
func (b *Batch) execute(ctx context.Context) error {
	e := b.e
	hctx, lose := context.WithCancelCause(ctx)
	defer lose(nil)
	var timedOut error
	if b.kind != nil && b.kind.Timeout > 0 {
		timedOut = fault.New(fault.DeadlineExceeded, "the attempt ran longer than %v, the most one attempt of %s may take", b.kind.Timeout, b.ops[0].Kind)
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeoutCause(hctx, b.kind.Timeout, timedOut)
		defer cancel()
	}
	b.mu.Lock()
	b.lose = lose
	b.mu.Unlock()
	var (
		out *Outcome
		err error
	)
	if b.kind == nil {
		err = fault.Invalidf("unknown operation kind %q", b.ops[0].Kind)
	} else {
		out, err = b.kind.Run(hctx, b)
	}
	if err == nil {
		if out == nil {
			out = &Outcome{}
		}
		// The result is complete: record it even if the worker is stopping.
		done := b.done(out.Result)
		wctx, cancel := context.WithTimeout(context.WithoutCancel(hctx), handBackTimeout)
		if out.Commit != nil {
			err = out.Commit(wctx, done)
		} else {
			err = e.store.UpdateOperations(wctx, e.now(), done)
		}
		cancel()
		if err == nil {
			for _, u := range done {
				e.finished(u.Op)
			}
			return nil
		}
	}
	switch cause := context.Cause(hctx); {
	case errors.Is(cause, errLeaseLost):
		return nil // not ours any more: nothing to record
	case ctx.Err() != nil:
		b.handBack(ctx)
		return nil
	case timedOut != nil && cause == timedOut && !fault.Is(err, fault.Unavailable):
		err = fault.Wrap(fault.DeadlineExceeded, err, "%s", timedOut)
	}
	return b.fail(ctx, err)
}

// handBack returns the batch's operations to pending, due at once, with
// the attempt they had before this worker claimed them and no lease: the
// worker is stopping, and the interrupted attempt does not count.
func (b *Batch) handBack(ctx context.Context) {
	e := b.e
	ups := b.Updates(func(op *Operation) {
		op.State, op.Attempt = Pending, op.Attempt-1
		op.LeaseOwner, op.LeaseExpiry, op.NotBefore = "", time.Time{}, time.Time{}
		op.Progress = "interrupted: " + e.cfg.WorkerID + " stopped; queued again"
	})
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handBackTimeout)
	defer cancel()
	if err := e.store.UpdateOperations(wctx, e.now(), ups); err != nil && !fault.Is(err, fault.Aborted) {
		// Its lease expires instead; the next claim counts the attempt.
		e.log.WarnContext(ctx, "handing back an interrupted operation", "operation", b.ops[0].Name(), "error", err)
	}
}

// backoff returns the wait before the retry of an attempt that failed
// with cause: none after a lost race (Aborted); otherwise full jitter over
// 2^attempt seconds, at least the wait the cause asked for
// (fault.RetryDelayOf), at most MaxRetryDelay.
func (e *Engine) backoff(attempt int, kind fault.Kind, cause error) time.Duration {
	if kind == fault.Aborted {
		return 0
	}
	ceil := e.cfg.MaxRetryDelay
	if attempt < 30 {
		ceil = min(ceil, time.Duration(1<<attempt)*time.Second)
	}
	d := e.cfg.Jitter(ceil)
	if asked := fault.RetryDelayOf(cause); asked > d {
		d = min(asked, e.cfg.MaxRetryDelay)
	}
	return d
}

// fail records a failed attempt: retried later for transient errors (with
// backoff, up to MaxAttempts), failed for good otherwise.
func (b *Batch) fail(ctx context.Context, cause error) error {
	e := b.e
	now := e.now()
	kind := fault.KindOf(cause)
	retry := kind == fault.Unavailable || kind == fault.Aborted || kind == fault.DeadlineExceeded
	ups := b.Updates(func(op *Operation) {
		if retry && op.Attempt < e.cfg.MaxAttempts {
			op.State = Pending
			op.LeaseOwner, op.LeaseExpiry = "", time.Time{}
			op.NotBefore = now.Add(e.backoff(op.Attempt, kind, cause))
			op.Progress = fmt.Sprintf("attempt %d failed (%v); retrying", op.Attempt, cause)
			return
		}
		op.State, op.EndTime = Failed, now
		op.ErrorKind, op.ErrorMessage = kind, cause.Error()
		if retry {
			op.ErrorMessage = fmt.Sprintf("gave up after %d attempts: %v", op.Attempt, cause)
		}
		op.Progress = "failed"
	})
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handBackTimeout)
	defer cancel()
	if err := e.store.UpdateOperations(wctx, now, ups); err != nil {
		if fault.Is(err, fault.Aborted) {
			return nil // cancelled or taken over meanwhile: not ours to record
		}
		return err
	}
	for _, u := range ups {
		if u.Op.State.Done() {
			e.finished(u.Op)
		}
	}
	return cause
}
