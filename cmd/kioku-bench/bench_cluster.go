package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/cli"
	"github.com/kioku-ai/kioku/internal/transport/auth"
)

const benchClusterUsage = `Usage: kioku-bench cluster [--json] [--servers 1,2,3] [--rate 100] [--duration 6s]
       [--limit 50] [--flood 300] [--flood-duration 4s] [--kioku BIN]

Needs FIRESTORE_EMULATOR_HOST. For each server count N it starts N
kioku serve processes (--kioku, or built from ./cmd/kioku) on one fresh
project of the emulator, with a fake Gemini endpoint in this process,
and sends appends at --rate a second, spread over the servers in turn,
for --duration (an open loop: each append timed from its scheduled time;
one refused by a server is sent again, with the same event id, to the
next). The servers take API keys: the appends' app has no rate limit,
another app one of --limit calls a second (its key file's rate_limits),
which is first flooded with --flood calls a second spread over the
servers for --flood-duration, from as soon as the last server listens.
It reports per N:

  n<N>_limit_accepted_per_s  the flooded app's calls accepted a second by
                          all servers together (against n<N>_limit_per_s,
                          the limit, and n<N>_flood_per_s, the calls sent)

  n<N>_appends_per_s      appends acknowledged a second
  n<N>_p50_ms, _p99_ms,   their latencies
    _max_ms
  n<N>_cpu_us_per_append  the servers' CPU time (user and system) an append
  n<N>_failed             appends no server acknowledged

With the largest N (2 or more) it also queues --generations memory
generations through the last server, whose model calls take
--model-latency, and SIGKILLs that server halfway through the appends:

  kill_acked              appends acknowledged in that run
  kill_lost               of those, missing from the store afterwards
  kill_takeovers          operations the killed server held, claimed
                          again by another server
  kill_resume_first_s     the shortest time from the kill until one of
                          them was claimed again
  kill_resume_max_s       the longest time from the kill until one of
                          them was claimed again (at most about the
                          lease, --lease, plus the survivors' poll)
  lease_s                 the lease

The emulator is one process on this machine, as are the servers and
this sender: the figures say how kioku shares work and survives a crash
between servers, not how Firestore scales.

Flags:
`

func benchCluster(ctx context.Context, args []string) error {
	fs := cli.NewFlagSet("kioku-bench cluster", "KIOKU_", benchClusterUsage)
	asJSON := fs.Bool("json", false, "print the results as one JSON object on the last line")
	serversFlag := fs.String("servers", "1,2,3", "server counts to measure, comma-separated; the kill runs with the largest")
	rate := fs.Int("rate", 100, "appends a second, spread over the servers")
	duration := fs.Duration("duration", 6*time.Second, "how long each run sends appends")
	bin := fs.String("kioku", "", "kioku binary to run (default: go build ./cmd/kioku)")
	lease := fs.Duration("lease", 5*time.Second, "the servers' --operation-lease")
	latency := fs.Duration("model-latency", 10*time.Second, "time the fake model takes to answer a call (the kill run's generations)")
	generations := fs.Int("generations", 20, "memory generations queued through the server the kill run kills")
	sessionsN := fs.Int("sessions", 64, "sessions the appends go to, in turn, each of a user of its own")
	limit := fs.Float64("limit", 50, "calls a second the flooded app may make (its app rate limit); 0: no flood")
	floodRate := fs.Int("flood", 300, "calls a second sent to the flooded app, spread over the servers")
	floodFor := fs.Duration("flood-duration", 4*time.Second, "how long each run floods the limited app")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if os.Getenv("FIRESTORE_EMULATOR_HOST") == "" {
		return fmt.Errorf("kioku-bench cluster needs FIRESTORE_EMULATOR_HOST (the Firestore emulator)")
	}
	var counts []int
	for _, f := range strings.Split(*serversFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 16 {
			return fmt.Errorf("--servers %q: want numbers from 1 to 16", *serversFlag)
		}
		counts = append(counts, n)
	}
	if *rate < 1 || *sessionsN < 1 || *floodRate < 1 {
		return fmt.Errorf("--rate, --sessions and --flood must be at least 1")
	}
	if *limit < 0 {
		return fmt.Errorf("--limit %v: want 0 (no flood) or more", *limit)
	}
	if *bin == "" {
		dir, err := os.MkdirTemp("", "kioku-bench-cluster-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		*bin = filepath.Join(dir, "kioku")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", *bin, "./cmd/kioku").CombinedOutput(); err != nil {
			return fmt.Errorf("building kioku (run from the repository's root, or give --kioku): %v\n%s", err, out)
		}
	}
	fakeURL, stopFake, err := serveCelloGemini(*latency)
	if err != nil {
		return err
	}
	defer stopFake()

	r := &benchReport{}
	say := func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) }
	say("kioku-bench cluster: %d appends/s for %v a run, lease %v, emulator %s", *rate, *duration, *lease, os.Getenv("FIRESTORE_EMULATOR_HOST"))
	most := 0
	for _, n := range counts {
		most = max(most, n)
	}
	for i, n := range counts {
		kill := n == most && n >= 2 && !containsAfter(counts, i, most)
		c := &clusterRun{bin: *bin, fakeURL: fakeURL, lease: *lease, servers: n, rate: *rate, duration: *duration, sessions: *sessionsN, generations: *generations, kill: kill,
			limit: *limit, floodRate: *floodRate, floodFor: *floodFor}
		if err := c.run(ctx, r, say); err != nil {
			return fmt.Errorf("%d servers: %w", n, err)
		}
	}
	if *asJSON {
		return r.printJSON(stdout)
	}
	return nil
}

// containsAfter reports whether v occurs in list after index i.
func containsAfter(list []int, i, v int) bool {
	for _, x := range list[i+1:] {
		if x == v {
			return true
		}
	}
	return false
}

// clusterRun is one run of kioku-bench cluster: N servers on a project of
// their own.
type clusterRun struct {
	bin, fakeURL    string
	lease, duration time.Duration
	servers, rate   int
	sessions        int
	generations     int
	kill            bool
	limit           float64 // the flooded app's calls a second
	floodRate       int
	floodFor        time.Duration
	floodKey        string
	procs           []*clusterServer
	project         string
	killedCPU       time.Duration // the killed server's CPU time just before the kill
	killTime        time.Time
	atKill          map[string]*kiokuv1.OperationMetadata // the kill run's generations just before the kill
	atKillErr       error
	victimI         int
}

// clusterServer is a kioku serve process of a run.
type clusterServer struct {
	cmd  *exec.Cmd
	url  string
	sc   kiokuv1connect.SessionServiceClient
	hc   *http.Client
	dead bool
}

var clusterListening = regexp.MustCompile(`kioku listening on (http://\S+)`)

// start starts the run's servers and waits until each listens.
func (c *clusterRun) start(ctx context.Context) error {
	c.project = "bench-cluster-" + strings.ToLower(aip.NewID()[:10])
	// The appends' key has no limit (--rate-limit 0); the flooded app has
	// --limit.
	benchKey, benchEntry := auth.NewKey("bench", "bench", "")
	floodKey, floodEntry := auth.NewKey("flood", clusterFloodApp, "")
	c.floodKey = floodKey
	keyFile, err := os.CreateTemp("", "kioku-bench-cluster-keys-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(keyFile.Name()) // each server reads it as it starts
	err = json.NewEncoder(keyFile).Encode(map[string]any{
		"keys":        []auth.Key{benchEntry, floodEntry},
		"rate_limits": map[string]auth.RateLimit{clusterFloodApp: {PerSecond: c.limit, Burst: 5}},
	})
	if cerr := keyFile.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	for range c.servers {
		cmd := exec.Command(c.bin, "serve", "--addr", "127.0.0.1:0", "--log-level", "error", "--store", "firestore",
			"--firestore-project", c.project, "--operation-lease", c.lease.String(), "--rate-limit", "0",
			"--auth-keys", keyFile.Name(), "--model-provider", "gemini", "--gemini-base-url", c.fakeURL)
		cmd.Env = append(os.Environ(), "GEMINI_API_KEY=bench")
		stderr, err := cmd.StderrPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		s := &clusterServer{cmd: cmd, hc: &http.Client{Transport: keyTransport{benchTransport(), benchKey}}}
		c.procs = append(c.procs, s)
		found := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				if m := clusterListening.FindStringSubmatch(sc.Text()); m != nil {
					select {
					case found <- m[1]:
					default:
					}
				}
			}
		}()
		select {
		case s.url = <-found:
		case <-time.After(60 * time.Second):
			return fmt.Errorf("a kioku serve did not listen within a minute")
		case <-ctx.Done():
			return ctx.Err()
		}
		s.sc = kiokuv1connect.NewSessionServiceClient(s.hc, s.url)
	}
	return nil
}

// stop kills every server still running.
func (c *clusterRun) stop() {
	for _, s := range c.procs {
		if !s.dead {
			s.cmd.Process.Kill()
		}
		s.cmd.Wait()
		s.hc.CloseIdleConnections()
	}
}

// serversCPU returns the CPU time the run's servers used, the killed
// one's until its kill.
func (c *clusterRun) serversCPU() time.Duration {
	total := c.killedCPU
	for _, s := range c.procs {
		if !s.dead {
			total += processCPU(s.cmd.Process.Pid)
		}
	}
	return total
}

// processCPU returns the CPU time (user and system) of a process, from
// /proc (zero where there is none).
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // after the command's name
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticks
}

func (c *clusterRun) run(ctx context.Context, r *benchReport, say func(string, ...any)) error {
	defer c.stop()
	if err := c.start(ctx); err != nil {
		return err
	}
	if c.limit > 0 {
		c.flood(ctx, r, say)
	}
	names := make([]string, c.sessions)
	for i := range names {
		s := c.procs[i%len(c.procs)]
		res, err := s.sc.CreateSession(ctx, connect.NewRequest(&kiokuv1.CreateSessionRequest{
			Parent: fmt.Sprintf("apps/bench/users/u%d", i), SessionId: fmt.Sprint("s", i),
		}))
		if err != nil {
			return err
		}
		names[i] = res.Msg.GetName()
	}
	var ops []string
	if c.kill {
		c.victimI = len(c.procs) - 1
		var err error
		if ops, err = c.queueGenerations(ctx); err != nil {
			return err
		}
	}

	var (
		mu    sync.Mutex
		acked = map[string][]string{} // session → event ids acknowledged
	)
	cpuBefore := c.serversCPU()
	killDone := make(chan struct{})
	if c.kill {
		go func() {
			defer close(killDone)
			select {
			case <-time.After(c.duration / 2):
			case <-ctx.Done():
				return
			}
			c.atKill, c.atKillErr = c.operations(ctx, ops)
			victim := c.procs[c.victimI]
			cpu := processCPU(victim.cmd.Process.Pid)
			mu.Lock()
			c.killedCPU, c.killTime, victim.dead = cpu, time.Now(), true
			mu.Unlock()
			victim.cmd.Process.Signal(syscall.SIGKILL)
		}()
	} else {
		close(killDone)
	}
	ok := make([]bool, int(float64(c.rate)*c.duration.Seconds()))
	o, err := measureOpenLoop(ctx, float64(c.rate), c.duration, func(ctx context.Context, _, i int) error {
		session, id := names[i%len(names)], fmt.Sprintf("e%d", i)
		var err error
		for try := range len(c.procs) {
			s := c.procs[(i+try)%len(c.procs)]
			mu.Lock()
			dead := s.dead
			mu.Unlock()
			if dead && try < len(c.procs)-1 {
				continue
			}
			callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, err = s.sc.AppendEvent(callCtx, connect.NewRequest(&kiokuv1.AppendEventRequest{Name: session, Event: &kiokuv1.Event{
				Id: id, Author: "user", Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: "I would like a cup of green tea, please."}}},
			}}))
			cancel()
			if err == nil {
				mu.Lock()
				acked[session] = append(acked[session], id)
				ok[i] = true
				mu.Unlock()
				return nil
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	<-killDone
	cpu := c.serversCPU() - cpuBefore
	n := c.servers
	// Acknowledged appends a second, until the last was acknowledged (an
	// append that never was, waiting out its timeout, does not stretch it).
	appends, last := 0.0, time.Duration(0)
	interval := time.Duration(float64(time.Second) / float64(c.rate))
	for i, lat := range o.Latencies {
		if ok[i] {
			appends++
			last = max(last, time.Duration(i)*interval+lat)
		}
	}
	p := fmt.Sprintf("n%d_", n)
	perAppend := float64(cpu) / float64(time.Microsecond) / max(1, appends)
	r.set(p+"appends_per_s", appends/max(last, time.Millisecond).Seconds())
	r.set(p+"max_ms", ms(percentile(o.Latencies, 1)))
	r.set(p+"p50_ms", ms(percentile(o.Latencies, 0.5)))
	r.set(p+"p99_ms", ms(percentile(o.Latencies, 0.99)))
	r.set(p+"cpu_us_per_append", perAppend)
	r.set(p+"failed", float64(o.Failed))
	killed := ""
	if c.kill {
		killed = fmt.Sprintf(", one SIGKILLed at %v", c.duration/2)
	}
	say("%d servers%s: %7.1f appends/s   p50 %7.2f ms   p99 %7.2f ms   max %7.0f ms   %6.0f µs of server CPU an append   %d failed",
		n, killed, r.get(p+"appends_per_s"), r.get(p+"p50_ms"), r.get(p+"p99_ms"), r.get(p+"max_ms"), perAppend, o.Failed)
	if !c.kill {
		return nil
	}

	// Every acknowledged append must be in the store.
	survivor := c.procs[0]
	total, lost := 0, 0
	for _, session := range names {
		stored := map[string]bool{}
		token := ""
		for {
			res, err := survivor.sc.ListEvents(ctx, connect.NewRequest(&kiokuv1.ListEventsRequest{Parent: session, PageSize: 1000, PageToken: token}))
			if err != nil {
				return err
			}
			for _, e := range res.Msg.GetEvents() {
				stored[e.GetId()] = true
			}
			if token = res.Msg.GetNextPageToken(); token == "" {
				break
			}
		}
		for _, id := range acked[session] {
			total++
			if !stored[id] {
				lost++
			}
		}
	}
	r.set("kill_acked", float64(total))
	r.set("kill_lost", float64(lost))
	say("acknowledged appends %d, lost %d", total, lost)
	if c.atKillErr != nil {
		return c.atKillErr
	}
	takeovers, first, resume, err := c.resumed(ctx, ops)
	if err != nil {
		return err
	}
	r.set("kill_takeovers", float64(takeovers))
	r.set("kill_resume_first_s", first.Seconds())
	r.set("kill_resume_max_s", resume.Seconds())
	r.set("lease_s", c.lease.Seconds())
	say("operations of the killed server claimed again %d, the first %.2f s and the last %.2f s after the kill (lease %v)", takeovers, first.Seconds(), resume.Seconds(), c.lease)
	return nil
}

// queueGenerations queues the kill run's generations through the server
// it kills (whose scheduler its own Enqueue wakes, so that it claims
// them), waits until it holds some, and returns their names.
func (c *clusterRun) queueGenerations(ctx context.Context) ([]string, error) {
	victim := c.procs[c.victimI]
	mc := kiokuv1connect.NewMemoryBankServiceClient(victim.hc, victim.url)
	var names []string
	for i := range c.generations {
		res, err := mc.GenerateMemories(ctx, connect.NewRequest(&kiokuv1.GenerateMemoriesRequest{
			Parent: "apps/bench", Scope: map[string]string{"user_id": fmt.Sprint("gen-", i)},
			Source: &kiokuv1.GenerateMemoriesRequest_EventsSource{EventsSource: &kiokuv1.EventsSource{Events: []*kiokuv1.Event{
				{Author: "user", Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: "I play the cello on Sundays."}}}},
			}}},
		}))
		if err != nil {
			return nil, err
		}
		names = append(names, res.Msg.GetName())
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		states, err := c.operations(ctx, names)
		if err != nil {
			return nil, err
		}
		running := 0
		for _, m := range states {
			if m.GetState() == kiokuv1.OperationState_OPERATION_STATE_RUNNING {
				running++
			}
		}
		if running > 0 {
			return names, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no generation started within 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// operations returns the metadata of the named operations, read through
// a live server.
func (c *clusterRun) operations(ctx context.Context, names []string) (map[string]*kiokuv1.OperationMetadata, error) {
	var live *clusterServer
	for _, s := range c.procs {
		if !s.dead {
			live = s
			break
		}
	}
	oc := kiokuv1connect.NewOperationServiceClient(live.hc, live.url)
	out := map[string]*kiokuv1.OperationMetadata{}
	for _, name := range names {
		res, err := oc.GetOperation(ctx, connect.NewRequest(&kiokuv1.GetOperationRequest{Name: name}))
		if err != nil {
			return nil, err
		}
		m := &kiokuv1.OperationMetadata{}
		if err := res.Msg.GetMetadata().UnmarshalTo(m); err != nil {
			return nil, fmt.Errorf("operation %s: %w", name, err)
		}
		out[name] = m
	}
	return out, nil
}

// resumed waits until every operation the killed server was running is
// claimed again by another server (its attempt grows), or done, and
// returns how many were claimed again and the longest time from the kill
// to their new start.
func (c *clusterRun) resumed(ctx context.Context, names []string) (takeovers int, first, longest time.Duration, err error) {
	// The operations running at the kill: the killed server's, which
	// another claims again after their lease (a new attempt), and any a
	// survivor had claimed, which it finishes at the same attempt.
	held := map[string]int32{}
	for name, m := range c.atKill {
		if m.GetState() == kiokuv1.OperationState_OPERATION_STATE_RUNNING {
			held[name] = m.GetAttempt()
		}
	}
	deadline := time.Now().Add(c.lease + time.Minute)
	for len(held) > 0 {
		if time.Now().After(deadline) {
			return 0, 0, 0, fmt.Errorf("%d operations of the killed server were not claimed again within the lease and a minute", len(held))
		}
		time.Sleep(100 * time.Millisecond)
		now, err := c.operations(ctx, names)
		if err != nil {
			return 0, 0, 0, err
		}
		for name, attempt := range held {
			m := now[name]
			switch st := m.GetState(); {
			case st == kiokuv1.OperationState_OPERATION_STATE_SUCCEEDED || st == kiokuv1.OperationState_OPERATION_STATE_FAILED:
				if m.GetAttempt() == attempt {
					delete(held, name) // a survivor had claimed it before the kill, and finished it
					continue
				}
			}
			if m.GetAttempt() > attempt {
				takeovers++
				at := m.GetStartTime().AsTime().Sub(c.killTime)
				if takeovers == 1 || at < first {
					first = at
				}
				longest = max(longest, at)
				delete(held, name)
			}
		}
	}
	return takeovers, first, longest, nil
}

// clusterFloodApp is the app kioku-bench cluster floods past its limit.
const clusterFloodApp = "flood"

// keyTransport sends each request with an API key, unless it has an
// Authorization of its own.
type keyTransport struct {
	base *http.Transport
	key  string
}

func (t keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+t.key)
	}
	return t.base.RoundTrip(r)
}

func (t keyTransport) CloseIdleConnections() { t.base.CloseIdleConnections() }

// flood sends GetSession calls of the flooded app (of a session that does
// not exist: NOT_FOUND is a call the rate limit let through) at floodRate
// a second, open loop, spread over the servers in turn, for floodFor, and
// reports how many a second the servers accepted together against the
// limit. Calls go out in small batches every few milliseconds, as many as
// are due, so that a slow tick does not thin the flood.
func (c *clusterRun) flood(ctx context.Context, r *benchReport, say func(string, ...any)) {
	var (
		wg                   sync.WaitGroup
		mu                   sync.Mutex
		sent, refused, other int
		perServer            = make([]int, len(c.procs))
		firstOther           error
	)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	for i := 0; time.Since(start) < c.floodFor && ctx.Err() == nil; <-tick.C {
		for due := int(time.Since(start).Seconds() * float64(c.floodRate)); i < due; i++ {
			sent++
			s := c.procs[i%len(c.procs)]
			wg.Go(func() {
				req := connect.NewRequest(&kiokuv1.GetSessionRequest{Name: "apps/" + clusterFloodApp + "/users/u/sessions/none"})
				req.Header().Set("Authorization", "Bearer "+c.floodKey)
				_, err := s.sc.GetSession(ctx, req)
				mu.Lock()
				defer mu.Unlock()
				switch connect.CodeOf(err) {
				case connect.CodeNotFound:
					perServer[slices.Index(c.procs, s)]++
				case connect.CodeResourceExhausted:
					refused++
				default:
					if other++; firstOther == nil {
						firstOther = err
					}
				}
			})
		}
	}
	elapsed := time.Since(start)
	wg.Wait()
	accepted := 0
	for _, n := range perServer {
		accepted += n
	}
	p := fmt.Sprintf("n%d_", c.servers)
	r.set(p+"limit_accepted_per_s", float64(accepted)/elapsed.Seconds())
	r.set(p+"limit_per_s", c.limit)
	r.set(p+"flood_per_s", float64(sent)/elapsed.Seconds())
	say("%d servers, an app limited to %g calls/s flooded with %.0f/s for %v: %.1f accepted/s (by server %v), %d refused, %d failed otherwise",
		c.servers, c.limit, float64(sent)/elapsed.Seconds(), elapsed.Round(time.Millisecond), float64(accepted)/elapsed.Seconds(), perServer, refused, other)
	if firstOther != nil {
		say("  the first call that failed otherwise: %v", firstOther)
	}
}
