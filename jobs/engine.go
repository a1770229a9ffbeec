package jobs

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/resource"
)

// DefaultWorkers is how many runs a process may have going at once by
// default (Config.Workers): a memory generation's run spends its time
// waiting on model calls (up to minutes when a model hangs), not on a
// CPU, so a server runs many, and each owner may hold an eighth of them
// (MaxWorkersPerOwner: 8). How many it has going follows the model's
// latency: the scheduler claims another operation only while fewer than
// Config.CPUWorkers runs are computing (Waiting).
const DefaultWorkers = 64

// Config configures an Engine.
type Config struct {
	// Now and NewID are the clock and the id source (defaults: time.Now and
	// random ids of 20 lower-case letters and digits).
	Now   func() time.Time
	NewID func() string
	// Logger receives the workers' errors. Default slog.Default().
	Logger *slog.Logger

	// WorkerID names this process in leases. Default: a random id.
	WorkerID string
	// Workers is the most runs this process has going at once (Run).
	// Runs mostly wait on a model's replies, so there may be many of them.
	// Default DefaultWorkers.
	Workers int
	// CPUWorkers is how many of them may be computing at once, outside
	// their waits (Waiting): the scheduler claims another operation only
	// when fewer are. So a process runs about CPUWorkers operations at
	// once on a fast model, and on a slow one as many more as wait on it,
	// up to Workers. Default GOMAXPROCS, at least 2, at most Workers.
	CPUWorkers int
	// MaxWorkersPerApp is how many of them the operations of one app may
	// hold while operations of another app wait to be claimed (so that one
	// app whose model is slow, or hangs until its calls time out, does not
	// stop the others); with nothing else waiting, an app may use them
	// all. Default Workers-1, at least 1.
	MaxWorkersPerApp int
	// MaxWorkersPerOwner is how many of them the operations of one owner
	// (a user of an app: Kind.Owner) may hold, even with nothing else
	// waiting, so that the hung model calls of a few users never hold
	// every worker: the operations of an owner at their share wait for the
	// end of one of their runs. Operations without an owner (the app's
	// own) have only the app's share. Default Workers/8, at least 1.
	MaxWorkersPerOwner int
	// Lease is how long a claimed operation stays claimed without renewal.
	// Default 60s.
	Lease time.Duration
	// PollInterval is how long idle workers first wait before they look
	// again for operations queued by other processes; the wait doubles
	// while nothing comes, up to MaxPollInterval. Defaults 500ms and 30s.
	PollInterval, MaxPollInterval time.Duration
	// LocalQueue says that no other process queues operations in the store
	// (the embedded SQLite store): idle workers then never poll. They wait
	// for this process's Enqueue, the end of a run, and the due times of
	// queued operations.
	LocalQueue bool
	// Rank, when set, returns this process's position (0 for the first)
	// among the live processes sharing the store other than holder, a
	// worker whose lease expired: the operations of a worker that died are
	// taken over first by the process ranked first, in one claim (up to
	// its free workers), and by each next one 250ms (at most Lease/8)
	// later, so that two processes do not claim them together (their
	// claims conflict in the store). Nil: every process is first.
	Rank func(holder string) int
	// MaxAttempts is how often an operation is started before it fails
	// for good. Default 5.
	MaxAttempts int
	// MaxRetryDelay caps the wait before an operation's retry: a random
	// time between zero and 2^attempt seconds (full jitter), or longer when
	// the failure asked for it (fault.RetryDelayOf: a model's Retry-After).
	// Default 5m.
	MaxRetryDelay time.Duration
	// Jitter returns a random duration between 0 and d, both included
	// (default: uniform); tests make it deterministic.
	Jitter func(d time.Duration) time.Duration
	// Retention is how long finished operations are kept, and
	// SweepInterval how often Run deletes older ones. Defaults 7 days and
	// 1m.
	Retention, SweepInterval time.Duration
	// MaxQueuedPerKey, MaxQueuedPerOwner and MaxQueuedPerApp bound the
	// operations waiting to run for one key, for one owner (the user the
	// keys name: Kind.Owner, so that a user cannot multiply their share by
	// spreading their operations over keys) and for one app: one more is
	// RESOURCE_EXHAUSTED, so that no caller queues more work than the
	// workers take (concurrent requests may pass the bound by their
	// number). Defaults 20, 30 and 1,000: one owner never holds more than
	// a few percent of an app's queue, nor all of a scheduler's scan.
	MaxQueuedPerKey, MaxQueuedPerOwner, MaxQueuedPerApp int
}

// Kind is a kind of operation and its handler.
type Kind struct {
	// Name is stored with each operation of the kind (Operation.Kind).
	Name string
	// Domain is the domain whose work the kind is, a lower-case word
	// ("memory", "session"): Ended counts the kind's operations under it,
	// so that each domain's operations are counted apart although one
	// engine runs them all.
	Domain string
	// Run runs a claimed batch of the kind's operations (one, or several
	// coalesced ones of one key) and returns its outcome. An error of kind
	// Unavailable, Aborted or DeadlineExceeded is retried with backoff;
	// any other fails the operations.
	Run func(ctx context.Context, b *Batch) (*Outcome, error)
	// Coalesce is the most pending operations of one key a claim takes
	// together (0 or 1: one at a time).
	Coalesce int
	// Group returns the group of a claimed operation: the operations of a
	// claim in one group run as one batch, the groups one after the
	// other. Nil: each operation runs alone.
	Group func(op *Operation) string
	// Timeout, when set, bounds each attempt of a run: past it, the
	// handler's context ends and the attempt fails with DeadlineExceeded
	// (retried, like any transient failure, with backoff).
	Timeout time.Duration
	// Ended, when set, is called on this process for each operation of the
	// kind that ended here (its result written, failed for good, or
	// cancelled through this engine).
	Ended func(op *Operation)
	// Describe renders a key in errors (for example `scope
	// {"user_id":"u1"}`), and Noun names the kind's operations there
	// (default "operations").
	Describe func(key string) string
	Noun     string
	// Owner, when set, returns the owner of a key: the user it names (""
	// for none), whose operations share Config.MaxQueuedPerOwner and take
	// their turn in the scheduler.
	Owner func(key string) string
}

// Outcome is what a batch did.
type Outcome struct {
	// Result is the result of each operation of the batch (Operation.Result).
	Result []byte
	// Commit, when set, writes the batch's effects together with done,
	// the updates that complete its operations, in one transaction whose
	// store checks done's expectations (so that a worker whose lease was
	// taken over writes nothing). Nil: the engine writes done alone.
	Commit func(ctx context.Context, done []Update) error
}

// Engine runs operations: it queues them, claims them with a lease, runs
// them through the handlers of their kinds, and answers their queries. It
// is safe for concurrent use; every process sharing a store runs one.
type Engine struct {
	store Store
	cfg   Config
	now   func() time.Time
	log   *slog.Logger

	kindsMu sync.RWMutex
	kinds   map[string]*Kind

	wake    chan struct{} // an operation was queued here, or a run ended
	heldMu  sync.Mutex
	held    map[*Batch]struct{} // batches whose leases the heartbeat renews
	waitMu  sync.Mutex
	waiters map[string][]chan struct{} // operation name → Wait calls
	ended   map[Count]uint64           // operations ended here (N zero)

	servedMu sync.Mutex
	served   map[[2]string]uint64 // app and owner → the claim that last served them
	claims   uint64
}

// New returns an Engine over store, with no kinds yet (Register).
func New(store Store, cfg Config) *Engine {
	cfg.Now, cfg.NewID = aip.Clock(cfg.Now, cfg.NewID)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.WorkerID == "" {
		cfg.WorkerID = "worker-" + aip.NewID()
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.CPUWorkers <= 0 {
		cfg.CPUWorkers = max(2, runtime.GOMAXPROCS(0))
	}
	cfg.CPUWorkers = min(cfg.CPUWorkers, cfg.Workers)
	if cfg.Lease <= 0 {
		cfg.Lease = 60 * time.Second
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 500 * time.Millisecond
	}
	if cfg.MaxPollInterval < cfg.PollInterval {
		cfg.MaxPollInterval = max(cfg.PollInterval, 30*time.Second)
	}
	if cfg.MaxWorkersPerApp <= 0 {
		cfg.MaxWorkersPerApp = max(1, cfg.Workers-1)
	}
	if cfg.MaxWorkersPerOwner <= 0 {
		cfg.MaxWorkersPerOwner = max(1, cfg.Workers/8)
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 5
	}
	if cfg.MaxRetryDelay <= 0 {
		cfg.MaxRetryDelay = 5 * time.Minute
	}
	if cfg.Jitter == nil {
		cfg.Jitter = func(d time.Duration) time.Duration { return rand.N(d + 1) }
	}
	if cfg.Retention <= 0 {
		cfg.Retention = 7 * 24 * time.Hour
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = time.Minute
	}
	if cfg.MaxQueuedPerKey <= 0 {
		cfg.MaxQueuedPerKey = 20
	}
	if cfg.MaxQueuedPerOwner <= 0 {
		cfg.MaxQueuedPerOwner = 30
	}
	if cfg.MaxQueuedPerApp <= 0 {
		cfg.MaxQueuedPerApp = 1000
	}
	return &Engine{
		store: store, cfg: cfg, now: cfg.Now, log: cfg.Logger,
		kinds: map[string]*Kind{}, wake: make(chan struct{}, 1), held: map[*Batch]struct{}{},
		waiters: map[string][]chan struct{}{}, ended: map[Count]uint64{}, served: map[[2]string]uint64{},
	}
}

// Register adds a kind; its operations run through k.Run. Registering a
// name twice panics: it is a wiring mistake.
func (e *Engine) Register(k Kind) {
	if k.Name == "" || k.Run == nil {
		panic("jobs: a kind needs a name and a Run")
	}
	if k.Domain == "" || strings.Trim(k.Domain, "abcdefghijklmnopqrstuvwxyz") != "" {
		panic("jobs: kind " + k.Name + "'s domain " + strconv.Quote(k.Domain) + " is not a lower-case word")
	}
	e.kindsMu.Lock()
	defer e.kindsMu.Unlock()
	if _, dup := e.kinds[k.Name]; dup {
		panic("jobs: kind " + k.Name + " registered twice")
	}
	e.kinds[k.Name] = &k
}

func (e *Engine) kind(name string) *Kind {
	e.kindsMu.RLock()
	defer e.kindsMu.RUnlock()
	return e.kinds[name]
}

// Enqueue stores a new pending operation of a registered kind for app and
// key, with the kind's request, and wakes the workers. It refuses one when
// the key, or the app, has as many operations waiting as Config allows.
func (e *Engine) Enqueue(ctx context.Context, app, kind, key string, request []byte) (*Operation, error) {
	k := e.kind(kind)
	if k == nil {
		return nil, fault.New(fault.Internal, "operation kind %q is not registered", kind)
	}
	op := &Operation{App: app, ID: e.cfg.NewID(), Kind: kind, State: Pending, Key: key, Request: request, CreateTime: e.now(), Progress: "queued"}
	if k.Owner != nil && key != "" {
		op.Owner = k.Owner(key)
	}
	if err := e.checkQueue(ctx, k, op); err != nil {
		return nil, err
	}
	if err := e.store.CreateOperation(ctx, op); err != nil {
		return nil, err
	}
	e.signal()
	return op, nil
}

// checkQueue refuses an operation when its key, its owner or its app has
// as many operations waiting as Config allows.
func (e *Engine) checkQueue(ctx context.Context, k *Kind, op *Operation) error {
	noun := cmp.Or(k.Noun, "operations")
	if op.Key != "" {
		n, err := e.store.CountPending(ctx, op.App, op.Key, e.cfg.MaxQueuedPerKey)
		if err != nil {
			return err
		}
		if n >= e.cfg.MaxQueuedPerKey {
			what := fmt.Sprintf("key %q", op.Key)
			if k.Describe != nil {
				what = k.Describe(op.Key)
			}
			return fault.New(fault.ResourceExhausted, "%s of app %s has %d %s waiting, as many as it may have; wait for them (WaitOperation) and try again", what, op.App, n, noun)
		}
	}
	if op.Owner != "" {
		n, err := e.store.CountPendingOfOwner(ctx, op.App, op.Owner, e.cfg.MaxQueuedPerOwner)
		if err != nil {
			return err
		}
		if n >= e.cfg.MaxQueuedPerOwner {
			return fault.New(fault.ResourceExhausted, "user %s of app %s has %d %s waiting, across all their keys, as many as one user may have; wait for them (WaitOperation) and try again", op.Owner, op.App, n, noun)
		}
	}
	n, err := e.store.CountPending(ctx, op.App, "", e.cfg.MaxQueuedPerApp)
	if err != nil {
		return err
	}
	if n >= e.cfg.MaxQueuedPerApp {
		return fault.New(fault.ResourceExhausted, "app %s has %d %s waiting, the most one app may have; wait for them (WaitOperation) and try again", op.App, n, noun)
	}
	return nil
}

// validate checks an operation's app and id as a caller gave them.
func validate(app, id string) error {
	if err := resource.ValidateID("app id", app, resource.AppIDChars); err != nil {
		return err
	}
	return resource.ValidateID("operation id", id, resource.MemoryIDChars)
}

// Get returns an operation.
func (e *Engine) Get(ctx context.Context, app, id string) (*Operation, error) {
	if err := validate(app, id); err != nil {
		return nil, err
	}
	return e.store.GetOperation(ctx, app, id)
}

// List returns up to q.Limit operations of app q.App, newest first, after
// the cursor (q.AfterCreate and q.AfterID: the last operation of the
// previous page), only those in q.States when it is not empty. Page
// tokens are the caller's to make of the cursor.
func (e *Engine) List(ctx context.Context, q Query) ([]*Operation, error) {
	if err := resource.ValidateID("app id", q.App, resource.AppIDChars); err != nil {
		return nil, err
	}
	if q.Limit <= 0 {
		return nil, fault.New(fault.Invalid, "a listing of operations needs a positive limit, not %d", q.Limit)
	}
	for _, st := range q.States {
		if _, ok := stateNames[st]; !ok {
			return nil, fault.New(fault.Invalid, "a listing of operations by state names state %d, which is none", st)
		}
	}
	if q.AfterID != "" {
		if err := resource.ValidateID("operation id", q.AfterID, resource.MemoryIDChars); err != nil {
			return nil, err
		}
	}
	return e.store.ListOperations(ctx, q)
}

// Wait returns an operation once it is done, or as it is when timeout
// passes or ctx ends first. An operation that ends on this process wakes
// its waiters at once; otherwise Wait reads it again with a backoff.
func (e *Engine) Wait(ctx context.Context, app, id string, timeout time.Duration) (*Operation, error) {
	op, err := e.Get(ctx, app, id)
	if err != nil || op.State.Done() {
		return op, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := e.subscribe(op.Name())
	defer e.unsubscribe(op.Name(), done)
	delay := 20 * time.Millisecond
	for {
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			// Report the operation as it is; the wait itself did not fail.
			cur, err := e.store.GetOperation(context.WithoutCancel(ctx), app, id)
			if err != nil {
				return op, nil
			}
			return cur, nil
		case <-done:
		case <-t.C:
		}
		t.Stop()
		cur, err := e.store.GetOperation(ctx, app, id)
		if err != nil {
			if ctx.Err() != nil {
				return op, nil // the wait timed out during the read
			}
			return nil, err
		}
		if op = cur; op.State.Done() {
			return op, nil
		}
		delay = min(2*delay, time.Second)
	}
}

func (e *Engine) subscribe(name string) chan struct{} {
	ch := make(chan struct{}, 1)
	e.waitMu.Lock()
	e.waiters[name] = append(e.waiters[name], ch)
	e.waitMu.Unlock()
	return ch
}

func (e *Engine) unsubscribe(name string, ch chan struct{}) {
	e.waitMu.Lock()
	defer e.waitMu.Unlock()
	e.waiters[name] = slices.DeleteFunc(e.waiters[name], func(c chan struct{}) bool { return c == ch })
	if len(e.waiters[name]) == 0 {
		delete(e.waiters, name)
	}
}

// Cancel cancels an operation that has not finished: a pending one never
// runs; a running one's result is discarded (its write is refused).
func (e *Engine) Cancel(ctx context.Context, app, id string) (*Operation, error) {
	for attempt := 0; ; attempt++ {
		op, err := e.Get(ctx, app, id)
		if err != nil {
			return nil, err
		}
		if op.State.Done() {
			return nil, fault.New(fault.FailedPrecondition, "operation %s has already finished (%s)", op.Name(), op.State)
		}
		prev, attemptN := op.State, op.Attempt
		op.State, op.EndTime, op.Progress = Cancelled, e.now(), "cancelled"
		op.ErrorKind, op.ErrorMessage = fault.Canceled, "cancelled by request"
		err = e.store.UpdateOperations(ctx, e.now(), []Update{{Op: op, ExpectState: prev, ExpectAttempt: attemptN}})
		if fault.Is(err, fault.Aborted) && attempt < 5 {
			continue
		}
		if err != nil {
			return nil, err
		}
		e.finished(op)
		return op, nil
	}
}

// finished wakes the waiters of operations that ended in this process,
// counts them, and tells their kinds.
func (e *Engine) finished(ops ...*Operation) {
	domains := make([]string, len(ops))
	for i, op := range ops {
		if k := e.kind(op.Kind); k != nil {
			domains[i] = k.Domain
			if k.Ended != nil {
				k.Ended(op)
			}
		}
	}
	e.waitMu.Lock()
	defer e.waitMu.Unlock()
	for i, op := range ops {
		e.ended[Count{Domain: domains[i], Kind: op.Kind, State: op.State}]++
		for _, ch := range e.waiters[op.Name()] {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// Count is how many operations of a kind ended in a state.
type Count struct {
	// Domain is the kind's (Kind.Domain); empty for an operation of a kind
	// not registered here (cancelled through this engine).
	Domain string
	Kind   string
	State  State
	N      uint64
}

// Ended counts the operations that ended in this process (run by its
// workers or cancelled through it) since it started, by domain, kind and
// final state, in that order.
func (e *Engine) Ended() []Count {
	e.waitMu.Lock()
	defer e.waitMu.Unlock()
	out := make([]Count, 0, len(e.ended))
	for k, n := range e.ended {
		k.N = n
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b Count) int {
		return cmp.Or(strings.Compare(a.Domain, b.Domain), strings.Compare(a.Kind, b.Kind), cmp.Compare(a.State, b.State))
	})
	return out
}

// SweepFinished deletes the finished operations older than the retention
// and returns how many. Run calls it every SweepInterval.
func (e *Engine) SweepFinished(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := e.store.DeleteFinishedOperations(ctx, e.now().Add(-e.cfg.Retention), 500)
		total += n
		if err != nil || n < 500 {
			return total, err
		}
	}
}
