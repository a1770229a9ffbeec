package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/seal"
	"github.com/kioku-ai/kioku/model/scripted"
)

// benchEnv is a kioku node serving on loopback for a benchmark, with a
// client for it.
type benchEnv struct {
	node       *node.Node
	dir        string // the data directory
	url        string
	httpClient *http.Client
	close      func()
}

// startBenchNode starts a node on a fresh temporary store and serves it on
// a loopback port.
func startBenchNode(ctx context.Context, store, project string, extra ...func(*node.Config)) (*benchEnv, error) {
	dir, err := os.MkdirTemp("", "kioku-bench-")
	if err != nil {
		return nil, err
	}
	cfg := node.Config{
		Store:             store,
		DataDir:           dir,
		FirestoreProject:  project,
		FirestoreDatabase: "(default)",
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, f := range extra {
		f(&cfg)
	}
	node.LimitMemory(cfg) // as kioku serve does
	n, err := node.Open(ctx, cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		n.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	srv := n.HTTPServer()
	go srv.Serve(ln)
	return &benchEnv{
		node:       n,
		dir:        dir,
		url:        "http://" + ln.Addr().String(),
		httpClient: &http.Client{Transport: benchTransport()},
		close: func() {
			srv.Close()
			n.Close()
			os.RemoveAll(dir)
		},
	}, nil
}

// sessions returns a client of the node's session service.
func (e *benchEnv) sessions() kiokuv1connect.SessionServiceClient {
	return kiokuv1connect.NewSessionServiceClient(e.httpClient, e.url)
}

// memories returns a client of the node's memory bank service.
func (e *benchEnv) memories() kiokuv1connect.MemoryBankServiceClient {
	return kiokuv1connect.NewMemoryBankServiceClient(e.httpClient, e.url)
}

// operations returns a client of the node's operation service.
func (e *benchEnv) operations() kiokuv1connect.OperationServiceClient {
	return kiokuv1connect.NewOperationServiceClient(e.httpClient, e.url)
}

// benchTransport is the benchmarks' client transport: HTTP/2 over
// cleartext (h2c), as kioku serves on loopback.
func benchTransport() *http.Transport {
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Transport{Protocols: protocols}
}

// firstError keeps the first error of a phase's concurrent calls and
// cancels the phase's context, so that the other calls stop.
type firstError struct {
	mu     sync.Mutex
	err    error
	cancel context.CancelFunc
}

// set records err, unless the phase was cancelled already (then err is
// the cancellation's consequence).
func (f *firstError) set(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.mu.Unlock()
	f.cancel()
}

// measureThroughput runs fn from clients goroutines for d and returns the
// calls per second and every call's latency. fn gets its client number and
// the client's call counter. The first error stops the run.
func measureThroughput(ctx context.Context, clients int, d time.Duration, fn func(ctx context.Context, client, i int) error) (float64, []time.Duration, error) {
	var (
		mu   sync.Mutex
		lats []time.Duration
		wg   sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	failed := &firstError{cancel: cancel}
	start := time.Now()
	deadline := start.Add(d)
	for c := range clients {
		wg.Go(func() {
			var mine []time.Duration
			for i := 0; time.Now().Before(deadline); i++ {
				t0 := time.Now()
				if err := fn(ctx, c, i); err != nil {
					failed.set(ctx, err)
					break
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if failed.err != nil {
		return 0, nil, failed.err
	}
	return float64(len(lats)) / elapsed.Seconds(), lats, nil
}

// openLoop is what an open-loop phase measured.
type openLoop struct {
	// Latencies of every call, counted from its scheduled time; a call
	// that failed counts the time until it failed.
	Latencies []time.Duration
	// Completed is the calls that returned a second, over the phase from
	// its start to the last return.
	Completed float64
	// Failed counts the calls that failed, FirstError is the first one's
	// error: an overloaded server lets calls run out of their deadline.
	Failed     int
	FirstError error
}

// openSenders is how many calls an open loop has in flight at most: its
// sending goroutines. A goroutine for every call, thousands in flight past
// a server's capacity, spent more CPU than the server did (each finished
// HTTP/2 stream woke every call waiting for one), so the sender, not the
// server, set the rate; the calls a bounded sender cannot start yet wait
// in its queue, and that wait counts in their latencies.
const openSenders = 512

// measureOpenLoop calls fn at a fixed arrival rate (calls a second) for d:
// each call is handed at its scheduled time to the first free one of
// openSenders goroutines, whether or not earlier calls have returned (an
// open loop), and timed from its scheduled time, not from when it was
// sent: a server that falls behind shows in the latencies instead of
// slowing the sender down (no coordinated omission), and so does a sender
// that wakes late or has no goroutine free. fn gets the sending
// goroutine's number and the call's. Failed calls are counted, not fatal:
// past its capacity a server's calls time out, and that is a result.
func measureOpenLoop(ctx context.Context, rate float64, d time.Duration, fn func(ctx context.Context, sender, i int) error) (*openLoop, error) {
	n := int(rate * d.Seconds())
	interval := time.Duration(float64(time.Second) / rate)
	out := &openLoop{Latencies: make([]time.Duration, n)}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	start := time.Now()
	due := make(chan int, n)
	for s := range min(openSenders, n) {
		wg.Go(func() {
			for i := range due {
				err := fn(ctx, s, i)
				out.Latencies[i] = time.Since(start.Add(time.Duration(i) * interval))
				if err != nil {
					mu.Lock()
					if out.Failed++; out.FirstError == nil {
						out.FirstError = err
					}
					mu.Unlock()
				}
			}
		})
	}
	// Hand the calls out as they fall due, waking every millisecond (or
	// at the interval, if longer) rather than for each call.
	tick := time.NewTicker(max(interval, time.Millisecond))
	defer tick.Stop()
	for sent := 0; sent < n; {
		for elapsed := time.Since(start); sent < n && time.Duration(sent)*interval <= elapsed; sent++ {
			due <- sent
		}
		if sent == n {
			break
		}
		select {
		case <-ctx.Done():
			close(due)
			wg.Wait()
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
	close(due)
	wg.Wait()
	out.Completed = float64(n) / time.Since(start).Seconds()
	return out, ctx.Err()
}

// cpuTime returns the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuPerCall returns the CPU time this process used since before (a
// cpuTime reading) divided among calls, in microseconds: with the clients
// in the same process, what one call costs on both ends. Unlike a rate,
// it hardly moves when other processes load the machine.
func cpuPerCall(before time.Duration, calls float64) float64 {
	return float64(cpuTime()-before) / float64(time.Microsecond) / calls
}

// measureLatency calls fn n times in sequence (after a few warm-up calls)
// and returns the latencies.
func measureLatency(ctx context.Context, n int, fn func(ctx context.Context) error) ([]time.Duration, error) {
	for range 10 {
		if err := fn(ctx); err != nil {
			return nil, err
		}
	}
	lats := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if err := fn(ctx); err != nil {
			return nil, err
		}
		lats = append(lats, time.Since(t0))
	}
	return lats, nil
}

// percentile returns the q-quantile (0..1) of the latencies.
func percentile(lats []time.Duration, q float64) time.Duration {
	if len(lats) == 0 {
		return 0
	}
	s := slices.Clone(lats)
	slices.Sort(s)
	i := int(q * float64(len(s)-1))
	return s[i]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// benchReport collects named figures in order for the JSON line.
type benchReport struct {
	keys   []string
	values map[string]any
}

func (r *benchReport) set(key string, v any) {
	if r.values == nil {
		r.values = map[string]any{}
	}
	if _, ok := r.values[key]; !ok {
		r.keys = append(r.keys, key)
	}
	r.values[key] = v
}

func (r *benchReport) get(key string) float64 {
	f, _ := r.values[key].(float64)
	return f
}

// printJSON writes the figures as one JSON object on one line, in the order
// they were set.
func (r *benchReport) printJSON(w io.Writer) error {
	buf := []byte{'{'}
	for i, k := range r.keys {
		if i > 0 {
			buf = append(buf, ',')
		}
		kb, _ := json.Marshal(k)
		v := r.values[k]
		if f, ok := v.(float64); ok {
			v = roundFigure(f)
		}
		vb, err := json.Marshal(v)
		if err != nil {
			return err
		}
		buf = append(buf, kb...)
		buf = append(buf, ':')
		buf = append(buf, vb...)
	}
	buf = append(buf, '}', '\n')
	_, err := w.Write(buf)
	return err
}

// roundFigure keeps four significant digits.
func roundFigure(f float64) float64 {
	var out float64
	fmt.Sscanf(fmt.Sprintf("%.4g", f), "%g", &out)
	return out
}

// startCPUProfile starts a CPU profile into path ("" profiles nothing) and
// returns the function that stops it.
func startCPUProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// storeUsage measures what a phase costs in Firestore documents: it runs f
// n times in sequence and returns the reads, writes and deletes per call
// (zero on SQLite, which has no meter).
func (e *benchEnv) storeUsage(ctx context.Context, n int, f func(ctx context.Context, i int) error) (perCall [3]float64, err error) {
	if e.node.Firestore == nil {
		return perCall, nil
	}
	before := e.node.Firestore.Usage()
	for i := range n {
		if err := f(ctx, i); err != nil {
			return perCall, err
		}
	}
	u := e.node.Firestore.Usage().Sub(before)
	return [3]float64{float64(u.Reads) / float64(n), float64(u.Writes) / float64(n), float64(u.Deletes) / float64(n)}, nil
}

// reportUsage records and prints a phase's documents per call.
func reportUsage(r *benchReport, say func(string, ...any), name string, per [3]float64) {
	r.set(name+"_reads", per[0])
	r.set(name+"_writes", per[1])
	if per[2] > 0 {
		r.set(name+"_deletes", per[2])
	}
	say("%-24s %7.2f reads %7.2f writes %7.2f deletes per call", name, per[0], per[1], per[2])
}

// idleUsage measures the documents an idle server reads, writes and
// deletes over d, scaled to one minute.
func (e *benchEnv) idleUsage(ctx context.Context, d time.Duration) ([3]float64, error) {
	var per [3]float64
	if e.node.Firestore == nil || d <= 0 {
		return per, nil
	}
	before := e.node.Firestore.Usage()
	select {
	case <-ctx.Done():
		return per, ctx.Err()
	case <-time.After(d):
	}
	u := e.node.Firestore.Usage().Sub(before)
	scale := float64(time.Minute) / float64(d)
	return [3]float64{float64(u.Reads) * scale, float64(u.Writes) * scale, float64(u.Deletes) * scale}, nil
}

// benchEncryption is an option of startBenchNode: with on, the store is
// encrypted under a new master key (bench sessions and memories
// --encrypted), to measure what encryption costs.
func benchEncryption(on bool) func(*node.Config) {
	return func(c *node.Config) {
		if on {
			c.EncryptionKey = seal.GenerateLocalKey()
		}
	}
}

// serveCelloGemini serves a fake Gemini that answers every call, after
// latency, with one fact drawn from the first event (the user plays the
// cello on Sundays), and returns its URL and its stop.
func serveCelloGemini(latency time.Duration) (url string, stop func(), err error) {
	return scripted.Serve(&scripted.Gemini{Respond: func(scripted.Call) (scripted.Reply, error) {
		time.Sleep(latency)
		return scripted.Reply{Text: `{"facts":[{"fact":"The user plays the cello on Sundays.","topic":"USER_PREFERENCES","events":[1]}]}`}, nil
	}})
}
