package jobstest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/jobs"
)

// The store's primitives, called directly.

func testCreateGetList(t *testing.T, h *harness) {
	var made []*jobs.Operation
	for i := range 5 {
		op := h.newOp("app1", "op"+string(rune('a'+i)), "k")
		h.create(op)
		made = append(made, op)
	}
	h.create(h.newOp("app2", "opa", "k"))
	wantKind(t, "a second operation of the same id", h.store.CreateOperation(h.ctx, h.newOp("app1", "opa", "x")), fault.AlreadyExists)
	got, err := h.store.GetOperation(h.ctx, "app1", "opc")
	if err != nil || got.Key != "k" || got.App != "app1" {
		t.Fatalf("GetOperation = %+v, %v", got, err)
	}
	_, err = h.store.GetOperation(h.ctx, "app3", "opc")
	wantKind(t, "an operation of another app", err, fault.NotFound)

	// Newest first, by pages.
	var all []string
	q := jobs.Query{App: "app1", Limit: 2}
	for {
		page, err := h.store.ListOperations(h.ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ids(page)...)
		if len(page) < q.Limit {
			break
		}
		last := page[len(page)-1]
		q.AfterCreate, q.AfterID = last.CreateTime, last.ID
	}
	if want := []string{"ope", "opd", "opc", "opb", "opa"}; !slices.Equal(all, want) {
		t.Fatalf("ListOperations by pages = %v, want %v", all, want)
	}
	// By state.
	c := made[1].Clone()
	c.State, c.EndTime = jobs.Cancelled, h.clock.Tick()
	if err := h.store.UpdateOperations(h.ctx, h.clock.Tick(), []jobs.Update{{Op: c, ExpectState: jobs.Pending}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		states []jobs.State
		want   []string
	}{
		{[]jobs.State{jobs.Cancelled}, []string{"opb"}},
		{[]jobs.State{jobs.Pending, jobs.Running}, []string{"ope", "opd", "opc", "opa"}},
		{[]jobs.State{jobs.Succeeded}, nil},
	} {
		page, err := h.store.ListOperations(h.ctx, jobs.Query{App: "app1", States: tc.states, Limit: 10})
		if err != nil || !slices.Equal(ids(page), tc.want) {
			t.Errorf("ListOperations(%v) = %v, %v; want %v", tc.states, ids(page), err, tc.want)
		}
	}
}

// testRecordRoundTrip: every field of an operation reads back as written,
// created and updated.
func testRecordRoundTrip(t *testing.T, h *harness) {
	at := time.Date(2026, 4, 1, 9, 0, 0, 123456789, time.UTC)
	op := &jobs.Operation{
		App: "app1", ID: "op1", Kind: kind, State: jobs.Running, Key: "user_id=u1&x=y",
		Request: []byte(`{"group":"g","nested":{"a":[1,2]}}`), Result: []byte(`{"ran":["op1"]}`),
		CreateTime: at, StartTime: at.Add(time.Second), NotBefore: at.Add(2 * time.Second), Attempt: 2,
		LeaseOwner: "w1", LeaseExpiry: at.Add(time.Minute), Progress: "half way", CoalescedWith: []string{"apps/app1/operations/op0"},
	}
	h.create(op)
	if diff := cmp.Diff(op, h.get(op)); diff != "" {
		t.Fatalf("created (-written +read):\n%s", diff)
	}
	done := op.Clone()
	done.State, done.EndTime, done.ErrorKind, done.ErrorMessage = jobs.Failed, at.Add(time.Hour), fault.Unavailable, "gave up"
	done.LeaseOwner, done.LeaseExpiry, done.Result = "", time.Time{}, nil
	if err := h.store.UpdateOperations(h.ctx, at, []jobs.Update{{Op: done, ExpectState: jobs.Running, ExpectAttempt: 2}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(done, h.get(op)); diff != "" {
		t.Fatalf("updated (-written +read):\n%s", diff)
	}
}

// testQueue checks the primitives the scheduler finds work with.
func testQueue(t *testing.T, h *harness) {
	a := h.newOp("app1", "a", "k1")
	b := h.newOp("app1", "b", "k2")
	c := h.newOp("app1", "c", "k1")
	d := h.newOp("app2", "d", "k1")
	d.Kind = "Other"
	later := h.newOp("app1", "later", "k1")
	later.NotBefore = later.CreateTime.Add(time.Hour)
	done := h.newOp("app1", "done", "k1")
	done.State, done.EndTime = jobs.Succeeded, h.clock.Tick()
	h.create(a, b, c, d, later, done)
	// b runs (lease of a minute): it moves behind the pending ones due now.
	if _, err := h.claimAs(b, "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	q, err := h.store.QueuedOperations(h.ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "c", "d", "b", "later"}; !slices.Equal(ids(q), want) {
		t.Fatalf("QueuedOperations = %v, want %v (by claim time, finished ones left out)", ids(q), want)
	}
	if q, _ := h.store.QueuedOperations(h.ctx, 2); !slices.Equal(ids(q), []string{"a", "c"}) {
		t.Fatalf("QueuedOperations(2) = %v", ids(q))
	}
	now := h.clock.Tick()
	for _, tc := range []struct {
		app, key, kind string
		at             time.Time
		want           []string
	}{
		{"app1", "k1", kind, now, []string{"a", "c"}},
		{"app1", "k1", kind, later.NotBefore.Add(time.Second), []string{"a", "c", "later"}},
		{"app1", "k1", kind, a.CreateTime.Add(-time.Second), nil},
		{"app1", "k1", "Other", now, nil},
		{"app2", "k1", "Other", now, []string{"d"}},
		{"app1", "k2", kind, now, nil}, // running
	} {
		p, err := h.store.PendingOperations(h.ctx, tc.app, tc.key, tc.kind, tc.at, 10)
		if err != nil || !slices.Equal(ids(p), tc.want) {
			t.Errorf("PendingOperations(%s, %s, %s) = %v, %v; want %v", tc.app, tc.key, tc.kind, ids(p), err, tc.want)
		}
	}
	if p, _ := h.store.PendingOperations(h.ctx, "app1", "k1", kind, now, 1); !slices.Equal(ids(p), []string{"a"}) {
		t.Errorf("PendingOperations(limit 1) = %v", ids(p))
	}
}

func testCountPending(t *testing.T, h *harness) {
	for i, k := range []string{"k1", "k1", "k1", "k2", ""} {
		h.create(h.newOp("app1", string(rune('a'+i)), k))
	}
	h.create(h.newOp("app2", "x", "k1"))
	if _, err := h.claimAs(h.newOp("app1", "a", "k1"), "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		app, key string
		limit, n int
	}{{"app1", "", 100, 4}, {"app1", "", 3, 3}, {"app1", "k1", 100, 2}, {"app1", "k2", 100, 1}, {"app2", "", 100, 1}, {"app3", "", 100, 0}} {
		if n, err := h.store.CountPending(h.ctx, c.app, c.key, c.limit); err != nil || n != c.n {
			t.Errorf("CountPending(%s, %q, %d) = %d, %v; want %d", c.app, c.key, c.limit, n, err, c.n)
		}
	}

	// An owner's operations are counted whatever their keys.
	for i, k := range []string{"u1/a", "u1/b", "u1/c", "u2/a"} {
		op := h.newOp("app1", fmt.Sprintf("o%d", i), k)
		op.Owner = keyOwner(k)
		h.create(op)
	}
	u1 := h.newOp("app2", "u1", "u1/a")
	u1.Owner = "u1"
	h.create(u1)
	running := h.newOp("app1", "o0", "u1/a")
	if _, err := h.claimAs(running, "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := h.get(running); got.Owner != "u1" {
		t.Errorf("an operation's owner reads back as %q", got.Owner)
	}
	for _, c := range []struct {
		app, owner string
		limit, n   int
	}{{"app1", "u1", 100, 2}, {"app1", "u1", 1, 1}, {"app1", "u2", 100, 1}, {"app2", "u1", 100, 1}, {"app1", "u3", 100, 0}} {
		if n, err := h.store.CountPendingOfOwner(h.ctx, c.app, c.owner, c.limit); err != nil || n != c.n {
			t.Errorf("CountPendingOfOwner(%s, %q, %d) = %d, %v; want %d", c.app, c.owner, c.limit, n, err, c.n)
		}
	}

	// Running ones are counted apart, whoever holds them.
	more := h.newOp("app1", "o1", "u1/b")
	if _, err := h.claimAs(more, "other-worker", time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		app, owner string
		limit, n   int
	}{{"app1", "u1", 100, 2}, {"app1", "u1", 1, 1}, {"app1", "u2", 100, 0}, {"app2", "u1", 100, 0}} {
		if n, err := h.store.CountRunningOfOwner(h.ctx, c.app, c.owner, c.limit); err != nil || n != c.n {
			t.Errorf("CountRunningOfOwner(%s, %q, %d) = %d, %v; want %d", c.app, c.owner, c.limit, n, err, c.n)
		}
	}
	if n, err := h.store.CountPendingOfOwner(h.ctx, "app1", "u1", 100); err != nil || n != 1 {
		t.Errorf("CountPendingOfOwner(app1, u1) after a second claim = %d, %v; want 1", n, err)
	}
}

// testUpdateExpectations: an update applies only if its operation is as
// expected, and a write with one update that fails writes nothing.
func testUpdateExpectations(t *testing.T, h *harness) {
	a, b := h.newOp("app1", "a", "k1"), h.newOp("app1", "b", "k2")
	h.create(a, b)
	now := h.clock.Tick()
	progress := func(op *jobs.Operation, msg string) *jobs.Operation {
		c := op.Clone()
		c.Progress = msg
		return c
	}
	wantKind(t, "an update expecting another state",
		h.store.UpdateOperations(h.ctx, now, []jobs.Update{{Op: progress(a, "x"), ExpectState: jobs.Running}}), fault.Aborted)
	wantKind(t, "an update expecting another attempt",
		h.store.UpdateOperations(h.ctx, now, []jobs.Update{{Op: progress(a, "x"), ExpectState: jobs.Pending, ExpectAttempt: 1}}), fault.Aborted)
	wantKind(t, "an update of an operation that does not exist",
		h.store.UpdateOperations(h.ctx, now, []jobs.Update{{Op: h.newOp("app1", "nope", ""), ExpectState: jobs.Pending}}), fault.NotFound)
	wantKind(t, "a write whose second update fails",
		h.store.UpdateOperations(h.ctx, now, []jobs.Update{{Op: progress(a, "first"), ExpectState: jobs.Pending}, {Op: progress(b, "second"), ExpectState: jobs.Running}}), fault.Aborted)
	if got := h.get(a); got.Progress != "queued" {
		t.Fatalf("a write that failed changed an operation: progress %q", got.Progress)
	}
	if err := h.store.UpdateOperations(h.ctx, now, []jobs.Update{{Op: progress(a, "first"), ExpectState: jobs.Pending}, {Op: progress(b, "second"), ExpectState: jobs.Pending}}); err != nil {
		t.Fatal(err)
	}
	if h.get(a).Progress != "first" || h.get(b).Progress != "second" {
		t.Fatal("a write of two updates did not apply both")
	}
}

// testClaimKey: a claim is refused while another operation of its key
// runs under a live lease, unless that one is claimed in the same write.
func testClaimKey(t *testing.T, h *harness) {
	a, b, c, other := h.newOp("app1", "a", "k"), h.newOp("app1", "b", "k"), h.newOp("app1", "c", "k"), h.newOp("app2", "o", "k")
	h.create(a, b, c, other)
	if _, err := h.claimAs(a, "w1", time.Minute); err != nil {
		t.Fatal(err)
	}
	_, err := h.claimAs(b, "w2", time.Minute)
	wantKind(t, "a claim while the key runs", err, fault.Aborted)
	if _, err := h.claimAs(other, "w2", time.Minute); err != nil {
		t.Fatalf("a claim of the same key in another app: %v", err)
	}
	// Two of one key claimed together in one write.
	h.clock.Advance(2 * time.Minute) // a's lease expired
	now := h.clock.Tick()
	var ups []jobs.Update
	for _, op := range []*jobs.Operation{b, c} {
		cl := op.Clone()
		cl.State, cl.Attempt, cl.LeaseOwner, cl.LeaseExpiry = jobs.Running, 1, "w3", now.Add(time.Minute)
		ups = append(ups, jobs.Update{Op: cl, ExpectState: jobs.Pending, ClaimKey: true})
	}
	if err := h.store.UpdateOperations(h.ctx, now, ups); err != nil {
		t.Fatalf("claiming two of a key whose lease expired, together: %v", err)
	}
	if got := h.get(c); got.State != jobs.Running || got.LeaseOwner != "w3" {
		t.Fatalf("claimed together: %s %q", got.State, got.LeaseOwner)
	}
	// The key is free once its runs end, or go back to pending.
	d, e := h.newOp("app1", "d", "k"), h.newOp("app1", "e", "k")
	h.create(d, e)
	_, err = h.claimAs(d, "w4", time.Minute)
	wantKind(t, "a claim while two of the key run", err, fault.Aborted)
	h.set(t, jobs.Running, func(op *jobs.Operation) { op.State, op.EndTime = jobs.Succeeded, h.clock.Now() }, b, c)
	if d, err = h.claimAs(d, "w4", time.Minute); err != nil {
		t.Fatalf("a claim once the key's runs succeeded: %v", err)
	}
	h.set(t, jobs.Running, func(op *jobs.Operation) { op.State, op.LeaseOwner, op.LeaseExpiry = jobs.Pending, "", time.Time{} }, d)
	if e, err = h.claimAs(e, "w5", time.Minute); err != nil {
		t.Fatalf("a claim once the key's run went back to pending: %v", err)
	}
	// A takeover (of a run whose lease expired) waits for the key too.
	h.clock.Advance(2 * time.Minute)
	if _, err = h.claimAs(d, "w6", time.Minute); err != nil {
		t.Fatalf("a claim once the key's run's lease expired: %v", err)
	}
	_, err = h.claimAs(e, "w7", time.Minute)
	wantKind(t, "taking over a run whose key runs another", err, fault.Aborted)
	if err := h.store.DeleteOperations(h.ctx, "app1", []string{"d"}); err != nil {
		t.Fatal(err)
	}
	if _, err = h.claimAs(e, "w7", time.Minute); err != nil {
		t.Fatalf("taking over once the key's run was deleted: %v", err)
	}
}

// set changes stored operations in state with f, each at its stored
// attempt, in one write.
func (h *harness) set(t *testing.T, state jobs.State, f func(op *jobs.Operation), ops ...*jobs.Operation) {
	t.Helper()
	var ups []jobs.Update
	for _, op := range ops {
		cur := h.get(op)
		c := cur.Clone()
		f(c)
		ups = append(ups, jobs.Update{Op: c, ExpectState: state, ExpectAttempt: cur.Attempt})
	}
	if err := h.store.UpdateOperations(h.ctx, h.clock.Tick(), ups); err != nil {
		t.Fatalf("changing %v: %v", ids(ops), err)
	}
}

func testDeletions(t *testing.T, h *harness) {
	var finished []*jobs.Operation
	for i := range 5 {
		op := h.newOp("app1", string(rune('a'+i)), "k")
		if i < 3 {
			op.State, op.EndTime = jobs.Succeeded, op.CreateTime
			finished = append(finished, op)
		}
		h.create(op)
	}
	cutoff := h.clock.Tick()
	young := h.newOp("app1", "young", "")
	young.State = jobs.Failed
	h.create(young)
	n, err := h.store.DeleteFinishedOperations(h.ctx, cutoff, 2)
	if err != nil || n != 2 {
		t.Fatalf("DeleteFinishedOperations(limit 2) = %d, %v", n, err)
	}
	n, err = h.store.DeleteFinishedOperations(h.ctx, cutoff, 10)
	if err != nil || n != 1 {
		t.Fatalf("DeleteFinishedOperations = %d, %v; want the last old finished one", n, err)
	}
	for _, op := range finished {
		_, err := h.store.GetOperation(h.ctx, op.App, op.ID)
		wantKind(t, "a deleted finished operation", err, fault.NotFound)
	}
	left, err := h.store.ListOperations(h.ctx, jobs.Query{App: "app1", Limit: 10})
	if err != nil || !slices.Equal(ids(left), []string{"young", "e", "d"}) {
		t.Fatalf("left after the deletions = %v, %v", ids(left), err)
	}
	if err := h.store.DeleteOperations(h.ctx, "app1", []string{"d", "nope", "young"}); err != nil {
		t.Fatal(err)
	}
	if left, _ := h.store.ListOperations(h.ctx, jobs.Query{App: "app1", Limit: 10}); !slices.Equal(ids(left), []string{"e"}) {
		t.Fatalf("left after DeleteOperations = %v", describe(ids(left)))
	}
}
