package webhooks_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"path"
	"sync"
	"testing"
	"time"

	memorysqlite "github.com/kioku-ai/kioku/internal/memorystore/sqlite"
	"github.com/kioku-ai/kioku/internal/sqlitetest"
	"github.com/kioku-ai/kioku/internal/webhooks"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/model"
)

// fixture is a memory bank on SQLite whose app "app1" has one webhook,
// to a receiver answering with handler, for memory.created and
// memory.updated.
type fixture struct {
	store  *memorysqlite.Store
	svc    *memorybank.Service
	logger *slog.Logger
}

const app = "app1"

func newFixture(t *testing.T, handler http.HandlerFunc) *fixture {
	t.Helper()
	f := &fixture{store: sqlitetest.Memories(t, sqlitetest.Open(t)), logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	f.svc = memorybank.NewService(f.store, memorybank.Config{Embedder: model.Offline{}, WebhooksAllowLoopbackHTTP: true, Logger: f.logger})
	receiver := httptest.NewServer(handler)
	t.Cleanup(receiver.Close)
	hook := appconfig.Webhook{URL: receiver.URL, Events: []string{memorytype.EventMemoryCreated, memorytype.EventMemoryUpdated}}
	if _, err := f.svc.UpdateConfig(t.Context(), &appconfig.Config{App: app, Webhooks: []appconfig.Webhook{hook}}, []string{"webhooks"}); err != nil {
		t.Fatal(err)
	}
	return f
}

// create creates a memory of its own user.
func (f *fixture) create(t *testing.T, i int) *memorytype.Memory {
	t.Helper()
	m, err := f.svc.CreateMemory(t.Context(), app, memorybank.MemoryInput{Fact: fmt.Sprintf("fact %d", i), Scope: memorytype.Scope{"user_id": fmt.Sprint("u", i)}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRoundEndsWithinItsLease: a round starts no request that could
// outlast its lease, and the rounds after it, each renewing the lease,
// send the rest, every delivery once. The receiver moves the
// dispatcher's clock 300 ms per request, as a slow one would: with a
// 1 s lease and a 200 ms attempt timeout, a round sends two requests
// (the third could end past three quarters of the lease), where
// sending all that are due would hold the twentieth 6 s past a lease
// that another server may have taken.
func TestRoundEndsWithinItsLease(t *testing.T) {
	ctx := t.Context()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	got := map[string]int{}
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(300 * time.Millisecond)
		got[r.Header.Get("webhook-id")]++
		w.WriteHeader(http.StatusNoContent)
	})
	sent := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }
	const n = 20
	for i := range n {
		f.create(t, i)
	}

	d := webhooks.New(webhooks.Config{Store: f.store, Now: clock, Logger: f.logger, Lease: time.Second, AttemptTimeout: 200 * time.Millisecond, InFlightPerApp: 1})
	rounds := 0
	for sent() < n && rounds < 2*n {
		before := sent()
		wait, err := d.Round(ctx, app)
		if err != nil {
			t.Fatalf("round %d: %v", rounds, err)
		}
		rounds++
		if k := sent() - before; k > 2 {
			t.Fatalf("round %d sent %d requests, %d ms of a 1 s lease at 300 ms each: want at most 2", rounds, k, 300*k)
		}
		if sent() < n && wait != 0 {
			t.Fatalf("round %d left deliveries due and returned a wait of %v, want 0", rounds, wait)
		}
	}
	if sent() != n || rounds != n/2 {
		t.Fatalf("%d rounds delivered %d events, want %d in %d rounds", rounds, sent(), n, n/2)
	}
	for id, k := range got {
		if k != 1 {
			t.Errorf("%s delivered %d times, want once", id, k)
		}
	}
}

// TestBacklogAfterRecovery: once a webhook answers again after failing,
// the deliveries that failed before go in the next round, not after the
// rest of their backoff (here up to two hours); one it goes on refusing
// is brought forward once per recovery, its refusals then not counting as
// the webhook failing. A second outage and recovery bring the backlog,
// and the refused one, forward once more.
func TestBacklogAfterRecovery(t *testing.T) {
	ctx := t.Context()
	var mu sync.Mutex
	up, refused := false, ""
	got := map[string]int{}   // memory id: attempts answered 2xx
	tried := map[string]int{} // memory id: attempts
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		var ev webhooks.Event
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
			t.Error(err)
		}
		id := path.Base(ev.Data.Name)
		mu.Lock()
		defer mu.Unlock()
		tried[id]++
		if !up || id == refused {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		got[id]++
		w.WriteHeader(http.StatusNoContent)
	})
	now := time.Now()
	clock := func() time.Time { // a millisecond a reading: nothing waits its backoff
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Millisecond)
		return now
	}
	d := webhooks.New(webhooks.Config{Store: f.store, Now: clock, Logger: f.logger, BaseDelay: time.Hour, MaxDelay: 2 * time.Hour, InFlightPerApp: 1})
	round := func() {
		t.Helper()
		if _, err := d.Round(ctx, app); err != nil {
			t.Fatal(err)
		}
	}
	setUp := func(u bool) { mu.Lock(); up = u; mu.Unlock() }
	want := func(when string, wantTried, wantGot map[string]int) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if !maps.Equal(tried, wantTried) || !maps.Equal(got, wantGot) {
			t.Fatalf("%s: tried %v, delivered %v; want tried %v, delivered %v", when, tried, got, wantTried, wantGot)
		}
	}
	var m []string
	for i := range 3 {
		m = append(m, f.create(t, i).ID)
	}
	refused = m[2]
	round() // each tried once, refused: due again in up to 2 hours
	setUp(true)
	round() // nothing due, no recovery seen: nothing sent
	want("down, then up with nothing due", map[string]int{m[0]: 1, m[1]: 1, m[2]: 1}, map[string]int{})

	m = append(m, f.create(t, 3).ID) // due now: the receiver answers it, a recovery
	round()
	round() // the backlog, brought forward
	round() // the refused one, not again: its refusal was no new failure
	want("after the recovery", map[string]int{m[0]: 2, m[1]: 2, m[2]: 2, m[3]: 1}, map[string]int{m[0]: 1, m[1]: 1, m[3]: 1})

	setUp(false)
	m = append(m, f.create(t, 4).ID) // due now, refused: the webhook fails again
	round()
	setUp(true)
	m = append(m, f.create(t, 5).ID) // answered: a second recovery
	round()
	round()
	round()
	want("after a second recovery", map[string]int{m[0]: 2, m[1]: 2, m[2]: 3, m[3]: 1, m[4]: 2, m[5]: 1}, map[string]int{m[0]: 1, m[1]: 1, m[3]: 1, m[4]: 1, m[5]: 1})
}
