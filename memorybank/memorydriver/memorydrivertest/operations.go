package memorydrivertest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/suitetest"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/modeltest"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// The memory bank's operations on the jobs engine: leases and
// exactly-once completion, the queue, work handed back, lease renewal,
// coalescing, cancellation.

// claimAs claims op for owner the way the scheduler does, through the
// store's primitives, and returns the claimed operation.
func (h *harness) claimAs(op *Operation, owner string, lease time.Duration) (*jobs.Operation, error) {
	cur, err := h.store.GetOperation(h.ctx, op.App, op.ID)
	if err != nil {
		return nil, err
	}
	now := h.clock.Tick()
	c := *cur
	c.State, c.Attempt, c.LeaseOwner, c.LeaseExpiry, c.StartTime = jobs.Running, cur.Attempt+1, owner, now.Add(lease), now
	err = h.store.Write(h.ctx, &memorydriver.Write{App: op.App, Now: now, Operations: []jobs.Update{{Op: &c, ExpectState: cur.State, ExpectAttempt: cur.Attempt, ClaimKey: true}}})
	return &c, err
}

func testLeaseFencing(t *testing.T, h *harness) {
	op, err := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Facts: []memorybank.DirectFact{{Fact: "The user speaks French."}}})
	if err != nil {
		t.Fatal(err)
	}
	// Worker A claims it, then stalls past its lease.
	claimed, err := h.claimAs(op, "stalled", time.Second)
	if err != nil || claimed.Attempt != 1 {
		t.Fatalf("claim = %v, %v", claimed, err)
	}
	// A running operation with a live lease is not claimed again, and its
	// scope is busy for any other operation.
	if n, err := h.noGen.RunOnce(h.ctx); n != 0 || err != nil {
		t.Fatalf("RunOnce claimed %d operations (%v) under a live lease", n, err)
	}
	other, err := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Facts: []memorybank.DirectFact{{Fact: "The user speaks Basque."}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.claimAs(other, "other", time.Second)
	wantKind(t, "claiming a busy scope", err, fault.Aborted)
	if _, err := h.svc.CancelOperation(h.ctx, "app1", other.ID); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(2 * time.Second)
	// Worker B takes it over (attempt 2) while A is still alive.
	taken, err := h.claimAs(op, "b", time.Minute)
	if err != nil || taken.Attempt != 2 {
		t.Fatalf("takeover claim = %v, %v", taken, err)
	}
	// Worker A wakes up: its completion is refused (the operation is
	// running, but at attempt 2) and changes nothing.
	stale := *claimed
	stale.State = jobs.Succeeded
	err = h.store.Write(h.ctx, &memorydriver.Write{
		App: "app1", Now: h.clock.Tick(),
		Changes: []memorydriver.Change{{
			Memory:   &memorytype.Memory{App: "app1", ID: "stale", Fact: "The user speaks French.", Scope: user1, Revision: 1, CreateTime: h.clock.Tick(), UpdateTime: h.clock.Tick()},
			Revision: &memorytype.Revision{App: "app1", MemoryID: "stale", Number: 1, Action: memorytype.Created, Fact: "x", CreateTime: h.clock.Tick()},
		}},
		Operations: []jobs.Update{{Op: &stale, ExpectState: jobs.Running, ExpectAttempt: 1}},
	})
	wantKind(t, "stale worker's completion", err, fault.Aborted)
	if got := h.facts(user1); len(got) != 0 {
		t.Fatalf("stale write applied: %v", got)
	}
	// B dies too; a live worker finishes the operation exactly once.
	h.clock.Advance(2 * time.Minute)
	h.drain(h.noGen)
	done := h.op(op)
	if done.State != jobs.Succeeded || done.Attempt != 3 {
		t.Fatalf("after takeovers: %s attempt %d %s", done.State, done.Attempt, done.ErrorMessage)
	}
	if got := h.facts(user1); len(got) != 1 {
		t.Fatalf("memories after completion: %v", got)
	}
	// An operation whose workers all died is failed after MaxAttempts (3).
	dying, _ := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Facts: []memorybank.DirectFact{{Fact: "x"}}})
	for i := range 3 {
		if _, err := h.claimAs(dying, fmt.Sprint("dies-", i), time.Second); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(2 * time.Second)
	}
	h.drain(h.noGen)
	if got := h.op(dying); got.State != jobs.Failed || got.Attempt != 3 || !strings.Contains(got.ErrorMessage, "lease expired") {
		t.Fatalf("abandoned three times: %s attempt %d %q", got.State, got.Attempt, got.ErrorMessage)
	}
}

// testQueue checks the primitives the scheduler finds work with.
// testQueueBounds: CountPending counts an app's (or a scope's) pending
// operations up to its limit, and the service refuses a generation or a
// purge beyond its scope's or its app's bound, until the queue drains.
func testQueueBounds(t *testing.T, h *harness) {
	cfg := memorybank.Config{
		Embedder: model.Offline{}, Sessions: h.sess, Now: h.clock.Tick,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	svc := NewWorker(h.store, cfg, jobs.Config{WorkerID: "bounded", MaxQueuedPerKey: 3, MaxQueuedPerApp: 5})
	gen := func(app, user string) error {
		_, err := svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: app, Scope: memorytype.Scope{"user_id": user}, Facts: []memorybank.DirectFact{{Fact: "A fact of " + user + "."}}})
		return err
	}
	for range 3 {
		if err := gen("app1", "u1"); err != nil {
			t.Fatal(err)
		}
	}
	err := gen("app1", "u1")
	wantKind(t, "a fourth generation of one scope", err, fault.ResourceExhausted)
	if err == nil || !strings.Contains(err.Error(), `scope {"user_id":"u1"} of app app1 has 3 memory operations waiting`) {
		t.Errorf("the scope's bound: %v", err)
	}
	for _, u := range []string{"u2", "u3"} {
		if err := gen("app1", u); err != nil {
			t.Fatalf("another scope: %v", err)
		}
	}
	err = gen("app1", "u4")
	wantKind(t, "a sixth operation of one app", err, fault.ResourceExhausted)
	if err == nil || !strings.Contains(err.Error(), "app app1 has 5 memory operations waiting") {
		t.Errorf("the app's bound: %v", err)
	}
	_, err = svc.PurgeMemories(h.ctx, &memorybank.PurgeRequest{App: "app1"})
	wantKind(t, "a purge over the app's bound", err, fault.ResourceExhausted)
	if err := gen("app2", "u1"); err != nil {
		t.Errorf("another app: %v", err)
	}
	for _, c := range []struct {
		app, scope string
		limit, n   int
	}{{"app1", "", 100, 5}, {"app1", "", 4, 4}, {"app1", memorytype.Scope{"user_id": "u1"}.Key(), 100, 3}, {"app2", "", 100, 1}, {"app3", "", 100, 0}} {
		if n, err := h.store.CountPending(h.ctx, c.app, c.scope, c.limit); err != nil || n != c.n {
			t.Errorf("CountPending(%s, %q, %d) = %d, %v; want %d", c.app, c.scope, c.limit, n, err, c.n)
		}
	}
	if n := h.drain(svc); n == 0 {
		t.Fatal("nothing ran")
	}
	if n, err := h.store.CountPending(h.ctx, "app1", "", 100); err != nil || n != 0 {
		t.Fatalf("CountPending after the queue ran: %d, %v", n, err)
	}
	if err := gen("app1", "u1"); err != nil {
		t.Errorf("after the queue ran: %v", err)
	}

	// A user's scopes share the user's bound: a scope key more per
	// request ({"user_id":"bob","n":"1"}, "n":"2", ...) does not add to
	// it, and other users and scopes without a user still queue.
	svc = NewWorker(h.store, cfg, jobs.Config{WorkerID: "per-user", MaxQueuedPerOwner: 3, MaxQueuedPerApp: 100})
	genScope := func(scope memorytype.Scope) error {
		_, err := svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app4", Scope: scope, Facts: []memorybank.DirectFact{{Fact: "A fact."}}})
		return err
	}
	for i := range 3 {
		if err := genScope(memorytype.Scope{"user_id": "bob", "n": strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	err = genScope(memorytype.Scope{"user_id": "bob", "n": "3"})
	wantKind(t, "a fourth generation of one user, in a fourth scope", err, fault.ResourceExhausted)
	if err == nil || !strings.Contains(err.Error(), "user bob of app app4 has 3 memory operations waiting, across all their keys") {
		t.Errorf("the user's bound: %v", err)
	}
	_, err = svc.PurgeMemories(h.ctx, &memorybank.PurgeRequest{App: "app4", Scope: memorytype.Scope{"user_id": "bob", "n": "4"}})
	wantKind(t, "a purge of the user over their bound", err, fault.ResourceExhausted)
	for _, scope := range []memorytype.Scope{{"user_id": "alice"}, {"user_id": "alice", "n": "1"}, {"agent": "a1"}} {
		if err := genScope(scope); err != nil {
			t.Errorf("scope %v while bob is at his bound: %v", scope, err)
		}
	}
}

func testQueue(t *testing.T, h *harness) {
	gen := func(scope memorytype.Scope, fact string) *Operation {
		op, err := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: scope, Facts: []memorybank.DirectFact{{Fact: fact}}})
		if err != nil {
			t.Fatal(err)
		}
		return op
	}
	u2 := memorytype.Scope{"user_id": "u2"}
	a := gen(user1, "a")
	b := gen(u2, "b")
	c := gen(user1, "c")
	purge, err := h.noGen.PurgeMemories(h.ctx, &memorybank.PurgeRequest{App: "app2", Scope: user1})
	if err != nil {
		t.Fatal(err)
	}
	done := gen(memorytype.Scope{"user_id": "u3"}, "d")
	if _, err := h.noGen.CancelOperation(h.ctx, "app1", done.ID); err != nil {
		t.Fatal(err)
	}
	// b runs (lease of a minute): it moves behind the pending ones.
	if _, err := h.claimAs(b, "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	q, err := h.store.QueuedOperations(h.ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, op := range q {
		got = append(got, op.ID+":"+op.State.String())
	}
	want := []string{a.ID + ":PENDING", c.ID + ":PENDING", purge.ID + ":PENDING", b.ID + ":RUNNING"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("QueuedOperations (-want +got):\n%s", diff)
	}
	if q, _ := h.store.QueuedOperations(h.ctx, 2); len(q) != 2 || q[0].ID != a.ID {
		t.Fatalf("QueuedOperations(2) = %d operations", len(q))
	}
	p, err := h.store.PendingOperations(h.ctx, "app1", user1.Key(), memorybank.KindGenerate, h.clock.Tick(), 10)
	if err != nil || len(p) != 2 || p[0].ID != a.ID || p[1].ID != c.ID {
		t.Fatalf("PendingOperations = %v, %v; want a and c", p, err)
	}
	if p, _ := h.store.PendingOperations(h.ctx, "app1", user1.Key(), memorybank.KindGenerate, a.CreateTime.Add(-time.Second), 10); len(p) != 0 {
		t.Fatalf("PendingOperations before they were due = %d", len(p))
	}
	if p, _ := h.store.PendingOperations(h.ctx, "app1", user1.Key(), memorybank.KindPurge, h.clock.Tick(), 10); len(p) != 0 {
		t.Fatalf("PendingOperations of another method = %d", len(p))
	}
	// One claim takes a with c (same scope, coalesced), then the purge,
	// then nothing: b's scope is busy until its lease ends.
	if n, _ := h.noGen.RunOnce(h.ctx); n != 2 {
		t.Fatalf("first claim took %d operations, want a and c", n)
	}
	if n, _ := h.noGen.RunOnce(h.ctx); n != 1 {
		t.Fatalf("second claim took %d operations, want the purge", n)
	}
	if n, _ := h.noGen.RunOnce(h.ctx); n != 0 {
		t.Fatalf("a claim under b's live lease took %d operations", n)
	}
	if q, _ := h.store.QueuedOperations(h.ctx, 10); len(q) != 1 || q[0].ID != b.ID {
		t.Fatalf("queued after the runs: %v; want only b", q)
	}
}

// blockedGeneration queues a generation from the session app1/u1/s1,
// which says "I keep bees.", with the model blocked (see blockModel).
func (h *harness) blockedGeneration(t *testing.T) (op *Operation, started <-chan struct{}, release func()) {
	t.Helper()
	key := sessiontype.Key{App: "app1", User: "u1", ID: "s1"}
	h.sess.Append(key, "I keep bees.")
	started, release = h.blockModel()
	op, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &key})
	if err != nil {
		t.Fatal(err)
	}
	return op, started, release
}

// blockModel makes model calls wait until release is called (at the
// latest when the test ends); started receives one value per call.
func (h *harness) blockModel() (started <-chan struct{}, release func()) {
	g := suitetest.NewGate(h.t, 4)
	h.gemini.SetResponder(func(modeltest.Call) modeltest.Reply {
		_ = g.Pass(context.Background()) // nil: this context never ends
		return modeltest.Reply{Status: 500}
	})
	return g.Started(), g.Open
}

// testShutdownHandsBack stops a worker in the middle of a model call: its
// operation goes back to pending with its attempt unchanged and no lease,
// and another worker completes it exactly once, at attempt 1.
func testShutdownHandsBack(t *testing.T, h *harness) {
	op, started, release := h.blockedGeneration(t)
	ctx, stop := context.WithCancel(h.ctx)
	ran := make(chan int)
	go func() {
		n, _ := h.svc.RunOnce(ctx)
		ran <- n
	}()
	<-started
	if got := h.op(op); got.State != jobs.Running || got.Attempt != 1 {
		t.Fatalf("while running: %s attempt %d", got.State, got.Attempt)
	}
	stop()
	if n := <-ran; n != 1 {
		t.Fatalf("RunOnce ran %d operations", n)
	}
	release()
	got := h.op(op)
	if got.State != jobs.Pending || got.Attempt != 0 || got.LeaseOwner != "" || !got.LeaseExpiry.IsZero() || !strings.Contains(got.Progress, "interrupted") {
		t.Fatalf("after the worker stopped: %s attempt %d lease %q %v, progress %q", got.State, got.Attempt, got.LeaseOwner, got.LeaseExpiry, got.Progress)
	}
	// Another worker (a restarted server) takes it at once.
	h.gemini.SetResponder(nil)
	h.gemini.ReplyJSON(extraction("The user keeps bees."))
	next := h.service("worker-c", &model.Gemini{Client: h.gemini.Client(t), Model: "gemini-test"})
	if n := h.drain(next); n != 1 {
		t.Fatalf("the next worker ran %d operations", n)
	}
	got = h.op(op)
	if got.State != jobs.Succeeded || got.Attempt != 1 || len(got.Generated) != 1 {
		t.Fatalf("after the restart: %s attempt %d, %d results (%s)", got.State, got.Attempt, len(got.Generated), got.ErrorMessage)
	}
	if diff := cmp.Diff([]string{"The user keeps bees."}, h.facts(user1)); diff != "" {
		t.Fatalf("memories (-want +got):\n%s", diff)
	}
}

// testHeartbeat runs Run with a short lease: while the first of two
// claimed groups waits for the model, the heartbeat renews the leases of
// both; when Run's context ends, both go back to pending (the one that
// never started too), and Run returns.
func testHeartbeat(t *testing.T, h *harness) {
	events, started, release := h.blockedGeneration(t)
	facts, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Facts: []memorybank.DirectFact{{Fact: "The user likes honey."}}})
	if err != nil {
		t.Fatal(err)
	}
	const lease = 300 * time.Millisecond
	svc := NewWorker(h.store, memorybank.Config{
		Generator: &model.Gemini{Client: h.gemini.Client(t), Model: "gemini-test"}, Embedder: model.Offline{}, Sessions: h.sess,
		Now: h.clock.Tick, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, jobs.Config{WorkerID: "beating", Lease: lease, Workers: 1, LocalQueue: true})
	stop, ended := suitetest.Start(h.ctx, svc.Run)
	<-started
	claimed := h.op(facts)
	if claimed.State != jobs.Running || claimed.LeaseOwner != "beating" {
		t.Fatalf("the second group was not claimed with the first: %s %q", claimed.State, claimed.LeaseOwner)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !h.op(facts).LeaseExpiry.After(claimed.LeaseExpiry) {
		if time.Now().After(deadline) {
			t.Fatal("the lease of the waiting group was never renewed")
		}
		time.Sleep(lease / 3)
	}
	stop()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	release()
	for _, op := range []*Operation{events, facts} {
		if got := h.op(op); got.State != jobs.Pending || got.Attempt != 0 || got.LeaseOwner != "" {
			t.Fatalf("%s after Run returned: %s attempt %d lease %q", op.ID, got.State, got.Attempt, got.LeaseOwner)
		}
	}
}

func testCoalescing(t *testing.T, h *harness) {
	var ops []*Operation
	for i := range 3 {
		key := sessiontype.Key{App: "app1", User: "u1", ID: fmt.Sprintf("s%d", i)}
		h.sess.Append(key, fmt.Sprintf("My favourite number is %d.", i))
		op, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &key})
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
	h.gemini.ReplyJSON(extraction("The user has favourite numbers 0, 1 and 2."))
	h.drain(h.svc)
	if n := len(h.gemini.Calls()); n != 1 {
		t.Fatalf("%d model calls for 3 coalesced operations, want 1", n)
	}
	call := h.gemini.Calls()[0].Text()
	for i := range 3 {
		if !strings.Contains(call, fmt.Sprintf("number is %d", i)) {
			t.Fatalf("coalesced extraction misses session %d: %q", i, call)
		}
	}
	for _, op := range ops {
		got := h.op(op)
		if got.State != jobs.Succeeded || len(got.Generated) != 1 || len(got.CoalescedWith) != 2 {
			t.Fatalf("coalesced operation = %s %v %v", got.State, got.Generated, got.CoalescedWith)
		}
	}
}

func testOperations(t *testing.T, h *harness) {
	a, _ := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Facts: []memorybank.DirectFact{{Fact: "A"}}})
	b, _ := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: memorytype.Scope{"user_id": "u2"}, Facts: []memorybank.DirectFact{{Fact: "B"}}})
	cancelled, err := h.noGen.CancelOperation(h.ctx, "app1", b.ID)
	if err != nil || cancelled.State != jobs.Cancelled {
		t.Fatalf("CancelOperation = %v, %v", cancelled, err)
	}
	// Waiting times out while a is pending.
	w, err := h.noGen.WaitOperation(h.ctx, "app1", a.ID, 50*time.Millisecond)
	if err != nil || w.State != jobs.Pending {
		t.Fatalf("WaitOperation before work = %v, %v", w, err)
	}
	h.drain(h.noGen)
	w, err = h.noGen.WaitOperation(h.ctx, "app1", a.ID, time.Second)
	if err != nil || w.State != jobs.Succeeded {
		t.Fatalf("WaitOperation = %v, %v", w, err)
	}
	if got := h.facts(memorytype.Scope{"user_id": "u2"}); len(got) != 0 {
		t.Fatalf("cancelled operation ran: %v", got)
	}
	_, err = h.noGen.CancelOperation(h.ctx, "app1", a.ID)
	wantKind(t, "cancel a finished operation", err, fault.FailedPrecondition)
	list, err := h.noGen.ListOperations(h.ctx, "app1", []jobs.State{jobs.Cancelled})
	if err != nil || len(list) != 1 || list[0].ID != b.ID {
		t.Fatalf("ListOperations(CANCELLED) = %v, %v", list, err)
	}
	all, _ := h.noGen.ListOperations(h.ctx, "app1", nil)
	if len(all) != 2 || all[0].ID != b.ID {
		t.Fatalf("ListOperations = %v (newest first)", all)
	}
	_, err = h.noGen.GetOperation(h.ctx, "app2", a.ID)
	wantKind(t, "operation of another app", err, fault.NotFound)
	// Finished operations are kept for a week, then swept.
	h.clock.Advance(8 * 24 * time.Hour)
	if _, err := h.noGen.Jobs.SweepFinished(h.ctx); err != nil {
		t.Fatal(err)
	}
	_, err = h.noGen.GetOperation(h.ctx, "app1", a.ID)
	wantKind(t, "operation past its retention", err, fault.NotFound)
}

// testOperationsOfAUser: an operation is about a user when its key's
// scope names them, or, for a generation, when it reads one of their
// sessions or records one as its facts' source.
func testOperationsOfAUser(t *testing.T, h *harness) {
	ann := sessiontype.Key{App: "app1", User: "ann", ID: "s1"}
	h.sess.Append(ann, "I sing.")
	byScope, err := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: memorytype.Scope{"user_id": "ann", "agent": "a"}, Facts: []memorybank.DirectFact{{Fact: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	bySession, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: memorytype.Scope{"team": "t"}, Session: &ann})
	if err != nil {
		t.Fatal(err)
	}
	bySource, err := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: memorytype.Scope{"team": "t"}, Facts: []memorybank.DirectFact{{Fact: "y"}}, FactsSession: &ann})
	if err != nil {
		t.Fatal(err)
	}
	other, err := h.noGen.PurgeMemories(h.ctx, &memorybank.PurgeRequest{App: "app1", Scope: memorytype.Scope{"user_id": "bo"}})
	if err != nil {
		t.Fatal(err)
	}
	// An operation of another kind, keyed by a scope that names the user
	// (a compaction of one of their sessions).
	compaction := &jobs.Operation{App: "app1", ID: "c1", Kind: "CompactSession", State: jobs.Pending, Key: memorytype.Scope{"user_id": "ann", "session": "s1"}.Key(), CreateTime: h.clock.Tick()}
	if err := h.store.CreateOperation(h.ctx, compaction); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		op   *jobs.Operation
		user string
		want bool
	}{
		{byScope.Operation, "ann", true}, {bySession.Operation, "ann", true}, {bySource.Operation, "ann", true},
		{compaction, "ann", true}, {other.Operation, "ann", false}, {other.Operation, "bo", true},
		{bySession.Operation, "bo", false}, {byScope.Operation, "", false},
	} {
		if got := memorybank.Concerns(tc.op, tc.user); got != tc.want {
			t.Errorf("Concerns(%s %s, %q) = %v, want %v", tc.op.Kind, tc.op.Key, tc.user, got, tc.want)
		}
	}
	if job, err := memorybank.JobOf(compaction); job != nil || err != nil {
		t.Errorf("JobOf of another kind = %+v, %v; want nothing", job, err)
	}
}

// testGenerationGroups: generations of one scope are claimed together,
// and those with other options or another kind of input run apart, each
// with its own result.
func testGenerationGroups(t *testing.T, h *harness) {
	key := sessiontype.Key{App: "app1", User: "u1", ID: "s1"}
	h.sess.Append(key, "I collect stamps.")
	events, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &key})
	if err != nil {
		t.Fatal(err)
	}
	facts, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Facts: []memorybank.DirectFact{{Fact: "Ann writes with her left hand."}}})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Facts: []memorybank.DirectFact{{Fact: "Ann writes with her left hand."}}, DisableConsolidation: true})
	if err != nil {
		t.Fatal(err)
	}
	h.gemini.ReplyJSON(extraction("The user collects stamps."))
	if n, err := h.svc.RunOnce(h.ctx); n != 3 || err != nil {
		t.Fatalf("one claim took %d generations of the scope (%v), want 3", n, err)
	}
	ev, fa, rw := h.op(events), h.op(facts), h.op(raw)
	for _, op := range []*Operation{ev, fa, rw} {
		if op.State != jobs.Succeeded || len(op.CoalescedWith) != 0 || len(op.Generated) != 1 {
			t.Fatalf("%s: %s, coalesced with %v, %d results (%s)", op.ID, op.State, op.CoalescedWith, len(op.Generated), op.ErrorMessage)
		}
	}
	if ev.ModelCalls != 1 || fa.ModelCalls != 0 || ev.Generated[0].Memory.Fact != "The user collects stamps." {
		t.Fatalf("the events' run: %d model calls, %+v; the facts' run: %d model calls", ev.ModelCalls, ev.Generated[0].Memory, fa.ModelCalls)
	}
	// Without consolidation, the same fact is stored again.
	if fa.Generated[0].Action != memorytype.Created || rw.Generated[0].Action != memorytype.Created || fa.Generated[0].Memory.ID == rw.Generated[0].Memory.ID {
		t.Fatalf("facts %s %s, without consolidation %s %s", fa.Generated[0].Action, fa.Generated[0].Memory.ID, rw.Generated[0].Action, rw.Generated[0].Memory.ID)
	}
}

// testPurgeResumes: a purge that a stopped worker left with a count goes
// on from that count.
func testPurgeResumes(t *testing.T, h *harness) {
	for i := range 3 {
		h.create(fmt.Sprintf("fact %d", i), user1)
	}
	op, err := h.svc.PurgeMemories(h.ctx, &memorybank.PurgeRequest{App: "app1", Scope: user1})
	if err != nil {
		t.Fatal(err)
	}
	// The count an interrupted attempt recorded.
	cur, err := h.store.GetOperation(h.ctx, op.App, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	c := cur.Clone()
	c.Result = []byte(`{"purge_count":7}`)
	if err := h.store.UpdateOperations(h.ctx, h.clock.Tick(), []jobs.Update{{Op: c, ExpectState: jobs.Pending}}); err != nil {
		t.Fatal(err)
	}
	h.drain(h.svc)
	if got := h.op(op); got.State != jobs.Succeeded || got.PurgeCount != 10 {
		t.Fatalf("resumed purge = %s count %d, want 10 (7 before, 3 now)", got.State, got.PurgeCount)
	}
}
