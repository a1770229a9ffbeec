package webhooks_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/internal/sqlitetest"
	"github.com/kioku-ai/kioku/internal/webhooks"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/model"
)

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
	store := sqlitetest.Memories(t, sqlitetest.Open(t))
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := memorybank.NewService(store, memorybank.Config{Embedder: model.Offline{}, WebhooksAllowLoopbackHTTP: true, Logger: logger})

	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	got := map[string]int{}
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(300 * time.Millisecond)
		got[r.Header.Get("webhook-id")]++
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)
	sent := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }

	const app, n = "app1", 20
	if _, err := svc.UpdateConfig(ctx, &appconfig.Config{App: app, Webhooks: []appconfig.Webhook{{URL: receiver.URL, Events: []string{memorytype.EventMemoryCreated}}}}, []string{"webhooks"}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := svc.CreateMemory(ctx, app, memorybank.MemoryInput{Fact: fmt.Sprintf("fact %d", i), Scope: memorytype.Scope{"user_id": fmt.Sprint("u", i)}}); err != nil {
			t.Fatal(err)
		}
	}

	d := webhooks.New(webhooks.Config{Store: store, Now: clock, Logger: logger, Lease: time.Second, AttemptTimeout: 200 * time.Millisecond, InFlightPerApp: 1})
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
