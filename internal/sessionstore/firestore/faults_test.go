package firestore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	gfs "cloud.google.com/go/firestore"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/internal/firestoretest"
	"github.com/kioku-ai/kioku/internal/firestoretest/faultproxy"
	"github.com/kioku-ai/kioku/internal/sessionstore/firestore"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// proxied is a session service on a Firestore store whose client reaches
// the emulator through a fault proxy, connected as the server connects
// it (Dial with a Guard).
type proxied struct {
	svc    *sessions.Service
	client *gfs.Client
	proxy  *faultproxy.Proxy
	guard  *firestoredb.Guard
	key    sessiontype.Key
}

func newProxied(t *testing.T) *proxied {
	t.Helper()
	c, p, g := firestoretest.NewProxiedClient(t)
	f := &proxied{svc: sessions.NewService(firestore.New(c, firestore.Options{}), sessions.Config{}), client: c, proxy: p, guard: g, key: sessiontype.Key{App: "a", User: "u", ID: "s"}}
	if _, err := f.svc.CreateSession(t.Context(), sessions.CreateSessionRequest{App: "a", User: "u", ID: "s"}); err != nil {
		t.Fatal(err)
	}
	return f
}

// append appends the event of the id within timeout and says how long it
// took.
func (f *proxied) append(ctx context.Context, id string, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	_, err := f.svc.AppendEvent(ctx, f.key, &sessiontype.Event{ID: id, Author: "user", Content: &sessiontype.Content{Parts: []sessiontype.Part{{Text: "note " + id}}}}, nil)
	return time.Since(start), err
}

// appendUntilStored appends the event of the id again (as a client
// retries) until it is stored, and returns how long that took.
func (f *proxied) appendUntilStored(t *testing.T, id string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		_, err := f.append(t.Context(), id, 5*time.Second)
		if err == nil {
			return time.Since(start)
		}
		if fault.Is(err, fault.Internal) {
			t.Fatalf("append %s: INTERNAL: %v", id, err)
		}
		if time.Since(start) > within {
			t.Fatalf("append %s still failing %v after recovery: %v", id, time.Since(start), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkEvents checks that the session holds each id once, in contiguous
// sequences.
func (f *proxied) checkEvents(t *testing.T, ids []string) {
	t.Helper()
	events, _, err := f.svc.ListEvents(t.Context(), f.key, sessions.ListEventsRequest{PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for i, e := range events {
		seen[e.ID]++
		if e.Sequence != int64(i+1) {
			t.Errorf("event %s at sequence %d, want %d", e.ID, e.Sequence, i+1)
		}
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("event %s stored %d times, want once", id, seen[id])
		}
	}
	if len(events) != len(ids) {
		t.Errorf("%d events stored, want %d", len(events), len(ids))
	}
}

// TestFaultRefused: while Firestore refuses connections, an append fails
// with UNAVAILABLE at once (not at its deadline), health turns
// NOT_SERVING, and once Firestore is back the same append is stored
// within seconds, once.
func TestFaultRefused(t *testing.T) {
	t.Parallel()
	f := newProxied(t)
	ctx := t.Context()
	if _, err := f.append(ctx, "before", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	f.proxy.Refuse()
	took, err := f.append(ctx, "during", 10*time.Second)
	if !fault.Is(err, fault.Unavailable) || took > 2*time.Second {
		t.Fatalf("append while refused: %v after %v; want UNAVAILABLE within 2s", err, took)
	}
	t.Logf("refused: UNAVAILABLE after %v", took.Round(time.Millisecond))
	start := time.Now()
	for f.guard.Ready(ctx) == nil {
		if time.Since(start) > 5*time.Second {
			t.Fatal("Ready still reports Firestore up 5s into the refusal")
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("refused: not ready after %v", time.Since(start).Round(time.Millisecond))
	if err := f.proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	t.Logf("refused: stored %v after recovery", f.appendUntilStored(t, "during", 5*time.Second).Round(time.Millisecond))
	if err := f.guard.Ready(ctx); err != nil {
		t.Fatalf("Ready after recovery: %v", err)
	}
	f.checkEvents(t, []string{"before", "during"})
}

// TestFaultBlackhole: a transaction holds the session's lock in Firestore
// when the network goes for 15 seconds; appends meanwhile are answered
// within their deadline (5 seconds also for those queued on this server's
// lock behind one with a longer deadline), and when the network is back with its old
// connections lost (so the rollbacks sent during the outage never
// arrived), the session takes appends again within 5 seconds, not when
// Firestore expires the abandoned transaction. Nothing is lost or stored
// twice.
func TestFaultBlackhole(t *testing.T) {
	t.Parallel()
	f := newProxied(t)
	ctx := t.Context()
	ids := []string{"e0"}
	if _, err := f.append(ctx, "e0", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	ref := f.client.Collection("kioku_apps").Doc("a").Collection("kioku_sessions").Doc("s")
	holdCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var outage time.Time
	var wg sync.WaitGroup
	var mu sync.Mutex
	var slow []string
	err := f.client.RunTransaction(holdCtx, func(ctx context.Context, tx *gfs.Transaction) error {
		if _, err := tx.Get(ref); err != nil {
			return err
		}
		if outage.IsZero() {
			outage = time.Now()
			f.proxy.Blackhole()
			// Appends during the outage: one with a long deadline takes this
			// server's lock of the session, three with 5 s queue behind it.
			ids = append(ids, "long")
			wg.Go(func() {
				took, err := f.append(context.Background(), "long", 9*time.Second)
				mu.Lock()
				defer mu.Unlock()
				if err == nil || fault.Is(err, fault.Internal) || took > 10*time.Second {
					slow = append(slow, fmt.Sprintf("long: %v after %v", err, took))
				}
			})
			time.Sleep(200 * time.Millisecond)
			for i := range 3 {
				id := fmt.Sprintf("b%d", i)
				ids = append(ids, id)
				wg.Go(func() {
					took, err := f.append(context.Background(), id, 5*time.Second)
					mu.Lock()
					defer mu.Unlock()
					if err == nil || fault.Is(err, fault.Internal) || took > 6*time.Second {
						slow = append(slow, fmt.Sprintf("%s: %v after %v", id, err, took))
					}
					t.Logf("blackhole: append %s answered after %v: %v", id, took.Round(time.Millisecond), fault.KindOf(err))
				})
			}
		}
		return tx.Update(ref, []gfs.Update{{Path: "display_name", Value: "abandoned"}})
	})
	held := time.Since(outage)
	if err == nil || held > 6*time.Second {
		t.Fatalf("the transaction in the outage: %v after %v; want its deadline's error within 6s", err, held)
	}
	wg.Wait()
	if len(slow) > 0 {
		t.Fatalf("appends in the outage, want a deadline error within 6s: %v", slow)
	}
	if err := f.guard.Ready(ctx); err == nil {
		t.Fatal("Ready reports Firestore up in the outage")
	}
	time.Sleep(time.Until(outage.Add(15 * time.Second)))
	f.proxy.Reset()
	if err := f.proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	ids = append(ids, "after")
	took := f.appendUntilStored(t, "after", 5*time.Second)
	t.Logf("blackhole: first append stored %v after recovery", took.Round(time.Millisecond))
	for _, id := range ids[1:5] {
		f.appendUntilStored(t, id, 5*time.Second) // the client's retries
	}
	f.checkEvents(t, ids)
	snap, err := ref.Get(ctx)
	if err != nil || snap.Data()["display_name"] != "" {
		t.Fatalf("the abandoned transaction's write: %v, %v", snap.Data()["display_name"], err)
	}
	for start := time.Now(); f.guard.PendingRollbacks() > 0; time.Sleep(50 * time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("%d rollbacks still pending 5s after recovery", f.guard.PendingRollbacks())
		}
	}
}
