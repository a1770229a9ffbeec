package main_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/firestoretest"
	"github.com/kioku-ai/kioku/internal/transport/auth"
)

// TestRateLimitAcrossServers: an app limited to 50 calls a second, flooded
// with 300 calls a second, gets at most 55 a second through one server on
// Firestore, and at most 60 a second through three servers on the same
// Firestore together (each grants its share of the limit, internal/cluster),
// where three servers with limits of their own would grant 150. The flood
// over three servers starts as the third one starts, while the shares are
// still moving.
func TestRateLimitAcrossServers(t *testing.T) {
	project := firestoretest.Project(t)
	key, entry := auth.NewKey("flood", "flood", "")
	b, _ := json.Marshal(map[string]any{
		"keys":        []auth.Key{entry},
		"rate_limits": map[string]auth.RateLimit{"flood": {PerSecond: 50, Burst: 5}},
	})
	keys := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(keys, b, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--store", "firestore", "--firestore-project", project, "--auth-keys", keys}

	const perSecond, limit = 300, 50
	first := startKioku(t, args...)
	alone := flood(t, key, []string{first.url}, perSecond, 3*time.Second)
	t.Logf("one server: %s", alone)
	if got := alone.acceptedPerSecond(); got > 55 || got < limit/2 {
		t.Errorf("one server accepted %.1f calls a second; want at most 55 (and at least %d)", got, limit/2)
	}

	second := startKioku(t, args...)
	third := startKioku(t, args...)
	all := flood(t, key, []string{first.url, second.url, third.url}, perSecond, 4*time.Second)
	t.Logf("three servers: %s", all)
	if got := all.acceptedPerSecond(); got > 60 || got < limit/2 {
		t.Errorf("three servers accepted %.1f calls a second together; want at most 60 (and at least %d)", got, limit/2)
	}
	for i, n := range all.perServer {
		if n == 0 {
			t.Errorf("server %d accepted no call in %v", i+1, all.elapsed)
		}
	}
}

// floodResult is what a flood saw.
type floodResult struct {
	sent, accepted, refused int64
	perServer               []int64 // accepted by each server
	other                   []error // errors other than RESOURCE_EXHAUSTED
	elapsed                 time.Duration
}

func (r *floodResult) acceptedPerSecond() float64 {
	return float64(r.accepted) / r.elapsed.Seconds()
}

func (r *floodResult) String() string {
	b, _ := json.Marshal(map[string]any{"sent": r.sent, "accepted": r.accepted, "refused": r.refused, "per_server": r.perServer,
		"seconds": r.elapsed.Seconds(), "accepted_per_second": r.acceptedPerSecond()})
	return string(b)
}

// flood calls GetSession (of a session that does not exist: NOT_FOUND
// passed the rate limit) at perSecond calls a second, open loop, spread
// over the servers in turn, for d; accepted are the calls not refused
// RESOURCE_EXHAUSTED. It fails the test on any other error.
func flood(t *testing.T, key string, urls []string, perSecond int, d time.Duration) *floodResult {
	t.Helper()
	clients := make([]kiokuv1connect.SessionServiceClient, len(urls))
	for i, u := range urls {
		clients[i] = kiokuv1connect.NewSessionServiceClient(http.DefaultClient, u)
	}
	res := &floodResult{perServer: make([]int64, len(urls))}
	var (
		accepted, refused atomic.Int64
		perServer         = make([]atomic.Int64, len(urls))
		mu                sync.Mutex
		wg                sync.WaitGroup
	)
	// Calls go out in small batches every few milliseconds, as many as
	// are due, so that a slow tick does not thin the flood.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	for i := 0; time.Since(start) < d; <-tick.C {
		for due := int(time.Since(start).Seconds() * float64(perSecond)); i < due; i++ {
			res.sent++
			wg.Go(func() {
				req := connect.NewRequest(&kiokuv1.GetSessionRequest{Name: "apps/flood/users/u/sessions/none"})
				req.Header().Set("Authorization", "Bearer "+key)
				_, err := clients[i%len(urls)].GetSession(t.Context(), req)
				switch connect.CodeOf(err) {
				case connect.CodeNotFound:
					accepted.Add(1)
					perServer[i%len(urls)].Add(1)
				case connect.CodeResourceExhausted:
					refused.Add(1)
				default:
					mu.Lock()
					res.other = append(res.other, err)
					mu.Unlock()
				}
			})
		}
	}
	res.elapsed = time.Since(start)
	wg.Wait()
	res.accepted, res.refused = accepted.Load(), refused.Load()
	for i := range perServer {
		res.perServer[i] = perServer[i].Load()
	}
	if len(res.other) > 0 {
		t.Fatalf("%d calls failed otherwise than NOT_FOUND or RESOURCE_EXHAUSTED, first: %v", len(res.other), res.other[0])
	}
	return res
}
