package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/internal/webhooks"
)

// hookReceiver records the events a webhook receives while it answers
// status (503 while "down"), and counts the attempts it refused.
type hookReceiver struct {
	status  atomic.Int32
	refused atomic.Int32
	mu      sync.Mutex
	events  []webhooks.Event
	ids     []string
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if s := int(h.status.Load()); s != http.StatusNoContent {
		h.refused.Add(1)
		w.WriteHeader(s)
		return
	}
	var ev webhooks.Event
	if err := json.Unmarshal(body, &ev); err == nil {
		h.mu.Lock()
		h.events, h.ids = append(h.events, ev), append(h.ids, r.Header.Get("webhook-id"))
		h.mu.Unlock()
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *hookReceiver) got() ([]webhooks.Event, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]webhooks.Event(nil), h.events...), append([]string(nil), h.ids...)
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestWebhooksCommands: a receiver down for a while gets every change
// afterwards, in order per memory; one answering 500 forever is
// dead-lettered, listed with its attempts by kioku webhooks list, and
// delivered after kioku webhooks redeliver.
func TestWebhooksCommands(t *testing.T) {
	t.Parallel()
	key, entry := auth.NewKey("operator", auth.AllApps, "")
	_, url := nodetest.Serve(t, node.Config{
		Keys: nodetest.Keys(t, entry), WebhooksAllowLoopbackHTTP: true,
		// The 24 hours of retries stand at 10 seconds here: the first
		// change's retries outlast the writes after it, even on a
		// loaded machine.
		Webhooks: webhooks.Config{RetryWindow: 10 * time.Second, BaseDelay: 50 * time.Millisecond, MaxDelay: 200 * time.Millisecond, PollInterval: 100 * time.Millisecond},
	})
	s := &operatorServer{t: t, url: url, key: key, c: client.New(url, client.WithAuthToken(key))}
	ctx := t.Context()
	setHook := func(app, url string, events ...string) {
		t.Helper()
		if len(events) == 0 {
			events = []string{"memory.created", "memory.updated", "memory.deleted"}
		}
		_, err := s.c.UpdateMemoryBankConfig(ctx, &kiokuv1.UpdateMemoryBankConfigRequest{
			MemoryBankConfig: &kiokuv1.MemoryBankConfig{Name: "apps/" + app + "/memoryBankConfig", Webhooks: []*kiokuv1.Webhook{{Url: url, Events: events}}},
			UpdateMask:       &fieldmaskpb.FieldMask{Paths: []string{"webhooks"}},
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	// Down while three memories are created and changed twice each.
	down := &hookReceiver{}
	down.status.Store(http.StatusServiceUnavailable)
	srv := httptest.NewServer(down)
	defer srv.Close()
	setHook("up", srv.URL+"/hook")
	var names []string
	for i, fact := range []string{"Ann likes tea.", "Ann swims.", "Ann has a cat."} {
		m, err := s.c.CreateMemory(ctx, &kiokuv1.CreateMemoryRequest{Parent: "apps/up", Memory: &kiokuv1.Memory{Fact: fact, Scope: client.Scope("ann")}})
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, m.GetName())
		for n := range 2 {
			m.Fact = fact + strings.Repeat(" Really.", n+1+i)
			if _, err := s.c.UpdateMemory(ctx, &kiokuv1.UpdateMemoryRequest{Memory: m, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"fact"}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Down until it has refused the first attempts (standing in for
	// minutes), within the retry window.
	waitFor(t, "a refused attempt", func() bool { return down.refused.Load() > 0 })
	down.status.Store(http.StatusNoContent)
	waitFor(t, "nine events after the receiver came back", func() bool { evs, _ := down.got(); return len(evs) >= 9 })
	evs, ids := down.got()
	seen := map[string]bool{}
	last := map[string]int64{}
	for i, ev := range evs {
		if seen[ids[i]] {
			continue
		}
		seen[ids[i]] = true
		if ev.Data.Revision != last[ev.Data.Name]+1 {
			t.Fatalf("%s: revision %d after %d: not in per-memory order (%v)", ev.Data.Name, ev.Data.Revision, last[ev.Data.Name], evs)
		}
		last[ev.Data.Name] = ev.Data.Revision
	}
	for _, n := range names {
		if last[n] != 3 {
			t.Fatalf("%s: last revision delivered %d, want 3", n, last[n])
		}
	}

	// A generation's end: an operation.done, after its memories' events.
	ops := &hookReceiver{}
	ops.status.Store(http.StatusNoContent)
	srv3 := httptest.NewServer(ops)
	defer srv3.Close()
	setHook("ops", srv3.URL+"/hook", "memory.created", "operation.done")
	op, err := s.c.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{
		Parent: "apps/ops", Scope: client.Scope("ann"),
		Source: &kiokuv1.GenerateMemoriesRequest_DirectMemoriesSource{DirectMemoriesSource: &kiokuv1.DirectMemoriesSource{
			Memories: []*kiokuv1.DirectMemory{{Fact: "Ann lives in Sapporo."}, {Fact: "Ann swims."}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the generation's operation.done", func() bool {
		evs, _ := ops.got()
		return slices.ContainsFunc(evs, func(ev webhooks.Event) bool { return ev.Type == "operation.done" })
	})
	evs, _ = ops.got()
	for _, ev := range evs {
		switch ev.Type {
		case "memory.created":
		case "operation.done":
			if ev.Data.Name != op.GetName() || ev.Data.Kind != "GenerateMemories" || ev.Data.State != "SUCCEEDED" || ev.Data.Fact != "" {
				t.Fatalf("operation.done: %+v, want %s GenerateMemories SUCCEEDED", ev.Data, op.GetName())
			}
		default:
			t.Fatalf("an event not asked for: %+v", ev)
		}
	}
	waitFor(t, "the generation's two memory.created", func() bool {
		evs, _ := ops.got()
		return len(evs) >= 3
	})

	// 500 forever: dead-lettered, listed, redelivered.
	broken := &hookReceiver{}
	broken.status.Store(http.StatusInternalServerError)
	srv2 := httptest.NewServer(broken)
	defer srv2.Close()
	setHook("dead", srv2.URL+"/hook")
	if _, err := s.c.CreateMemory(ctx, &kiokuv1.CreateMemoryRequest{Parent: "apps/dead", Memory: &kiokuv1.Memory{Fact: "Bob likes jazz.", Scope: client.Scope("bob")}}); err != nil {
		t.Fatal(err)
	}
	var dead *kiokuv1.WebhookDelivery
	waitFor(t, "the dead letter", func() bool {
		page, err := s.c.ListWebhookDeliveries(ctx, &kiokuv1.ListWebhookDeliveriesRequest{Parent: "apps/dead", State: kiokuv1.WebhookDeliveryState_WEBHOOK_DELIVERY_STATE_DEAD_LETTERED})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.GetDeliveries()) > 0 {
			dead = page.GetDeliveries()[0]
		}
		return dead != nil
	})
	if dead.GetAttemptCount() < 2 || dead.GetAttempts()[0].GetStatusCode() != 500 {
		t.Fatalf("dead letter: %v", dead)
	}
	out, _, _ := s.kioku(false, "webhooks", "list", "apps/dead", "--state", "dead_lettered")
	has(t, "webhooks list", out, "DELIVERY", "ATTEMPTS", lastSegment(dead.GetName()), "memory.created", "DEAD_LETTERED", "answered 500", srv2.URL)
	s.kioku(true, "webhooks", "list", "apps/dead", "--state", "lost")
	broken.status.Store(http.StatusNoContent)
	out, _, _ = s.kioku(false, "webhooks", "redeliver", dead.GetName())
	has(t, "webhooks redeliver", out, dead.GetName(), "pending again")
	waitFor(t, "the redelivery", func() bool { evs, _ := broken.got(); return len(evs) == 1 })
	// The receiver has the event before the server records its answer:
	// the list shows DELIVERED once that write is done.
	waitFor(t, "the redelivery recorded", func() bool {
		out, _, _ = s.kioku(false, "webhooks", "list", "apps/dead", "--json")
		var list []struct{ State string }
		if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 {
			t.Fatalf("webhooks list --json after the redelivery: %v\n%s", err, out)
		}
		return list[0].State == "WEBHOOK_DELIVERY_STATE_DELIVERED"
	})
	if evs, _ := broken.got(); len(evs) != 1 {
		t.Fatalf("the redelivered event arrived %d times, want once", len(evs))
	}
}
