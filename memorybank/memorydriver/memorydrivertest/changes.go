package memorydrivertest

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
)

// The change feed: every committed change once, in commit order, with
// dense cursors per app; nothing for a Write that failed; retention.

// changeLine is what the suite compares of a change.
type changeLine struct {
	Cursor    int64
	Action    string
	MemoryID  string
	ScopeKey  string
	Revision  int64
	Operation string
}

func lines(cs []*memorytype.ChangeRecord) []changeLine {
	out := []changeLine{}
	for _, c := range cs {
		out = append(out, changeLine{c.Cursor, c.Action.String(), c.MemoryID, c.Scope.Key(), c.Revision, c.Operation})
	}
	return out
}

func (h *harness) changes(r memorybank.ChangesRequest) *memorytype.ChangePage {
	h.t.Helper()
	p, err := h.svc.Changes(h.ctx, r)
	if err != nil {
		h.t.Fatalf("Changes(%+v): %v", r, err)
	}
	return p
}

func testChangeFeed(t *testing.T, h *harness) {
	if p := h.changes(memorybank.ChangesRequest{App: "app1"}); p.Last != 0 || len(p.Changes) != 0 {
		t.Fatalf("empty feed = last %d, %d changes", p.Last, len(p.Changes))
	}
	u2 := memorytype.Scope{"user_id": "u2"}
	m1 := h.create("The user likes tea.", user1)
	m2 := h.create("The user likes coffee.", u2)
	fact := "The user likes green tea."
	if _, err := h.svc.UpdateMemory(h.ctx, "app1", m1.ID, memorybank.MemoryUpdate{Fact: &fact}); err != nil {
		t.Fatal(err)
	}
	if err := h.svc.DeleteMemory(h.ctx, "app1", m2.ID); err != nil {
		t.Fatal(err)
	}
	op, err := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Facts: []memorybank.DirectFact{{Fact: "The user is vegetarian."}}})
	if err != nil {
		t.Fatal(err)
	}
	h.drain(h.noGen)
	if got := h.op(op); got.State != jobs.Succeeded || len(got.Generated) != 1 {
		t.Fatalf("generation = %s %v %s", got.State, got.Generated, got.ErrorMessage)
	}
	m3 := h.op(op).Generated[0].Memory
	// Another app's feed is its own, numbered from 1.
	other, err := h.svc.CreateMemory(h.ctx, "app2", memorybank.MemoryInput{Fact: "elsewhere", Scope: user1})
	if err != nil {
		t.Fatal(err)
	}

	want := []changeLine{
		{1, "CREATED", m1.ID, user1.Key(), 1, ""},
		{2, "CREATED", m2.ID, u2.Key(), 1, ""},
		{3, "UPDATED", m1.ID, user1.Key(), 2, ""},
		{4, "DELETED", m2.ID, u2.Key(), 2, ""},
		{5, "CREATED", m3.ID, user1.Key(), 1, op.Name()},
	}
	p := h.changes(memorybank.ChangesRequest{App: "app1"})
	if diff := cmp.Diff(want, lines(p.Changes)); diff != "" {
		t.Fatalf("feed of app1 (-want +got):\n%s", diff)
	}
	// The generation's end is an operation.done at cursor 6, which the
	// feed of memory changes leaves out (testWebhookEvents).
	if p.Last != 6 || p.Swept != 0 {
		t.Fatalf("feed of app1: last %d swept %d, want 6 and 0", p.Last, p.Swept)
	}
	var last time.Time
	for _, c := range p.Changes {
		if c.App != "app1" || c.Time.Before(last) || c.Time.After(h.clock.Now()) {
			t.Fatalf("change %d: app %q time %v, want app1 at commit times in order", c.Cursor, c.App, c.Time)
		}
		last = c.Time
	}
	if diff := cmp.Diff([]changeLine{{1, "CREATED", other.ID, user1.Key(), 1, ""}}, lines(h.changes(memorybank.ChangesRequest{App: "app2"}).Changes)); diff != "" {
		t.Fatalf("feed of app2 (-want +got):\n%s", diff)
	}
	// A scope's changes keep the app's cursors.
	if diff := cmp.Diff([]changeLine{want[0], want[2], want[4]}, lines(h.changes(memorybank.ChangesRequest{App: "app1", Scope: user1}).Changes)); diff != "" {
		t.Fatalf("feed of user1 (-want +got):\n%s", diff)
	}
	// Resuming after a cursor, a page at a time.
	if diff := cmp.Diff(want[2:3], lines(h.changes(memorybank.ChangesRequest{App: "app1", After: 2, Limit: 1}).Changes)); diff != "" {
		t.Fatalf("after 2, limit 1 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]changeLine{want[4]}, lines(h.changes(memorybank.ChangesRequest{App: "app1", Scope: user1, After: 3}).Changes)); diff != "" {
		t.Fatalf("user1 after 3 (-want +got):\n%s", diff)
	}
	// From now: no change, and the cursor to continue from.
	if p := h.changes(memorybank.ChangesRequest{App: "app1", After: -1}); len(p.Changes) != 0 || p.Last != 6 {
		t.Fatalf("from now = %d changes, last %d; want none, last 6", len(p.Changes), p.Last)
	}
	if _, err := h.svc.Changes(h.ctx, memorybank.ChangesRequest{App: "app1", After: 7}); !fault.Is(err, fault.Invalid) || fault.FieldOf(err) != "start_cursor" {
		t.Fatalf("cursor beyond the feed: %v, want Invalid naming start_cursor", err)
	}
}

func testChangeFeedAtomic(t *testing.T, h *harness) {
	m := h.create("The user likes tea.", user1)
	now := h.clock.Now()
	fresh := &memorytype.Memory{App: "app1", ID: "fresh1", Fact: "new", Scope: user1, Revision: 1, CreateTime: now, UpdateTime: now}
	stale := *m
	stale.Fact, stale.Revision = "changed", m.Revision+1
	// One precondition fails: nothing of the Write, nor of its feed.
	err := h.store.Write(h.ctx, &memorydriver.Write{App: "app1", Now: now, Changes: []memorydriver.Change{
		{Memory: fresh, Revision: &memorytype.Revision{App: "app1", MemoryID: fresh.ID, Number: 1, Action: memorytype.Created, Fact: "new", Scope: user1, CreateTime: now}},
		{Memory: &stale, Revision: &memorytype.Revision{App: "app1", MemoryID: m.ID, Number: stale.Revision, Action: memorytype.Updated, Fact: "changed", Scope: user1, CreateTime: now}, ExpectRevision: m.Revision + 5},
	}})
	if !fault.Is(err, fault.Aborted) {
		t.Fatalf("Write with a stale precondition = %v, want Aborted", err)
	}
	// Neither a watermark nor a vector's refresh is a change of the feed.
	vec := *m
	vec.Embedding, vec.EmbeddingModel = []float32{1, 0}, "other"
	if err := h.store.Write(h.ctx, &memorydriver.Write{App: "app1", Now: now, Watermarks: map[string]int64{"apps/app1/users/u1/sessions/s1": 3},
		Changes: []memorydriver.Change{{Memory: &vec, ExpectRevision: m.Revision}}}); err != nil {
		t.Fatal(err)
	}
	p := h.changes(memorybank.ChangesRequest{App: "app1"})
	if diff := cmp.Diff([]changeLine{{1, "CREATED", m.ID, user1.Key(), 1, ""}}, lines(p.Changes)); diff != "" || p.Last != 1 {
		t.Fatalf("feed after a failed Write and one without revisions, last %d (-want +got):\n%s", p.Last, diff)
	}
	// The next change takes the next cursor.
	if err := h.svc.DeleteMemory(h.ctx, "app1", m.ID); err != nil {
		t.Fatal(err)
	}
	if got := lines(h.changes(memorybank.ChangesRequest{App: "app1", After: 1}).Changes); len(got) != 1 || got[0].Cursor != 2 || got[0].Action != "DELETED" {
		t.Fatalf("after the failed Write: %+v, want the deletion at cursor 2", got)
	}
}

func testChangeRetention(t *testing.T, h *harness) {
	old := h.create("old", user1)
	h.clock.Advance(memorydriver.ChangeRetention + time.Hour)
	recent := h.create("recent", user1)
	if _, err := h.svc.SweepExpired(h.ctx); err != nil {
		t.Fatal(err)
	}
	p := h.changes(memorybank.ChangesRequest{App: "app1", After: 1})
	if diff := cmp.Diff([]changeLine{{2, "CREATED", recent.ID, user1.Key(), 1, ""}}, lines(p.Changes)); diff != "" || p.Swept != 1 {
		t.Fatalf("after the sweep, swept %d (-want +got):\n%s", p.Swept, diff)
	}
	// A reader at cursor 0 missed the change of old: told so, with the
	// cursor to resume from.
	_, err := h.svc.Changes(h.ctx, memorybank.ChangesRequest{App: "app1"})
	if !fault.Is(err, fault.FailedPrecondition) {
		t.Fatalf("cursor past retention: %v, want FailedPrecondition", err)
	}
	_ = old
}

func testWatchChanges(t *testing.T, h *harness) {
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	got := make(chan *memorytype.ChangeRecord, 10)
	done := make(chan error, 1)
	started := h.create("before the watch", user1) // cursor 1
	go func() {
		done <- h.svc.WatchChanges(ctx, memorybank.ChangesRequest{App: "app1", Scope: user1, After: 0}, func(c *memorytype.ChangeRecord) error {
			got <- c
			return nil
		})
	}()
	h.create("another scope", memorytype.Scope{"user_id": "u2"}) // cursor 2, not user1's
	m := h.create("during the watch", user1)                     // cursor 3, wakes the watcher
	var seen []changeLine
	for len(seen) < 2 {
		select {
		case c := <-got:
			seen = append(seen, lines([]*memorytype.ChangeRecord{c})...)
		case err := <-done:
			t.Fatalf("WatchChanges ended: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatalf("WatchChanges sent %v, want 2 changes", seen)
		}
	}
	want := []changeLine{{1, "CREATED", started.ID, user1.Key(), 1, ""}, {3, "CREATED", m.ID, user1.Key(), 1, ""}}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Fatalf("watched (-want +got):\n%s", diff)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatalf("WatchChanges returned nil after its context ended")
	}
}

// eventLine is what the suite compares of a webhook event of the feed.
type eventLine struct {
	Cursor                 int64
	Event, Operation       string
	OpKind, OpState, Scope string
}

// feedEvents reads an app's whole feed from the store, the events the
// Service leaves out included, and returns its events.
func (h *harness) feedEvents(app string) []eventLine {
	h.t.Helper()
	p, err := h.store.(memorydriver.ChangeFeed).ListChanges(h.ctx, memorydriver.ChangeQuery{App: app, Limit: memorybank.MaxChangesPerRead})
	if err != nil {
		h.t.Fatal(err)
	}
	out := []eventLine{}
	for _, c := range p.Changes {
		if c.IsEvent() {
			out = append(out, eventLine{c.Cursor, c.Event, c.Operation, c.OpKind, c.OpState, c.Scope.Key()})
		}
	}
	return out
}

// testWebhookEvents: an operation's end and an erasure's are events of
// the feed (the webhooks' outbox), appended in the transaction that
// commits them, and only then; the feed of memory changes leaves them out.
func testWebhookEvents(t *testing.T, h *harness) {
	op, err := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Facts: []memorybank.DirectFact{{Fact: "The user is vegetarian."}}})
	if err != nil {
		t.Fatal(err)
	}
	h.drain(h.noGen)
	m := h.op(op).Generated[0].Memory
	// The generation's memory change and its end, in one Write.
	p, err := h.store.(memorydriver.ChangeFeed).ListChanges(h.ctx, memorydriver.ChangeQuery{App: "app1", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Changes) != 2 || p.Changes[0].MemoryID != m.ID || !p.Changes[1].Time.Equal(p.Changes[0].Time) {
		t.Fatalf("feed after a generation: %+v", p.Changes)
	}
	gen := eventLine{2, memorytype.EventOperationDone, op.Name(), op.Operation.Kind, "SUCCEEDED", ""}
	if diff := cmp.Diff([]eventLine{gen}, h.feedEvents("app1")); diff != "" {
		t.Fatalf("events after a generation (-want +got):\n%s", diff)
	}
	// UpdateOperations: a claim is no event; a failure is; a stale end
	// (its expectation no longer holds) writes neither it nor its event.
	now := h.clock.Now()
	o := &jobs.Operation{App: "app1", ID: "c1", Kind: "CompactSession", State: jobs.Pending, CreateTime: now}
	if err := h.store.CreateOperation(h.ctx, o); err != nil {
		t.Fatal(err)
	}
	run := *o
	run.State, run.Attempt, run.LeaseOwner, run.LeaseExpiry = jobs.Running, 1, "w", now.Add(time.Minute)
	if err := h.store.UpdateOperations(h.ctx, now, []jobs.Update{{Op: &run, ExpectState: jobs.Pending}}); err != nil {
		t.Fatal(err)
	}
	failed := run
	failed.State, failed.ErrorMessage, failed.EndTime = jobs.Failed, "boom", now
	if err := h.store.UpdateOperations(h.ctx, now, []jobs.Update{{Op: &failed, ExpectState: jobs.Running, ExpectAttempt: 2}}); !fault.Is(err, fault.Aborted) {
		t.Fatalf("a stale end: %v, want Aborted", err)
	}
	if got := h.feedEvents("app1"); len(got) != 1 {
		t.Fatalf("events after a claim and a stale end: %+v, want the generation's only", got)
	}
	if err := h.store.UpdateOperations(h.ctx, now, []jobs.Update{{Op: &failed, ExpectState: jobs.Running, ExpectAttempt: 1}}); err != nil {
		t.Fatal(err)
	}
	// Writing a finished operation again (a progress of none) is no end.
	if err := h.store.UpdateOperations(h.ctx, now, []jobs.Update{{Op: &failed, ExpectState: jobs.Failed, ExpectAttempt: 1}}); err != nil {
		t.Fatal(err)
	}
	fail := eventLine{3, memorytype.EventOperationDone, failed.Name(), "CompactSession", "FAILED", ""}
	// The feed of memory changes has no event.
	cp := h.changes(memorybank.ChangesRequest{App: "app1"})
	if diff := cmp.Diff([]changeLine{{1, "CREATED", m.ID, user1.Key(), 1, op.Name()}}, lines(cp.Changes)); diff != "" || cp.Last != 3 {
		t.Fatalf("changes of memories, last %d (-want +got):\n%s", cp.Last, diff)
	}
	// An erasure, once complete (UserErased), is a user.erased of the
	// user's scope.
	if _, err := h.svc.EraseUser(h.ctx, "app1", "u1"); err != nil {
		t.Fatal(err)
	}
	if got := h.feedEvents("app1"); len(got) != 2 {
		t.Fatalf("events after EraseUser, before UserErased: %+v", got)
	}
	// Without a webhook that wants user.erased, none is appended (the
	// event names the user); with one, it is.
	if err := h.svc.UserErased(h.ctx, "app1", "u1"); err != nil {
		t.Fatal(err)
	}
	if got := h.feedEvents("app1"); len(got) != 2 {
		t.Fatalf("events after UserErased with no webhook asking: %+v", got)
	}
	if _, err := h.svc.UpdateConfig(h.ctx, &appconfig.Config{App: "app1", Webhooks: []appconfig.Webhook{
		{URL: "https://hooks.example.com/a", Events: []string{memorytype.EventUserErased}},
	}}, []string{"webhooks"}); err != nil {
		t.Fatal(err)
	}
	if err := h.svc.UserErased(h.ctx, "app1", "u1"); err != nil {
		t.Fatal(err)
	}
	if err := h.svc.UserErased(h.ctx, "app1", "U/1"); !fault.Is(err, fault.Invalid) {
		t.Fatalf("UserErased of a bad user id: %v, want Invalid", err)
	}
	// The erasure removed the generation's operation (it was about u1):
	// its end was an event, and stays one.
	erased := eventLine{4, memorytype.EventUserErased, "", "", "", memorytype.Scope{"user_id": "u1"}.Key()}
	if diff := cmp.Diff([]eventLine{gen, fail, erased}, h.feedEvents("app1")); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	// The erasure removed the user's changes from the feed, and appended
	// no change of memories.
	if cp := h.changes(memorybank.ChangesRequest{App: "app1"}); len(cp.Changes) != 0 || cp.Last != 4 {
		t.Fatalf("changes of memories after the erasure: %d, last %d; want none, last 4", len(cp.Changes), cp.Last)
	}
	// A page cut at its limit by events says where to continue.
	cp = h.changes(memorybank.ChangesRequest{App: "app1", After: 1, Limit: 2})
	if len(cp.Changes) != 0 || !cp.More || cp.Through != 3 {
		t.Fatalf("a page of events only: %d changes, more %v through %d; want none, true, 3", len(cp.Changes), cp.More, cp.Through)
	}
	// Another app's feed has none of them.
	if got := h.feedEvents("app2"); len(got) != 0 {
		t.Fatalf("events of app2: %+v", got)
	}
}
