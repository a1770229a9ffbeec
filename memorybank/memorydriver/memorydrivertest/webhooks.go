package memorydrivertest

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
)

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
	now := h.clock.Now()
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
	before := h.clock.Now()
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
	now := h.clock.Now()
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
