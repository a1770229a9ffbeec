package memorydrivertest

import (
	"context"
	"strings"
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
		if c.App != "app1" || c.Time.Before(last) || c.Time.After(h.clock.Tick()) {
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
	now := h.clock.Tick()
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
	now := h.clock.Tick()
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

// Webhooks: the configuration's secrets, the dispatch lease and cursor,
// and the deliveries a store keeps.

func testWebhookConfig(t *testing.T, h *harness) {
	events := []string{memorytype.EventMemoryCreated, memorytype.EventOperationDone}
	given := "whsec_" + strings.Repeat("QUJD", 8) // 24 bytes
	got, err := h.svc.UpdateConfig(h.ctx, &appconfig.Config{App: "app1", Webhooks: []appconfig.Webhook{
		{URL: "https://hooks.example.com/a", Events: events},
		{URL: "https://hooks.example.com/b", Events: events, Secret: given, OmitFact: true},
	}}, []string{"webhooks"})
	if err != nil {
		t.Fatal(err)
	}
	a, b := got.Webhooks[0], got.Webhooks[1]
	if !a.SecretGenerated || !strings.HasPrefix(a.Secret, "whsec_") || b.SecretGenerated || b.Secret != given {
		t.Fatalf("update's answer: %+v", got.Webhooks)
	}
	if _, err := memorybank.WebhookSecretKey(a.Secret); err != nil {
		t.Fatalf("generated secret %q: %v", a.Secret, err)
	}
	stored, err := h.store.GetConfig(h.ctx, "app1")
	if err != nil {
		t.Fatal(err)
	}
	if s := stored.Webhooks; len(s) != 2 || s[0].Secret != a.Secret || s[0].SecretGenerated || !s[1].OmitFact || s[0].CreateTime.IsZero() {
		t.Fatalf("stored webhooks: %+v", s)
	}
	// Written back as read through the API (secrets empty), every webhook
	// keeps its secret and its create time; a new URL gets a new secret.
	h.clock.Advance(time.Minute)
	got, err = h.svc.UpdateConfig(h.ctx, &appconfig.Config{App: "app1", Webhooks: []appconfig.Webhook{
		{URL: "https://hooks.example.com/a", Events: events},
		{URL: "https://hooks.example.com/c", Events: events},
	}}, []string{"webhooks"})
	if err != nil {
		t.Fatal(err)
	}
	if w := got.Webhooks; w[0].Secret != a.Secret || w[0].SecretGenerated || !w[0].CreateTime.Equal(stored.Webhooks[0].CreateTime) || !w[1].SecretGenerated || w[1].Secret == a.Secret {
		t.Fatalf("second update: %+v", w)
	}
	for name, bad := range map[string]struct {
		hook  appconfig.Webhook
		field string
	}{
		"http":              {appconfig.Webhook{URL: "http://hooks.example.com/a", Events: events}, "webhooks[0].url"},
		"loopback http":     {appconfig.Webhook{URL: "http://127.0.0.1:9/a", Events: events}, "webhooks[0].url"},
		"no host":           {appconfig.Webhook{URL: "https:///a", Events: events}, "webhooks[0].url"},
		"no events":         {appconfig.Webhook{URL: "https://hooks.example.com/a"}, "webhooks[0].events"},
		"unknown event":     {appconfig.Webhook{URL: "https://hooks.example.com/a", Events: []string{"memory.read"}}, "webhooks[0].events"},
		"secret not whsec_": {appconfig.Webhook{URL: "https://hooks.example.com/a", Events: events, Secret: "abc"}, "webhooks[0].secret"},
		"short secret":      {appconfig.Webhook{URL: "https://hooks.example.com/a", Events: events, Secret: "whsec_QUJD"}, "webhooks[0].secret"},
	} {
		_, err := h.svc.UpdateConfig(h.ctx, &appconfig.Config{App: "app1", Webhooks: []appconfig.Webhook{bad.hook}}, []string{"webhooks"})
		if !fault.Is(err, fault.Invalid) || fault.FieldOf(err) != bad.field {
			t.Errorf("%s: %v (field %q), want Invalid naming %s", name, err, fault.FieldOf(err), bad.field)
		}
	}
}

// delivery is a pending delivery of app1 at a cursor.
func delivery(cursor int64, url, memory string, now time.Time) *memorytype.Delivery {
	return &memorytype.Delivery{
		App: "app1", ID: memorytype.DeliveryID(cursor, url), Cursor: cursor, URL: url, Event: memorytype.EventMemoryCreated,
		MemoryID: memory, Revision: 1, Scope: user1, EventTime: now, State: memorytype.DeliveryPending,
		NextAttempt: now, RetryFrom: now, CreateTime: now,
	}
}

func testWebhookDeliveries(t *testing.T, h *harness) {
	now := h.clock.Tick()
	lease := func(owner string, at time.Time) (bool, int64) {
		t.Helper()
		held, cursor, err := h.store.(memorydriver.Webhooks).ClaimWebhookLease(h.ctx, "app1", owner, at, at.Add(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return held, cursor
	}
	if held, cursor := lease("a", now); !held || cursor != 0 {
		t.Fatalf("first claim: held %v cursor %d, want true 0", held, cursor)
	}
	if held, _ := lease("b", now.Add(10*time.Second)); held {
		t.Fatal("b took a's live lease")
	}
	if held, _ := lease("a", now.Add(20*time.Second)); !held {
		t.Fatal("a could not renew its lease")
	}
	const u = "https://hooks.example.com/a"
	ds := []*memorytype.Delivery{delivery(1, u, "m1", now), delivery(2, u, "m2", now), delivery(3, u, "m1", now)}
	at := now.Add(21 * time.Second)
	if err := h.store.(memorydriver.Webhooks).AddDeliveries(h.ctx, "app1", "b", at, 0, 3, ds); !fault.Is(err, fault.Aborted) {
		t.Fatalf("AddDeliveries by b without the lease: %v, want Aborted", err)
	}
	if err := h.store.(memorydriver.Webhooks).AddDeliveries(h.ctx, "app1", "a", at, 1, 3, ds); !fault.Is(err, fault.Aborted) {
		t.Fatalf("AddDeliveries from a cursor not the store's: %v, want Aborted", err)
	}
	if err := h.store.(memorydriver.Webhooks).AddDeliveries(h.ctx, "app1", "a", at, 0, 3, ds); err != nil {
		t.Fatal(err)
	}
	// A replay of the same page (after a dispatcher lost its answer) is
	// refused by the cursor, and stored deliveries are kept as they are.
	if err := h.store.(memorydriver.Webhooks).AddDeliveries(h.ctx, "app1", "a", at, 0, 3, ds); !fault.Is(err, fault.Aborted) {
		t.Fatalf("AddDeliveries replayed: %v, want Aborted", err)
	}
	if _, cursor := lease("a", at); cursor != 3 {
		t.Fatalf("cursor after AddDeliveries = %d, want 3", cursor)
	}
	// The lease expires: b takes it over, with the cursor.
	late := now.Add(time.Minute)
	if held, cursor := lease("b", late); !held || cursor != 3 {
		t.Fatalf("b after a's lease expired: held %v cursor %d", held, cursor)
	}
	if err := h.store.(memorydriver.Webhooks).AddDeliveries(h.ctx, "app1", "a", late, 3, 4, nil); !fault.Is(err, fault.Aborted) {
		t.Fatalf("AddDeliveries by a after b took over: %v, want Aborted", err)
	}
	dup := delivery(3, u, "m1", now)
	dup.Event = memorytype.EventMemoryDeleted
	if err := h.store.(memorydriver.Webhooks).AddDeliveries(h.ctx, "app1", "b", late, 3, 4, []*memorytype.Delivery{dup, delivery(4, u, "m3", now)}); err != nil {
		t.Fatal(err)
	}
	ids := func(ds []*memorytype.Delivery) []string {
		out := []string{}
		for _, d := range ds {
			out = append(out, d.ID)
		}
		return out
	}
	id := func(c int64) string { return memorytype.DeliveryID(c, u) }
	pending, err := h.store.(memorydriver.Webhooks).PendingDeliveries(h.ctx, "app1", 10)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{id(1), id(2), id(3), id(4)}, ids(pending)); diff != "" {
		t.Fatalf("pending (-want +got):\n%s", diff)
	}
	if pending[2].Event != memorytype.EventMemoryCreated {
		t.Fatalf("delivery 3 was replaced by the one added again: %+v", pending[2])
	}
	if diff := cmp.Diff(ds[0], pending[0]); diff != "" {
		t.Fatalf("stored delivery (-want +got):\n%s", diff)
	}
	// Attempts and states round-trip.
	d := pending[0]
	d.State, d.AttemptCount = memorytype.DeliveryDelivered, 2
	d.Attempts = []memorytype.DeliveryAttempt{
		{Time: now.Add(time.Second), Status: 500, Error: "answered 500 Internal Server Error", Duration: 30 * time.Millisecond},
		{Time: now.Add(3 * time.Second), Status: 204, Duration: 20 * time.Millisecond},
	}
	if err := h.store.(memorydriver.Webhooks).PutDelivery(h.ctx, d); err != nil {
		t.Fatal(err)
	}
	dead := pending[1]
	dead.State = memorytype.DeliveryDeadLettered
	if err := h.store.(memorydriver.Webhooks).PutDelivery(h.ctx, dead); err != nil {
		t.Fatal(err)
	}
	back, err := h.store.(memorydriver.Webhooks).GetDelivery(h.ctx, "app1", d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(d, back); diff != "" {
		t.Fatalf("delivery after PutDelivery (-want +got):\n%s", diff)
	}
	if pending, _ := h.store.(memorydriver.Webhooks).PendingDeliveries(h.ctx, "app1", 10); !cmp.Equal(ids(pending), []string{id(3), id(4)}) {
		t.Fatalf("pending after two ended = %v", ids(pending))
	}
	if _, err := h.store.(memorydriver.Webhooks).GetDelivery(h.ctx, "app1", id(9)); !fault.Is(err, fault.NotFound) {
		t.Fatalf("GetDelivery of none: %v, want NotFound", err)
	}
	if err := h.store.(memorydriver.Webhooks).PutDelivery(h.ctx, delivery(9, u, "m9", now)); !fault.Is(err, fault.NotFound) {
		t.Fatalf("PutDelivery of none: %v, want NotFound", err)
	}
	if _, err := h.store.(memorydriver.Webhooks).GetDelivery(h.ctx, "app2", d.ID); !fault.Is(err, fault.NotFound) {
		t.Fatalf("another app's delivery: %v, want NotFound", err)
	}
	// Listing: newest first, a state, pages through the service.
	list := func(state memorytype.DeliveryState, size int32, token string) ([]string, string) {
		t.Helper()
		ds, next, err := h.svc.ListDeliveries(h.ctx, "app1", state, size, token)
		if err != nil {
			t.Fatal(err)
		}
		return ids(ds), next
	}
	first, next := list(memorytype.DeliveryUnspecified, 3, "")
	rest, last := list(memorytype.DeliveryUnspecified, 3, next)
	if diff := cmp.Diff([]string{id(4), id(3), id(2), id(1)}, append(first, rest...)); diff != "" || next == "" || last != "" {
		t.Fatalf("pages (-want +got):\n%s (tokens %q %q)", diff, next, last)
	}
	if got, _ := list(memorytype.DeliveryDeadLettered, 0, ""); !cmp.Equal(got, []string{id(2)}) {
		t.Fatalf("dead-lettered = %v", got)
	}
	if got, _ := list(memorytype.DeliveryPending, 0, ""); !cmp.Equal(got, []string{id(4), id(3)}) {
		t.Fatalf("pending = %v", got)
	}
	// Redeliver makes it pending again, due now, its attempts kept.
	h.clock.Advance(time.Hour)
	before := h.clock.Tick()
	r, err := h.svc.Redeliver(h.ctx, "app1", dead.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != memorytype.DeliveryPending || r.NextAttempt.Before(before) || !r.RetryFrom.Equal(r.NextAttempt) {
		t.Fatalf("redelivered: %+v", r)
	}
	if _, err := h.svc.Redeliver(h.ctx, "app1", id(9)); !fault.Is(err, fault.NotFound) {
		t.Fatalf("Redeliver of none: %v, want NotFound", err)
	}
}

// testDeliveryErasureRetention: erasing a user removes the deliveries of
// the user's changes; SweepExpired removes the deliveries that ended
// DeliveryRetention ago and keeps pending ones.
func testDeliveryErasureRetention(t *testing.T, h *harness) {
	if _, err := h.svc.UpdateConfig(h.ctx, &appconfig.Config{App: "app1"}, nil); err != nil {
		t.Fatal(err)
	}
	now := h.clock.Tick()
	if held, _, err := h.store.(memorydriver.Webhooks).ClaimWebhookLease(h.ctx, "app1", "a", now, now.Add(time.Minute)); err != nil || !held {
		t.Fatalf("lease: %v %v", held, err)
	}
	const u = "https://hooks.example.com/a"
	u2 := memorytype.Scope{"user_id": "u2"}
	mine, theirs, done, old := delivery(1, u, "m1", now), delivery(2, u, "m2", now), delivery(3, u, "m3", now), delivery(4, u, "m4", now)
	theirs.Scope, done.Scope, old.Scope = u2, u2, u2
	if err := h.store.(memorydriver.Webhooks).AddDeliveries(h.ctx, "app1", "a", now, 0, 4, []*memorytype.Delivery{mine, theirs, done, old}); err != nil {
		t.Fatal(err)
	}
	got, err := h.svc.EraseUser(h.ctx, "app1", "u1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Deliveries != 1 {
		t.Fatalf("erasure removed %d deliveries, want 1", got.Deliveries)
	}
	if _, err := h.store.(memorydriver.Webhooks).GetDelivery(h.ctx, "app1", mine.ID); !fault.Is(err, fault.NotFound) {
		t.Fatalf("the erased user's delivery: %v, want NotFound", err)
	}
	// done is delivered now, old was delivered then dead-lettered with
	// its last attempt a retention ago; theirs stays pending.
	done.State, done.Attempts = memorytype.DeliveryDelivered, []memorytype.DeliveryAttempt{{Time: now.Add(2 * time.Hour), Status: 204}}
	old.State, old.Attempts = memorytype.DeliveryDeadLettered, []memorytype.DeliveryAttempt{{Time: now, Status: 500}}
	for _, d := range []*memorytype.Delivery{done, old} {
		if err := h.store.(memorydriver.Webhooks).PutDelivery(h.ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	h.clock.Advance(memorydriver.DeliveryRetention + time.Hour)
	if _, err := h.svc.SweepExpired(h.ctx); err != nil {
		t.Fatal(err)
	}
	left, _, err := h.svc.ListDeliveries(h.ctx, "app1", memorytype.DeliveryUnspecified, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range left {
		ids = append(ids, d.ID)
	}
	if diff := cmp.Diff([]string{done.ID, theirs.ID}, ids); diff != "" {
		t.Fatalf("deliveries after the sweep (-want +got):\n%s", diff)
	}
	if err := h.store.(memorydriver.Webhooks).DeleteDeliveries(h.ctx, "app1", []string{old.ID, mine.ID}); err != nil {
		t.Fatalf("deleting deliveries already gone: %v", err)
	}
}
