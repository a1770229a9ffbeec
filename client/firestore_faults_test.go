package client_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/firestoretest"
	"github.com/kioku-ai/kioku/internal/firestoretest/faultproxy"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/resource"
)

// TestFirestoreFaults runs a kioku on Firestore (the emulator) through a
// fault proxy and appends through the Go client, with its default
// retries, while the proxy resets every connection to Firestore again and
// every 100 ms for 3 seconds and then adds latency: no append ends INTERNAL, and the session
// holds every event once, in contiguous sequences. While Firestore
// refuses connections, appends fail UNAVAILABLE at once and health (gRPC
// and GET /healthz) is NOT_SERVING; then SERVING again once it is back.
func TestFirestoreFaults(t *testing.T) {
	host := firestoretest.Host(t)
	project := firestoretest.Project(t)
	p := faultproxy.Start(t, host)
	t.Setenv("FIRESTORE_EMULATOR_HOST", p.Addr())
	n := nodetest.Open(t, node.Config{Store: "firestore", FirestoreProject: project})
	srv := httptest.NewUnstartedServer(n.Handler())
	srv.Config.Protocols = n.HTTPServer().Protocols
	srv.Start()
	t.Cleanup(srv.Close)
	c := client.New(srv.URL)
	ctx := t.Context()
	name := func(w int) string { return resource.SessionName("a", "u", fmt.Sprint("s", w)) }

	// Writers append to a session each, every event sent again with its id
	// until stored (as an application does after the client's own retries
	// give up), through 20 ms of latency each way while the connections to
	// Firestore are reset every 200 ms, so that resets cut calls in flight,
	// commits among them.
	const writers, each = 4, 25
	for w := range writers {
		if _, err := c.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: resource.UserName("a", "u"), SessionId: fmt.Sprint("s", w)}); err != nil {
			t.Fatal(err)
		}
	}
	var (
		wg                sync.WaitGroup
		resends, internal atomic.Int32
		resets            atomic.Int32
		mu                sync.Mutex
		codes             = map[connect.Code]int{}
	)
	p.SetLatency(5 * time.Millisecond)
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				resets.Add(1)
				p.Reset()
			}
		}
	}()
	start := time.Now()
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				ev := &kiokuv1.Event{Id: fmt.Sprintf("w%d-%d", w, i), Author: "user", Content: client.Text("user", "note")}
				for {
					actx, cancel := context.WithTimeout(ctx, 5*time.Second)
					_, err := c.AppendEvent(actx, &kiokuv1.AppendEventRequest{Name: name(w), Event: ev})
					cancel()
					if err == nil {
						break
					}
					mu.Lock()
					codes[connect.CodeOf(err)]++
					mu.Unlock()
					if connect.CodeOf(err) == connect.CodeInternal {
						internal.Add(1)
						t.Errorf("append %s: %v", ev.GetId(), err)
					}
					if resends.Add(1) > 200 || ctx.Err() != nil {
						t.Errorf("append %s: still failing: %v", ev.GetId(), err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(done)
	p.SetLatency(0)
	t.Logf("resets: %d appends in %v, %d resets, %d connections; errors after the client's retries: %v", writers*each, time.Since(start).Round(time.Millisecond), resets.Load(), p.Accepted(), codes)
	for w := range writers {
		seen := map[string]int{}
		var seq int64
		for e, err := range c.AllEvents(ctx, &kiokuv1.ListEventsRequest{Parent: name(w)}) {
			if err != nil {
				t.Fatal(err)
			}
			seen[e.GetId()]++
			if seq++; e.GetSequence() != seq {
				t.Errorf("event %s at sequence %d, want %d", e.GetId(), e.GetSequence(), seq)
			}
		}
		if len(seen) != each || seq != each {
			t.Errorf("session %d: %d distinct events in %d stored, want %d once each", w, len(seen), seq, each)
		}
	}

	// Refused: appends fail fast, health turns NOT_SERVING.
	healthz := func() int {
		resp, err := http.Get(srv.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	hc := grpchealth.NewClient(http.DefaultClient, srv.URL)
	grpcHealth := func() grpchealth.Status {
		res, err := hc.Check(ctx, &grpchealth.CheckRequest{Service: "kioku.v1.SessionService"})
		if err != nil {
			t.Fatal(err)
		}
		return res.Status
	}
	if code, st := healthz(), grpcHealth(); code != http.StatusOK || st != grpchealth.StatusServing {
		t.Fatalf("health while Firestore serves: %d, %v", code, st)
	}
	p.Refuse()
	once := client.New(srv.URL, client.WithRetry(client.RetryPolicy{MaxAttempts: 1}))
	began := time.Now()
	_, err := once.AppendEvent(ctx, &kiokuv1.AppendEventRequest{Event: &kiokuv1.Event{Id: "refused", Author: "user"}, Name: name(0)})
	if connect.CodeOf(err) != connect.CodeUnavailable || time.Since(began) > 2*time.Second {
		t.Fatalf("append while refused: %v after %v; want UNAVAILABLE within 2s", err, time.Since(began))
	}
	t.Logf("refused: UNAVAILABLE after %v", time.Since(began).Round(time.Millisecond))
	for began = time.Now(); healthz() != http.StatusServiceUnavailable || grpcHealth() != grpchealth.StatusNotServing; time.Sleep(100 * time.Millisecond) {
		if time.Since(began) > 6*time.Second {
			t.Fatal("health still SERVING 6s into the refusal")
		}
	}
	t.Logf("refused: NOT_SERVING after %v", time.Since(began).Round(time.Millisecond))
	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}
	for began = time.Now(); healthz() != http.StatusOK || grpcHealth() != grpchealth.StatusServing; time.Sleep(100 * time.Millisecond) {
		if time.Since(began) > 5*time.Second {
			t.Fatal("health still NOT_SERVING 5s after recovery")
		}
	}
	t.Logf("recovered: SERVING after %v", time.Since(began).Round(time.Millisecond))
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), "\nkioku_firestore_rollbacks_pending 0\n") {
		t.Errorf("/metrics has no kioku_firestore_rollbacks_pending 0 once Firestore is back")
	}
}
