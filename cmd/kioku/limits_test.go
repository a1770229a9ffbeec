package main_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

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
	t.Parallel()
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
// over the servers in turn, for d, and on (30 s at most) until every
// server has accepted a call: a server that joins grants nothing until
// its beats have moved the shares, which on a busy emulator can take
// longer than d. Accepted are the calls not refused RESOURCE_EXHAUSTED.
// It fails the test on any other error.
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
	everyServer := func() bool {
		for i := range perServer {
			if perServer[i].Load() == 0 {
				return false
			}
		}
		return true
	}
	for i := 0; time.Since(start) < d || !everyServer() && time.Since(start) < d+30*time.Second; <-tick.C {
		for due := int(time.Since(start).Seconds() * float64(perSecond)); i < due; i++ {
			res.sent++
			n := i
			wg.Go(func() {
				req := connect.NewRequest(&kiokuv1.GetSessionRequest{Name: "apps/flood/users/u/sessions/none"})
				req.Header().Set("Authorization", "Bearer "+key)
				_, err := clients[n%len(urls)].GetSession(t.Context(), req)
				switch connect.CodeOf(err) {
				case connect.CodeNotFound:
					accepted.Add(1)
					perServer[n%len(urls)].Add(1)
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

// TestDailyQuotaSurvivesRestart: with --quota-generations 2 an app's third
// GenerateMemories of the day is RESOURCE_EXHAUSTED with a RetryInfo of
// the time until the day ends (UTC), /metrics shows the count and the
// quota, another app is not affected, and a restart on the same data
// directory keeps the count.
func TestDailyQuotaSurvivesRestart(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	args := []string{"--data-dir", dataDir, "--quota-generations", "2"}
	generate := func(url, app string) error {
		c := kiokuv1connect.NewMemoryBankServiceClient(http.DefaultClient, url)
		_, err := c.GenerateMemories(t.Context(), connect.NewRequest(&kiokuv1.GenerateMemoriesRequest{
			Parent: "apps/" + app, Scope: map[string]string{"user_id": "ann"},
			Source: &kiokuv1.GenerateMemoriesRequest_DirectMemoriesSource{DirectMemoriesSource: &kiokuv1.DirectMemoriesSource{
				Memories: []*kiokuv1.DirectMemory{{Fact: "The user likes tea."}},
			}},
		}))
		return err
	}
	refused := func(err error) {
		t.Helper()
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != connect.CodeResourceExhausted || !strings.Contains(ce.Message(), "2 memory generations of today") {
			t.Fatalf("past the quota: %v; want RESOURCE_EXHAUSTED naming the quota", err)
		}
		now := time.Now().UTC()
		untilMidnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC).Sub(now)
		for _, d := range ce.Details() {
			if v, err := d.Value(); err == nil {
				if ri, ok := v.(*errdetails.RetryInfo); ok {
					if got := ri.GetRetryDelay().AsDuration(); got > untilMidnight+time.Minute || got < untilMidnight-time.Minute {
						t.Fatalf("RetryInfo %v; want the time until the day ends, %v", got, untilMidnight)
					}
					return
				}
			}
		}
		t.Fatalf("past the quota: details %v; want a RetryInfo", ce.Details())
	}

	proc := startKioku(t, args...)
	for i := range 2 {
		if err := generate(proc.url, "q"); err != nil {
			t.Fatalf("generation %d within the quota: %v", i+1, err)
		}
	}
	refused(generate(proc.url, "q"))
	if err := generate(proc.url, "other"); err != nil {
		t.Fatalf("another app: %v", err)
	}
	res, err := http.Get(proc.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{`kioku_quota_used{app="q",quota="generations"} 2`, `kioku_quota_used{app="other",quota="generations"} 1`, `kioku_quota_limit{quota="generations"} 2`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	proc.cmd.Process.Signal(syscall.SIGTERM)
	proc.cmd.Wait()
	proc = startKioku(t, args...)
	refused(generate(proc.url, "q"))
}
