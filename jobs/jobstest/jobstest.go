// Package jobstest is the conformance suite of jobs.Store: every store of
// operations runs Run and must pass all of it (the memory bank's stores in
// internal/memorystore, and package jobs on the SQLite store). The suite
// checks the store's primitives directly (the record, the queue, the
// conditional writes and their fencing, the deletions) and the engine's
// rules through a jobs.Engine on the store with a kind of its own: a run
// exactly once, retries and their backoff, keys run one at a time,
// coalescing and groups, work handed back when a worker stops, leases
// renewed and taken over (a dead worker's operations in one claim, by
// rank), cancellation, waiting, the queue's bounds and the retention of
// finished operations, the shares of the workers one app
// and one owner may hold (and a long queue of work that waits for them
// hiding nothing), the attempts' timeout and the waits before retries.
package jobstest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/suitetest"
	"github.com/kioku-ai/kioku/jobs"
)

// Run runs the conformance suite, each case on an empty store of its own
// from newStore, which registers the store's cleanup with t.Cleanup (the
// suite closes nothing).
func Run[S jobs.Store](t *testing.T, newStore func(t *testing.T) S) {
	tests := []suitetest.Case[*harness]{
		{Name: "CreateGetList", Run: testCreateGetList},
		{Name: "RecordRoundTrip", Run: testRecordRoundTrip},
		{Name: "Queue", Run: testQueue},
		{Name: "CountPending", Run: testCountPending},
		{Name: "UpdateExpectations", Run: testUpdateExpectations},
		{Name: "ClaimKey", Run: testClaimKey},
		{Name: "Deletions", Run: testDeletions},
		{Name: "RunsOnce", Run: testRunsOnce},
		{Name: "Retries", Run: testRetries},
		{Name: "KeysOneAtATime", Run: testKeysOneAtATime},
		{Name: "OwnersTakeTurns", Run: testOwnersTakeTurns},
		{Name: "CoalescingAndGroups", Run: testCoalescingAndGroups},
		{Name: "HandBack", Run: testHandBack},
		{Name: "LeaseTakeover", Run: testLeaseTakeover},
		{Name: "TakeoverInOneClaim", Run: testTakeoverInOneClaim},
		{Name: "Heartbeat", Run: testHeartbeat},
		{Name: "CancelAndWait", Run: testCancelAndWait},
		{Name: "Bounds", Run: testBounds},
		{Name: "Retention", Run: testRetention},
		{Name: "UnknownKind", Run: testUnknownKind},
		{Name: "WakeUps", Run: testWakeUps},
		{Name: "ShareOfWorkers", Run: testShareOfWorkers},
		{Name: "ShareOfOwner", Run: testShareOfOwner},
		{Name: "OwnerAtShareHidesNothing", Run: testOwnerAtShareHidesNothing},
		{Name: "BusyKeyHidesNothing", Run: testBusyKeyHidesNothing},
		{Name: "AttemptTimeout", Run: testAttemptTimeout},
		{Name: "RetryDelay", Run: testRetryDelay},
	}
	suitetest.Run(t, tests, func(t *testing.T) *harness { return newHarness(t, newStore(t)) })
}

// kind is the name of the suite's kind of operations, and domain its
// domain.
const (
	kind   = "Test"
	domain = "test"
)

// request is the suite's kind's request: what its handler does.
type request struct {
	// Group is the operation's group (Kind.Group).
	Group string `json:"group,omitempty"`
	// Fail, when set, is the kind of the error the handler returns.
	Fail string `json:"fail,omitempty"`
	// RetryAfter, with Fail, is the wait the error asks for before a retry
	// (fault.WithRetryDelay).
	RetryAfter time.Duration `json:"retry_after,omitempty"`
	// Hang makes the handler wait until its context ends or the test does
	// (a run whose model never answers).
	Hang bool `json:"hang,omitempty"`
}

// result is the suite's kind's result.
type result struct {
	// Ran lists the operations of the batch that produced it.
	Ran []string `json:"ran"`
}

type harness struct {
	t     *testing.T
	ctx   context.Context
	store jobs.Store
	clock *suitetest.Clock

	mu sync.Mutex
	// runs lists the batches the handler ran (their operations' ids).
	runs [][]string
	// ended lists the operations the Ended hook saw.
	ended []string
	// block, when set, is called at the start of every run.
	block func(ctx context.Context) error
	// hanging receives one value for each run of a request that hangs; the
	// runs hang until hangOver is closed (when the test ends).
	hanging  chan string
	hangOver chan struct{}
	// timeout is the kind's Timeout.
	timeout time.Duration
}

func newHarness(t *testing.T, store jobs.Store) *harness {
	h := &harness{
		t: t, ctx: t.Context(), store: store, clock: suitetest.NewClock(time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC), time.Microsecond),
		hanging: make(chan string, 16), hangOver: make(chan struct{}),
	}
	t.Cleanup(func() { close(h.hangOver) })
	return h
}

// engine returns an engine on the store with the suite's kind, worker as
// its worker id; cfg's zero fields take the suite's defaults.
func (h *harness) engine(worker string, cfg jobs.Config) *jobs.Engine {
	cfg.WorkerID = worker
	if cfg.Now == nil {
		cfg.Now = h.clock.Tick
	}
	if cfg.Lease == 0 {
		cfg.Lease = time.Minute
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 3
	}
	if cfg.Jitter == nil {
		cfg.Jitter = func(d time.Duration) time.Duration { return d } // the longest wait
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	e := jobs.New(h.store, cfg)
	e.Register(jobs.Kind{
		Name: kind, Domain: domain, Run: h.run, Coalesce: 8, Timeout: h.timeout,
		Group: func(op *jobs.Operation) string { return decode[request](h.t, op.Request).Group },
		Ended: func(op *jobs.Operation) {
			h.mu.Lock()
			h.ended = append(h.ended, op.ID)
			h.mu.Unlock()
		},
		Describe: func(key string) string { return "test key " + key },
		Noun:     "test operations",
		Owner:    keyOwner,
	})
	return e
}

// run is the handler of the suite's kind.
func (h *harness) run(ctx context.Context, b *jobs.Batch) (*jobs.Outcome, error) {
	ops := b.Operations()
	var ids []string
	for _, op := range ops {
		ids = append(ids, op.ID)
	}
	h.mu.Lock()
	h.runs = append(h.runs, ids)
	block := h.block
	h.mu.Unlock()
	if block != nil {
		if err := block(ctx); err != nil {
			return nil, err
		}
	}
	r := decode[request](h.t, ops[0].Request)
	if r.Hang {
		h.hanging <- ops[0].App + "/" + ops[0].Key
		select {
		case <-h.hangOver:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if f := r.Fail; f != "" {
		k := fault.Unavailable
		if f == "invalid" {
			k = fault.Invalid
		}
		return nil, fault.WithRetryDelay(fault.New(k, "the test kind fails (%s)", f), r.RetryAfter)
	}
	return &jobs.Outcome{Result: encode(result{Ran: ids})}, nil
}

func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func decode[T any](t *testing.T, b []byte) T {
	var v T
	if len(b) > 0 {
		if err := json.Unmarshal(b, &v); err != nil {
			t.Errorf("decoding %s: %v", b, err)
		}
	}
	return v
}

// enqueue queues an operation of the suite's kind through e.
func (h *harness) enqueue(e *jobs.Engine, app, key string, r request) *jobs.Operation {
	h.t.Helper()
	op, err := e.Enqueue(h.ctx, app, kind, key, encode(r))
	if err != nil {
		h.t.Fatalf("Enqueue(%s, %q): %v", app, key, err)
	}
	return op
}

// get reads an operation from the store.
func (h *harness) get(op *jobs.Operation) *jobs.Operation {
	h.t.Helper()
	got, err := h.store.GetOperation(h.ctx, op.App, op.ID)
	if err != nil {
		h.t.Fatal(err)
	}
	return got
}

// drain runs operations until none is left and returns how many ran.
func (h *harness) drain(e *jobs.Engine) int {
	h.t.Helper()
	total := 0
	for range 50 {
		n, _ := e.RunOnce(h.ctx) // failures are recorded on the operations
		if n == 0 {
			return total
		}
		total += n
	}
	h.t.Fatal("operations keep coming")
	return total
}

// ran returns the batches run so far.
func (h *harness) ran() [][]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.runs)
}

// claimAs claims op for owner the way the engine does, through the
// store's primitives, and returns the claimed operation.
func (h *harness) claimAs(op *jobs.Operation, owner string, lease time.Duration) (*jobs.Operation, error) {
	cur, err := h.store.GetOperation(h.ctx, op.App, op.ID)
	if err != nil {
		return nil, err
	}
	now := h.clock.Tick()
	c := cur.Clone()
	c.State, c.Attempt, c.LeaseOwner, c.LeaseExpiry, c.StartTime = jobs.Running, cur.Attempt+1, owner, now.Add(lease), now
	return c, h.store.UpdateOperations(h.ctx, now, []jobs.Update{{Op: c, ExpectState: cur.State, ExpectAttempt: cur.Attempt, ClaimKey: true}})
}

func wantKind(t *testing.T, what string, err error, k fault.Kind) {
	t.Helper()
	if err == nil || fault.KindOf(err) != k {
		t.Fatalf("%s: error %v (kind %v), want %v", what, err, fault.KindOf(err), k)
	}
}

// ids returns the ids of operations.
func ids(ops []*jobs.Operation) []string {
	var out []string
	for _, op := range ops {
		out = append(out, op.ID)
	}
	return out
}

// newOp returns a pending operation of the suite's kind, not stored.
func (h *harness) newOp(app, id, key string) *jobs.Operation {
	return &jobs.Operation{App: app, ID: id, Kind: kind, State: jobs.Pending, Key: key, Request: encode(request{}), CreateTime: h.clock.Tick(), Progress: "queued"}
}

// create stores operations.
func (h *harness) create(ops ...*jobs.Operation) {
	h.t.Helper()
	for _, op := range ops {
		if err := h.store.CreateOperation(h.ctx, op); err != nil {
			h.t.Fatalf("CreateOperation(%s): %v", op.Name(), err)
		}
	}
}

// keyOwner is the owner of a key of the suite's kind: what precedes its
// '/' (u1 for u1/a); a key without one has no owner.
func keyOwner(key string) string {
	owner, _, ok := strings.Cut(key, "/")
	if !ok {
		return ""
	}
	return owner
}

// describe renders a list of ids.
func describe(ids []string) string { return fmt.Sprint(ids) }
