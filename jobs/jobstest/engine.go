package jobstest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/suitetest"
	"github.com/kioku-ai/kioku/jobs"
)

// The engine's rules, through an Engine on the store.

// testRunsOnce: a queued operation runs once, its result is stored with
// its completion, its kind is told, and a second claim finds nothing.
func testRunsOnce(t *testing.T, h *harness) {
	e := h.engine("w1", jobs.Config{})
	op := h.enqueue(e, "app1", "k", request{})
	if op.State != jobs.Pending || op.Progress != "queued" {
		t.Fatalf("enqueued: %s %q", op.State, op.Progress)
	}
	if n := h.drain(e); n != 1 {
		t.Fatalf("ran %d operations", n)
	}
	got := h.get(op)
	if got.State != jobs.Succeeded || got.Attempt != 1 || got.LeaseOwner != "" || got.EndTime.IsZero() || got.Progress != "done" {
		t.Fatalf("after the run: %s attempt %d lease %q end %v %q", got.State, got.Attempt, got.LeaseOwner, got.EndTime, got.Progress)
	}
	if r := decode[result](t, got.Result); !slices.Equal(r.Ran, []string{op.ID}) {
		t.Fatalf("result %s", got.Result)
	}
	h.mu.Lock()
	ended := slices.Clone(h.ended)
	h.mu.Unlock()
	if n := h.drain(e); n != 0 || len(h.ran()) != 1 || !slices.Equal(ended, []string{op.ID}) {
		t.Fatalf("after the end: %d more ran, %d runs, ended %v", n, len(h.ran()), ended)
	}
	if c := e.Ended(); len(c) != 1 || c[0] != (jobs.Count{Domain: domain, Kind: kind, State: jobs.Succeeded, N: 1}) {
		t.Fatalf("Ended = %+v", c)
	}
}

// testRetries: a transient failure is retried after a backoff, a
// permanent one fails at once, and transient ones fail for good after
// MaxAttempts.
func testRetries(t *testing.T, h *harness) {
	e := h.engine("w1", jobs.Config{MaxAttempts: 2})
	flaky := h.enqueue(e, "app1", "k1", request{Fail: "unavailable"})
	bad := h.enqueue(e, "app1", "k2", request{Fail: "invalid"})
	h.drain(e)
	if got := h.get(bad); got.State != jobs.Failed || got.ErrorKind != fault.Invalid || !strings.Contains(got.ErrorMessage, "the test kind fails") {
		t.Fatalf("a permanent failure: %s %v %q", got.State, got.ErrorKind, got.ErrorMessage)
	}
	got := h.get(flaky)
	if got.State != jobs.Pending || got.Attempt != 1 || got.NotBefore.Before(got.StartTime.Add(2*time.Second)) {
		t.Fatalf("a transient failure: %s attempt %d, due %v (claimed %v)", got.State, got.Attempt, got.NotBefore, got.StartTime)
	}
	if n := h.drain(e); n != 0 {
		t.Fatalf("retried during its backoff: %d", n)
	}
	h.clock.Advance(time.Minute)
	h.drain(e)
	if got := h.get(flaky); got.State != jobs.Failed || got.Attempt != 2 || got.ErrorKind != fault.Unavailable || !strings.Contains(got.ErrorMessage, "gave up after 2 attempts") {
		t.Fatalf("after its attempts: %s attempt %d %v %q", got.State, got.Attempt, got.ErrorKind, got.ErrorMessage)
	}
}

// testKeysOneAtATime: an operation of a key that runs elsewhere under a
// live lease waits; one of another key runs.
func testKeysOneAtATime(t *testing.T, h *harness) {
	e := h.engine("w1", jobs.Config{})
	running := h.enqueue(e, "app1", "busy", request{})
	if _, err := h.claimAs(running, "elsewhere", time.Minute); err != nil {
		t.Fatal(err)
	}
	waiting := h.enqueue(e, "app1", "busy", request{})
	free := h.enqueue(e, "app1", "free", request{})
	if n := h.drain(e); n != 1 || h.get(free).State != jobs.Succeeded || h.get(waiting).State != jobs.Pending {
		t.Fatalf("ran %d; free %s, waiting %s", n, h.get(free).State, h.get(waiting).State)
	}
	// Once the other worker's lease is over, the waiting one runs, and the
	// expired one is claimed again, at its second attempt.
	h.clock.Advance(2 * time.Minute)
	h.drain(e)
	if got, w := h.get(running), h.get(waiting); got.State != jobs.Succeeded || got.Attempt != 2 || w.State != jobs.Succeeded {
		t.Fatalf("after the lease: %s attempt %d; waiting %s", got.State, got.Attempt, w.State)
	}
}

// testCoalescingAndGroups: pending operations of one key are claimed
// together and run by group, each group's operations sharing one run and
// naming each other.
func testCoalescingAndGroups(t *testing.T, h *harness) {
	e := h.engine("w1", jobs.Config{})
	var a []*jobs.Operation
	for _, g := range []string{"x", "y", "x", "x"} {
		a = append(a, h.enqueue(e, "app1", "k", request{Group: g}))
	}
	other := h.enqueue(e, "app1", "other", request{Group: "x"})
	if n, err := e.RunOnce(h.ctx); n != 4 || err != nil {
		t.Fatalf("one claim took %d operations (%v), want the key's 4", n, err)
	}
	runs := h.ran()
	if len(runs) != 2 || !slices.Equal(runs[0], []string{a[0].ID, a[2].ID, a[3].ID}) || !slices.Equal(runs[1], []string{a[1].ID}) {
		t.Fatalf("runs = %v; want group x together, then y", runs)
	}
	if got := h.get(a[2]); len(got.CoalescedWith) != 2 || !slices.Contains(got.CoalescedWith, a[0].Name()) || slices.Contains(got.CoalescedWith, a[2].Name()) {
		t.Fatalf("coalesced with %v", got.CoalescedWith)
	}
	if got := h.get(a[1]); got.State != jobs.Succeeded || len(got.CoalescedWith) != 0 {
		t.Fatalf("the lone group: %s, coalesced with %v", got.State, got.CoalescedWith)
	}
	if h.get(other).State != jobs.Pending {
		t.Fatal("an operation of another key was claimed with them")
	}
}

// blockRuns makes the handler wait until release is called (at the latest
// when the test ends) or its context ends; started receives one value per
// run.
func (h *harness) blockRuns() (started <-chan struct{}, release func()) {
	g := suitetest.NewGate(h.t, 8)
	h.mu.Lock()
	h.block = g.Pass
	h.mu.Unlock()
	return g.Started(), g.Open
}

// testHandBack stops a worker in the middle of a run: its operation goes
// back to pending with its attempt unchanged and no lease, and another
// worker completes it at attempt 1.
func testHandBack(t *testing.T, h *harness) {
	e := h.engine("w1", jobs.Config{})
	op := h.enqueue(e, "app1", "k", request{})
	started, _ := h.blockRuns()
	ctx, stop := context.WithCancel(h.ctx)
	ran := make(chan int)
	go func() {
		n, _ := e.RunOnce(ctx)
		ran <- n
	}()
	<-started
	if got := h.get(op); got.State != jobs.Running || got.Attempt != 1 || got.LeaseOwner != "w1" {
		t.Fatalf("while running: %s attempt %d lease %q", got.State, got.Attempt, got.LeaseOwner)
	}
	stop()
	if n := <-ran; n != 1 {
		t.Fatalf("RunOnce ran %d", n)
	}
	got := h.get(op)
	if got.State != jobs.Pending || got.Attempt != 0 || got.LeaseOwner != "" || !got.LeaseExpiry.IsZero() || !strings.Contains(got.Progress, "interrupted") {
		t.Fatalf("handed back: %s attempt %d lease %q %v %q", got.State, got.Attempt, got.LeaseOwner, got.LeaseExpiry, got.Progress)
	}
	h.mu.Lock()
	h.block = nil
	h.mu.Unlock()
	next := h.engine("w2", jobs.Config{})
	if n := h.drain(next); n != 1 || h.get(op).State != jobs.Succeeded || h.get(op).Attempt != 1 {
		t.Fatalf("the next worker: %d ran, %s attempt %d", n, h.get(op).State, h.get(op).Attempt)
	}
}

// testLeaseTakeover: a worker that stalls past its lease loses its
// operation to another, its completion is refused, and the operation ends
// exactly once; one whose workers all died fails after MaxAttempts.
func testLeaseTakeover(t *testing.T, h *harness) {
	e := h.engine("w1", jobs.Config{})
	op := h.enqueue(e, "app1", "k", request{})
	stalled, err := h.claimAs(op, "stalled", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := e.RunOnce(h.ctx); n != 0 {
		t.Fatalf("claimed %d under a live lease", n)
	}
	h.clock.Advance(2 * time.Second)
	if taken, err := h.claimAs(op, "b", time.Minute); err != nil || taken.Attempt != 2 {
		t.Fatalf("takeover = %v, %v", taken, err)
	}
	late := stalled.Clone()
	late.State, late.Result = jobs.Succeeded, encode(result{Ran: []string{"stale"}})
	wantKind(t, "the stale worker's completion", h.store.UpdateOperations(h.ctx, h.clock.Tick(), []jobs.Update{{Op: late, ExpectState: jobs.Running, ExpectAttempt: 1}}), fault.Aborted)
	h.clock.Advance(2 * time.Minute)
	h.drain(e)
	if got := h.get(op); got.State != jobs.Succeeded || got.Attempt != 3 || !slices.Equal(decode[result](t, got.Result).Ran, []string{op.ID}) {
		t.Fatalf("after the takeovers: %s attempt %d %s", got.State, got.Attempt, got.Result)
	}
	dying := h.enqueue(e, "app1", "k2", request{})
	for range 3 {
		if _, err := h.claimAs(dying, "dies", time.Second); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(2 * time.Second)
	}
	h.drain(e)
	if got := h.get(dying); got.State != jobs.Failed || got.Attempt != 3 || !strings.Contains(got.ErrorMessage, "lease expired") {
		t.Fatalf("abandoned three times: %s attempt %d %q", got.State, got.Attempt, got.ErrorMessage)
	}
}

// testTakeoverInOneClaim: the operations of a worker that died (their
// leases expired) are claimed again together, in one claim (one start
// time), up to the free workers and within their owner's share: of an
// owner's three, MaxWorkersPerOwner (2) at once, the third once one of
// theirs ended. A process ranked second (Config.Rank, the dead worker
// left out) takes them over a takeover step (250ms) after their expiry.
func testTakeoverInOneClaim(t *testing.T, h *harness) {
	e := h.engine("w1", jobs.Config{Workers: 8, MaxWorkersPerOwner: 2, LocalQueue: true})
	var dead []*jobs.Operation
	for _, k := range []string{"a", "b", "c", "u1/x", "u1/y", "u1/z"} {
		op := h.enqueue(e, "app1", k, request{})
		if _, err := h.claimAs(op, "dead", time.Second); err != nil {
			t.Fatal(err)
		}
		dead = append(dead, op)
	}
	h.clock.Advance(2 * time.Second)
	started, release := h.blockRuns()
	defer h.start(e)()
	for range 5 {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("the dead worker's operations were not taken over")
		}
	}
	var first time.Time
	taken := 0
	for _, op := range dead {
		got := h.get(op)
		if got.State != jobs.Running || got.Attempt != 2 {
			continue
		}
		if taken++; first.IsZero() {
			first = got.StartTime
		}
		if !got.StartTime.Equal(first) {
			t.Errorf("%s taken over at %v, %s at %v: want one claim", dead[0].Key, first, op.Key, got.StartTime)
		}
	}
	if taken != 5 {
		t.Fatalf("%d operations taken over at once, want 5 (three keys without an owner, two of u1's three)", taken)
	}
	release()
	for _, op := range dead {
		if w, err := e.Wait(h.ctx, "app1", op.ID, 10*time.Second); err != nil || w.State != jobs.Succeeded || w.Attempt != 2 {
			t.Fatalf("%s after the takeover: %+v, %v", op.Key, w, err)
		}
	}

	var holders []string
	second := h.engine("w2", jobs.Config{Rank: func(holder string) int {
		holders = append(holders, holder)
		return 1
	}})
	op := h.enqueue(second, "app1", "d", request{})
	if _, err := h.claimAs(op, "dead", time.Second); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Second + 100*time.Millisecond)
	if n, err := second.RunOnce(h.ctx); err != nil || n != 0 {
		t.Fatalf("ranked second, 100ms after the lease expired: claimed %d, %v; want none", n, err)
	}
	h.clock.Advance(200 * time.Millisecond)
	if n, err := second.RunOnce(h.ctx); err != nil || n != 1 {
		t.Fatalf("ranked second, 300ms after the lease expired: claimed %d, %v; want it", n, err)
	}
	if len(holders) == 0 || holders[0] != "dead" {
		t.Fatalf("Rank asked about %v, want the dead worker", holders)
	}
}

// testHeartbeat runs Run with a short lease: while a run waits, the
// heartbeat renews its lease; when its operation is cancelled the renewal
// is refused and the handler's context ends; when Run's context ends the
// operation held goes back to pending and Run returns.
func testHeartbeat(t *testing.T, h *harness) {
	const lease = 300 * time.Millisecond
	e := h.engine("beating", jobs.Config{Lease: lease, Workers: 1, LocalQueue: true})
	started, _ := h.blockRuns()
	first := h.enqueue(e, "app1", "k1", request{})
	stop, ended := suitetest.Start(h.ctx, e.Run)
	<-started
	claimed := h.get(first)
	deadline := time.Now().Add(10 * time.Second)
	for !h.get(first).LeaseExpiry.After(claimed.LeaseExpiry) {
		if time.Now().After(deadline) {
			t.Fatal("the lease was never renewed")
		}
		time.Sleep(lease / 3)
	}
	// Cancelled meanwhile: the next renewal is refused and the handler
	// stops; the operation stays cancelled.
	if _, err := e.Cancel(h.ctx, "app1", first.ID); err != nil {
		t.Fatal(err)
	}
	second := h.enqueue(e, "app1", "k2", request{})
	<-started // the second runs once the first's handler stopped
	if got := h.get(first); got.State != jobs.Cancelled {
		t.Fatalf("the cancelled operation: %s", got.State)
	}
	stop()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if got := h.get(second); got.State != jobs.Pending || got.Attempt != 0 || got.LeaseOwner != "" {
		t.Fatalf("after Run returned: %s attempt %d lease %q", got.State, got.Attempt, got.LeaseOwner)
	}
}

func testCancelAndWait(t *testing.T, h *harness) {
	e := h.engine("w1", jobs.Config{})
	a := h.enqueue(e, "app1", "k1", request{})
	b := h.enqueue(e, "app1", "k2", request{})
	if c, err := e.Cancel(h.ctx, "app1", b.ID); err != nil || c.State != jobs.Cancelled || c.ErrorKind != fault.Canceled {
		t.Fatalf("Cancel = %+v, %v", c, err)
	}
	if w, err := e.Wait(h.ctx, "app1", a.ID, 50*time.Millisecond); err != nil || w.State != jobs.Pending {
		t.Fatalf("Wait before the run = %v, %v", w, err)
	}
	waited := make(chan *jobs.Operation)
	go func() {
		w, _ := e.Wait(h.ctx, "app1", a.ID, 10*time.Second)
		waited <- w
	}()
	h.drain(e)
	if w := <-waited; w == nil || w.State != jobs.Succeeded {
		t.Fatalf("Wait during the run = %+v", w)
	}
	if ran := h.ran(); len(ran) != 1 || ran[0][0] != a.ID {
		t.Fatalf("runs = %v; the cancelled operation ran", ran)
	}
	_, err := e.Cancel(h.ctx, "app1", a.ID)
	wantKind(t, "cancelling a finished operation", err, fault.FailedPrecondition)
	_, err = e.Get(h.ctx, "app2", a.ID)
	wantKind(t, "an operation of another app", err, fault.NotFound)
	_, err = e.Get(h.ctx, "app1", "a/b")
	wantKind(t, "a malformed id", err, fault.Invalid)
	list, err := e.List(h.ctx, jobs.Query{App: "app1", States: []jobs.State{jobs.Cancelled}, Limit: 10})
	if err != nil || len(list) != 1 || list[0].ID != b.ID {
		t.Fatalf("List(CANCELLED) = %v, %v", ids(list), err)
	}
	page, err := e.List(h.ctx, jobs.Query{App: "app1", Limit: 1})
	if err != nil || len(page) != 1 || page[0].ID != b.ID {
		t.Fatalf("List page 1 = %v, %v", ids(page), err)
	}
	q := jobs.Query{App: "app1", AfterCreate: page[0].CreateTime, AfterID: page[0].ID, Limit: 1}
	if page, err = e.List(h.ctx, q); err != nil || len(page) != 1 || page[0].ID != a.ID {
		t.Fatalf("List page 2 = %v, %v", ids(page), err)
	}
	q.AfterCreate, q.AfterID = page[0].CreateTime, page[0].ID
	if page, err = e.List(h.ctx, q); err != nil || len(page) != 0 {
		t.Fatalf("List page 3 = %v, %v; want none", ids(page), err)
	}
	for _, bad := range []jobs.Query{{App: "app/1", Limit: 1}, {App: "app1"}, {App: "app1", States: []jobs.State{jobs.Unspecified}, Limit: 1}, {App: "app1", AfterID: "a/b", Limit: 1}} {
		_, err := e.List(h.ctx, bad)
		wantKind(t, fmt.Sprintf("List(%+v)", bad), err, fault.Invalid)
	}
}

// testBounds: a key, or an app, with as many operations waiting as the
// engine allows refuses one more, until the queue drains.
func testBounds(t *testing.T, h *harness) {
	e := h.engine("bounded", jobs.Config{MaxQueuedPerKey: 2, MaxQueuedPerApp: 3})
	for range 2 {
		h.enqueue(e, "app1", "k1", request{})
	}
	_, err := e.Enqueue(h.ctx, "app1", kind, "k1", encode(request{}))
	wantKind(t, "a third operation of one key", err, fault.ResourceExhausted)
	if !strings.Contains(err.Error(), "test key k1 of app app1 has 2 test operations waiting") {
		t.Errorf("the key's bound: %v", err)
	}
	h.enqueue(e, "app1", "k2", request{})
	_, err = e.Enqueue(h.ctx, "app1", kind, "k3", encode(request{}))
	wantKind(t, "a fourth operation of one app", err, fault.ResourceExhausted)
	if !strings.Contains(err.Error(), "app app1 has 3 test operations waiting") {
		t.Errorf("the app's bound: %v", err)
	}
	h.enqueue(e, "app2", "k1", request{})
	h.drain(e)
	h.enqueue(e, "app1", "k1", request{})

	// One owner's keys share its bound: a fourth key does not add to it.
	e = h.engine("bounded", jobs.Config{MaxQueuedPerOwner: 3})
	for _, k := range []string{"u1/a", "u1/b", "u1/c"} {
		if op := h.enqueue(e, "app3", k, request{}); op.Owner != "u1" {
			t.Fatalf("Enqueue(%s) gave owner %q", k, op.Owner)
		}
	}
	_, err = e.Enqueue(h.ctx, "app3", kind, "u1/d", encode(request{}))
	wantKind(t, "a fourth operation of one owner, under a fourth key", err, fault.ResourceExhausted)
	if !strings.Contains(err.Error(), "user u1 of app app3 has 3 test operations waiting, across all their keys") {
		t.Errorf("the owner's bound: %v", err)
	}
	h.enqueue(e, "app3", "u2/a", request{})
	h.enqueue(e, "app3", "backend", request{})
	h.enqueue(e, "app4", "u1/a", request{})
}

// testOwnersTakeTurns: when one owner has many operations queued, over
// many keys, another owner's operation and one without an owner run in
// turn with them, not after all of them.
func testOwnersTakeTurns(t *testing.T, h *harness) {
	e := h.engine("w1", jobs.Config{})
	var order []string
	ids := map[string]string{}
	for i := range 6 {
		k := fmt.Sprintf("u1/%d", i)
		ids[h.enqueue(e, "app1", k, request{}).ID] = k
	}
	ids[h.enqueue(e, "app1", "u2/0", request{}).ID] = "u2/0"
	ids[h.enqueue(e, "app1", "backend", request{}).ID] = "backend"
	for {
		n, err := e.RunOnce(h.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	for _, run := range h.ran() {
		for _, id := range run {
			order = append(order, ids[id])
		}
	}
	want := []string{"u1/0", "u2/0", "backend", "u1/1", "u1/2", "u1/3", "u1/4", "u1/5"}
	if !slices.Equal(order, want) {
		t.Errorf("ran %v; want %v (each owner in turn)", order, want)
	}
}

// testRetention: finished operations are kept for the retention, then
// swept; those not finished stay.
func testRetention(t *testing.T, h *harness) {
	e := h.engine("w1", jobs.Config{Retention: time.Hour})
	done := h.enqueue(e, "app1", "k1", request{})
	h.drain(e)
	waiting := h.enqueue(e, "app1", "k2", request{Fail: "unavailable"})
	h.clock.Advance(30 * time.Minute)
	if n, err := e.SweepFinished(h.ctx); n != 0 || err != nil {
		t.Fatalf("SweepFinished within the retention = %d, %v", n, err)
	}
	h.clock.Advance(time.Hour)
	if n, err := e.SweepFinished(h.ctx); n != 1 || err != nil {
		t.Fatalf("SweepFinished past the retention = %d, %v", n, err)
	}
	_, err := h.store.GetOperation(h.ctx, "app1", done.ID)
	wantKind(t, "an operation past its retention", err, fault.NotFound)
	if h.get(waiting).State != jobs.Pending {
		t.Fatal("a pending operation was swept")
	}
}

// testUnknownKind: an operation of a kind no engine registered fails with
// a clear error rather than staying queued.
func testUnknownKind(t *testing.T, h *harness) {
	e := h.engine("w1", jobs.Config{})
	if _, err := e.Enqueue(h.ctx, "app1", "Nope", "k", nil); err == nil || fault.KindOf(err) != fault.Internal {
		t.Fatalf("Enqueue of an unregistered kind: %v", err)
	}
	op := h.newOp("app1", "stray", "k")
	op.Kind = "Nope"
	h.create(op)
	h.drain(e)
	if got := h.get(op); got.State != jobs.Failed || got.ErrorKind != fault.Invalid || !strings.Contains(got.ErrorMessage, `unknown operation kind "Nope"`) {
		t.Fatalf("an operation of an unknown kind: %s %v %q", got.State, got.ErrorKind, got.ErrorMessage)
	}
	// It counts, without a domain: none registered it here.
	if c := e.Ended(); len(c) != 1 || c[0] != (jobs.Count{Kind: "Nope", State: jobs.Failed, N: 1}) {
		t.Fatalf("Ended = %+v", c)
	}
}

// testWakeUps: with a local queue, Run sleeps without polling and an
// Enqueue wakes it at once.
func testWakeUps(t *testing.T, h *harness) {
	e := h.engine("w1", jobs.Config{LocalQueue: true, PollInterval: time.Hour})
	defer h.start(e)()
	time.Sleep(50 * time.Millisecond) // Run is asleep with nothing to do
	op := h.enqueue(e, "app1", "k", request{})
	if w, err := e.Wait(h.ctx, "app1", op.ID, 10*time.Second); err != nil || w.State != jobs.Succeeded {
		t.Fatalf("an operation queued while Run slept: %+v, %v", w, err)
	}
}

// start runs e's workers (Run) until the function it returns is called,
// which returns once Run did.
func (h *harness) start(e *jobs.Engine) (stop func()) {
	cancel, ended := suitetest.Start(h.ctx, e.Run)
	return func() {
		cancel()
		<-ended
	}
}
