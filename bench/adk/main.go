// Command adk compares, in one run, the durable appends of kioku over RPC
// with those of ADK-Go's own database session service
// (google.golang.org/adk/v2/session/database: GORM over SQLite, WAL,
// synchronous=FULL), each with the same number of concurrent writers, a
// session each, appending the same event: a short text with a
// session-scoped state delta.
//
//	cd bench/adk && go run . [--duration 1s] [--rounds 30] [--writers 64] [--json]
//
// ADK's service runs in this process, as an agent embeds it, on one
// database/sql connection (SQLite has one writer at a time; with more
// connections GORM's transactions fail with SQLITE_BUSY instead of
// waiting) and at Go's default GOGC. kioku runs as a `kioku serve` of
// its own (built from this repository, or --kioku), with its defaults, on
// a fresh data directory each round; this process's writers call its
// AppendEvent over Connect on HTTP/2 (h2c) on loopback, as `kioku-bench
// sessions` does.
//
// Both services are set up once and measured in alternating slices of
// --duration (ADK, then kioku, --rounds times, after a warm-up slice of
// each), each writer continuing its session: on a machine whose load
// changes from second to second, short interleaved slices put both
// services under the same load, where rounds of several seconds each, on
// fresh stores, measured one service in a quiet moment and the other in a
// busy one (single rounds ranged from 2.2× to 8.5× in one run). It prints
// every round's appends a second and their ratio, the CPU time an append
// cost (ADK: this process; kioku: its server and this process's client),
// and the pooled figure, all appends over all slices of each, which is
// the run's result; with --json the last line is one JSON object with
// them. It is a module of its own so that GORM and ADK's database service
// stay out of kioku's go.mod (and because their SQLite driver and kioku's
// register the same database/sql name).
package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/glebarez/sqlite"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/session/database"
	"google.golang.org/genai"
	"google.golang.org/protobuf/types/known/structpb"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
)

// text is the benchmark event's text, as kioku-bench sessions sends it.
const text = "I would like a cup of green tea, please."

func main() {
	duration := flag.Duration("duration", time.Second, "how long each service runs in a round")
	rounds := flag.Int("rounds", 30, "rounds, each a slice of ADK then one of kioku")
	writers := flag.Int("writers", 64, "concurrent writers, a session each")
	kioku := flag.String("kioku", "", "kioku binary to serve with; empty: go build ../../cmd/kioku")
	asJSON := flag.Bool("json", false, "print the results as one JSON object on the last line")
	flag.Parse()
	if err := run(context.Background(), *kioku, *duration, *rounds, *writers, *asJSON); err != nil {
		fmt.Fprintln(os.Stderr, "adk:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kioku string, d time.Duration, rounds, writers int, asJSON bool) error {
	if kioku == "" {
		dir, err := os.MkdirTemp("", "kioku-bin-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		kioku = filepath.Join(dir, "kioku")
		build := exec.Command("go", "build", "-o", kioku, "./cmd/kioku")
		build.Dir = "../.." // kioku's own module
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("building kioku: %v\n%s", err, out)
		}
	}
	fmt.Printf("appends a second, %d writers, slices of %v alternating, GOMAXPROCS %d\n", writers, d, runtime.GOMAXPROCS(0))
	adk, err := newADK(ctx, writers)
	if err != nil {
		return fmt.Errorf("ADK: %w", err)
	}
	defer adk.close()
	kio, err := newKioku(ctx, kioku, writers)
	if err != nil {
		return fmt.Errorf("kioku: %w", err)
	}
	defer kio.close()
	// A warm-up slice of each, not counted.
	for _, t := range []*target{adk, kio} {
		if _, err := t.slice(ctx, d/2); err != nil {
			return err
		}
	}
	var ratios []float64
	for r := range rounds {
		a, err := adk.slice(ctx, d)
		if err != nil {
			return fmt.Errorf("ADK round %d: %w", r+1, err)
		}
		k, err := kio.slice(ctx, d)
		if err != nil {
			return fmt.Errorf("kioku round %d: %w", r+1, err)
		}
		ratios = append(ratios, k/a)
		fmt.Printf("round %2d: adk_database %8.0f   kioku_rpc %8.0f   (%.2f×)\n", r+1, a, k, k/a)
	}
	a, k := adk.pooled(), kio.pooled()
	fmt.Printf("median of the rounds' ratios: %.2f×   (lowest %.2f×, highest %.2f×)\n", median(ratios), slices.Min(ratios), slices.Max(ratios))
	fmt.Printf("CPU an append: adk_database %.0f µs, kioku_rpc %.0f µs (server and client)\n", adk.cpuPerCall(), kio.cpuPerCall())
	fmt.Printf("pooled:  adk_database %8.0f   kioku_rpc %8.0f   (%.2f×)\n", a, k, k/a)
	if asJSON {
		out, err := json.Marshal(map[string]any{
			"adk_database_rps": round(a), "kioku_rpc_rps": round(k), "ratio": round(k / a),
			"median_round_ratio": round(median(ratios)), "min_round_ratio": round(slices.Min(ratios)), "max_round_ratio": round(slices.Max(ratios)),
			"adk_database_cpu_us": round(adk.cpuPerCall()), "kioku_rpc_cpu_us": round(kio.cpuPerCall()),
			"writers": writers, "rounds": rounds,
		})
		if err != nil {
			return err
		}
		fmt.Println(string(out))
	}
	return nil
}

// target is a service under measurement: its writers' append, where each
// writer's count of events has got to, and its totals over the counted
// slices.
type target struct {
	appendEvent func(ctx context.Context, w, i int) error
	next        []int                // each writer's next event number
	cpu         func() time.Duration // CPU time its appends spend, so far
	close       func()

	calls    int
	elapsed  time.Duration
	cpuSpent time.Duration
	counted  bool // the warm-up slice is done
}

// slice runs the target's writers for d and returns its appends a second;
// every slice but the first (the warm-up) counts in its totals.
func (t *target) slice(ctx context.Context, d time.Duration) (float64, error) {
	cpu := t.cpu()
	start := time.Now()
	n, err := throughput(ctx, t.next, d, t.appendEvent)
	if err != nil {
		return 0, err
	}
	took := time.Since(start)
	if t.counted {
		t.calls += n
		t.elapsed += took
		t.cpuSpent += t.cpu() - cpu
	}
	t.counted = true
	return float64(n) / took.Seconds(), nil
}

// pooled is the target's appends a second over all its counted slices.
func (t *target) pooled() float64 { return float64(t.calls) / t.elapsed.Seconds() }

// cpuPerCall is the CPU time an append cost over the counted slices, in
// microseconds.
func (t *target) cpuPerCall() float64 {
	return float64(t.cpuSpent) / float64(time.Microsecond) / float64(t.calls)
}

// newADK opens ADK's database session service on a fresh SQLite file,
// with a session for each writer.
func newADK(ctx context.Context, writers int) (*target, error) {
	dir, err := os.MkdirTemp("", "adk-bench-")
	if err != nil {
		return nil, err
	}
	conn, err := sql.Open(sqlite.DriverName, "file:"+filepath.Join(dir, "adk.db")+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	closeAll := func() {
		conn.Close()
		os.RemoveAll(dir)
	}
	conn.SetMaxOpenConns(1)
	svc, err := database.NewSessionService(&sqlite.Dialector{Conn: conn}, &gorm.Config{Logger: logger.Discard})
	if err == nil {
		err = database.AutoMigrate(svc)
	}
	if err != nil {
		closeAll()
		return nil, err
	}
	sessions := make([]session.Session, writers)
	for w := range writers {
		res, err := svc.Create(ctx, &session.CreateRequest{AppName: "bench", UserID: fmt.Sprint("u", w), SessionID: fmt.Sprint("s", w)})
		if err != nil {
			closeAll()
			return nil, err
		}
		sessions[w] = res.Session
	}
	return &target{
		appendEvent: func(ctx context.Context, w, i int) error {
			e := session.NewEvent(ctx, fmt.Sprint("i", i/2))
			e.Author = "user"
			e.Content = genai.NewContentFromText(text, genai.RoleUser)
			e.Actions.StateDelta["turn"] = float64(i)
			return svc.AppendEvent(ctx, sessions[w], e)
		},
		next:  make([]int, writers),
		cpu:   selfCPU,
		close: closeAll,
	}, nil
}

var listening = regexp.MustCompile(`kioku listening on (https?://\S+)`)

// newKioku starts a `kioku serve` of its own on a fresh data directory
// and creates a session for each writer, which append over RPC.
func newKioku(ctx context.Context, kioku string, writers int) (*target, error) {
	dir, err := os.MkdirTemp("", "kioku-bench-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(kioku, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir, "--log-level", "warn")
	stderr, err := cmd.StderrPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	closeAll := func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		os.RemoveAll(dir)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
				break
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	var url string
	select {
	case url = <-found:
	case <-time.After(30 * time.Second):
		closeAll()
		return nil, errors.New("kioku serve did not start listening within 30s")
	}
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	client := &http.Client{Transport: &http.Transport{Protocols: protocols}}
	sc := kiokuv1connect.NewSessionServiceClient(client, url)
	names := make([]string, writers)
	for w := range writers {
		res, err := sc.CreateSession(ctx, connect.NewRequest(&kiokuv1.CreateSessionRequest{Parent: fmt.Sprint("apps/bench/users/u", w), SessionId: fmt.Sprint("s", w)}))
		if err != nil {
			closeAll()
			return nil, err
		}
		names[w] = res.Msg.GetName()
	}
	pid := cmd.Process.Pid
	return &target{
		appendEvent: func(ctx context.Context, w, i int) error {
			_, err := sc.AppendEvent(ctx, connect.NewRequest(&kiokuv1.AppendEventRequest{Name: names[w], Event: &kiokuv1.Event{
				Id:           fmt.Sprint("e", i),
				InvocationId: fmt.Sprint("i", i/2),
				Author:       "user",
				Content:      &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: text}}},
				Actions:      &kiokuv1.EventActions{StateDelta: &structpb.Struct{Fields: map[string]*structpb.Value{"turn": structpb.NewNumberValue(float64(i))}}},
			}}))
			return err
		},
		next:  make([]int, writers),
		cpu:   func() time.Duration { return selfCPU() + processCPU(pid) },
		close: closeAll,
	}, nil
}

// selfCPU is the CPU time (user and system) this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processCPU is the CPU time (user and system) process pid has used, from
// /proc (Linux; 0 elsewhere), in clock ticks of 10 ms.
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command's name (which ends at the last ')'):
	// utime and stime are the 12th and 13th.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * 10 * time.Millisecond
}

// throughput runs fn from a goroutine for each writer for d, writer w's
// calls numbered from next[w] on (and next moved past them), and returns
// how many calls were made. The first error stops the run.
func throughput(ctx context.Context, next []int, d time.Duration, fn func(ctx context.Context, w, i int) error) (int, error) {
	var (
		mu    sync.Mutex
		calls int
		first error
		wg    sync.WaitGroup
	)
	deadline := time.Now().Add(d)
	for w := range next {
		wg.Go(func() {
			i := next[w]
			for ; time.Now().Before(deadline); i++ {
				if err := fn(ctx, w, i); err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
					break
				}
			}
			mu.Lock()
			calls += i - next[w]
			next[w] = i
			mu.Unlock()
		})
	}
	wg.Wait()
	return calls, first
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func round(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }
