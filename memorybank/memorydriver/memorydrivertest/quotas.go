package memorydrivertest

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// testUsage: the store's usage counts per app and day: unbounded adds,
// an add refused once a bounded field is spent (adding nothing), apps
// and days apart, and concurrent adds that all count, the bounded ones
// stopping exactly at the bound.
func testUsage(t *testing.T, h *harness) {
	st, ctx := h.store.(memorydriver.UsageMeter), h.ctx
	type U = memorytype.Usage
	add := func(app, day string, a, below U, want U, wantAdded bool) {
		t.Helper()
		got, added, err := st.AddUsage(ctx, app, day, a, below)
		if err != nil || got != want || added != wantAdded {
			t.Fatalf("AddUsage(%s, %s, %+v, below %+v) = %+v, %v, %v; want %+v, %v", app, day, a, below, got, added, err, want, wantAdded)
		}
	}
	const day = "2026-04-01"
	add("app1", day, U{Tokens: 7}, U{}, U{Tokens: 7}, true)
	add("app1", day, U{Generations: 1}, U{Generations: 2}, U{Generations: 1, Tokens: 7}, true)
	add("app1", day, U{Generations: 1}, U{Generations: 2}, U{Generations: 2, Tokens: 7}, true)
	add("app1", day, U{Generations: 1}, U{Generations: 2}, U{Generations: 2, Tokens: 7}, false)
	add("app1", day, U{Generations: 1}, U{Generations: 5, Tokens: 7}, U{Generations: 2, Tokens: 7}, false)
	add("app1", day, U{Tokens: 3}, U{}, U{Generations: 2, Tokens: 10}, true)
	if u, err := st.GetUsage(ctx, "app1", day); err != nil || u != (U{Generations: 2, Tokens: 10}) {
		t.Fatalf("GetUsage = %+v, %v", u, err)
	}
	for _, other := range [][2]string{{"app1", "2026-04-02"}, {"app2", day}} {
		if u, err := st.GetUsage(ctx, other[0], other[1]); err != nil || u != (U{}) {
			t.Fatalf("GetUsage(%s, %s) = %+v, %v; want nothing", other[0], other[1], u, err)
		}
	}

	var wg sync.WaitGroup
	var mu sync.Mutex
	added := 0
	for range 8 {
		wg.Go(func() {
			if _, _, err := st.AddUsage(ctx, "app3", day, U{Tokens: 2}, U{}); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() {
			_, ok, err := st.AddUsage(ctx, "app3", day, U{Generations: 1}, U{Generations: 5})
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				added++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if u, err := st.GetUsage(ctx, "app3", day); err != nil || u != (U{Generations: 5, Tokens: 16}) || added != 5 {
		t.Fatalf("after concurrent adds: %+v (%v), %d bounded adds added; want 5 generations, 16 tokens, 5 added", u, err, added)
	}
}

// testQuotas: an app's daily quotas of generations and model tokens, as
// the service enforces them on the store: requests past them refused
// RESOURCE_EXHAUSTED with a retry delay until the day ends (UTC), the
// model's tokens counted per call, and a new allowance the next day.
func testQuotas(t *testing.T, h *harness) {
	worker := func(id string, q memorybank.Quotas) *Worker {
		return NewWorker(h.store, memorybank.Config{
			Generator: &model.Gemini{Client: h.gemini.Client(t), Model: "gemini-test"},
			Embedder:  model.Offline{}, Sessions: h.sess, Now: h.clock.Tick, Quotas: q,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		}, jobs.Config{WorkerID: id, Lease: time.Minute, MaxAttempts: 3})
	}
	generate := func(w *Worker, app string, n int) error {
		t.Helper()
		// A user of its own: no memories to consolidate with, one model call.
		key := sessiontype.Key{App: app, User: fmt.Sprintf("u%d", n), ID: "s"}
		h.sess.Append(key, fmt.Sprintf("My lucky number is %d.", n))
		op, err := w.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: app, Session: &key})
		if err != nil {
			return err
		}
		h.gemini.ReplyJSON(extraction(fmt.Sprintf("The user's lucky number is %d.", n)))
		h.drain(w)
		if op = h.op(op); op.State != jobs.Succeeded {
			t.Fatalf("generation %d: %s %s", n, op.State, op.ErrorMessage)
		}
		return nil
	}
	// The harness's clock is at 09:00 UTC: the day ends in 15 hours.
	const untilDayEnds = 15 * time.Hour
	refused := func(err error, what string) {
		t.Helper()
		if d := fault.RetryDelayOf(err); !fault.Is(err, fault.ResourceExhausted) || d > untilDayEnds || d < untilDayEnds-time.Minute {
			t.Fatalf("%s: %v (%v, retry in %v); want RESOURCE_EXHAUSTED, retry in %v", what, err, fault.KindOf(err), fault.RetryDelayOf(err), untilDayEnds)
		}
	}

	gens := worker("quota-gens", memorybank.Quotas{Generations: 2})
	for n := range 2 {
		if err := generate(gens, "quota", n); err != nil {
			t.Fatalf("generation %d within the quota: %v", n, err)
		}
	}
	refused(generate(gens, "quota", 2), "a third generation with a quota of 2")
	// Each generation made one model call, of 15 tokens (the fake's).
	u, end, err := gens.Usage(h.ctx, "quota")
	if err != nil || u != (memorytype.Usage{Generations: 2, Tokens: 30}) || !end.Equal(time.Date(2026, 4, 2, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("Usage = %+v ends %v (%v); want 2 generations, 30 tokens, ending at midnight UTC", u, end, err)
	}
	// Another server on the same store sees the same count.
	if err := generate(worker("quota-gens-2", memorybank.Quotas{Generations: 2}), "quota", 3); err == nil {
		t.Fatal("a second server on the store allowed a third generation")
	}
	if seen := gens.UsageSeen(); len(seen) != 1 || seen[0].App != "quota" || seen[0].Generations != 2 {
		t.Fatalf("UsageSeen = %+v", seen)
	}

	tokens := worker("quota-tokens", memorybank.Quotas{Tokens: 10})
	if err := generate(tokens, "tokens", 0); err != nil {
		t.Fatalf("a first generation under a token quota: %v", err)
	}
	refused(generate(tokens, "tokens", 1), "a generation after 15 tokens with a quota of 10")

	// The next day (UTC) brings a new allowance.
	h.clock.Advance(untilDayEnds)
	if err := generate(gens, "quota", 4); err != nil {
		t.Fatalf("the next day: %v", err)
	}
	if u, _, _ := gens.Usage(h.ctx, "quota"); u != (memorytype.Usage{Generations: 1, Tokens: 15}) {
		t.Fatalf("the next day's usage = %+v", u)
	}
}
