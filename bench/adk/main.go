// Command adk compares, in one run, the durable appends of kioku over RPC
// with those of ADK-Go's own database session service
// (google.golang.org/adk/v2/session/database: GORM over SQLite, WAL,
// synchronous=FULL), each with the same number of concurrent writers, a
// session each, appending the same event: a short text with a
// session-scoped state delta.
//
//	cd bench/adk && go run . [--duration 4s] [--rounds 3] [--writers 64] [--json]
//
// ADK's service runs in this process, as an agent embeds it, on one
// database/sql connection (SQLite has one writer at a time; with more
// connections GORM's transactions fail with SQLITE_BUSY instead of
// waiting) and at Go's default GOGC. kioku runs as a `kioku serve` of
// its own (built from this repository, or --kioku), with its defaults, on
// a fresh data directory each round; this process's writers call its
// AppendEvent over Connect on HTTP/2 (h2c) on loopback, as `kioku bench
// sessions` does.
//
// It alternates rounds (ADK, then kioku, --rounds times) so that a drift
// in the machine's speed touches both, and prints each round's appends a
// second, the medians and their ratio; with --json the last line is one
// JSON object with them. It is a module of its own so that GORM and ADK's
// database service stay out of kioku's go.mod (and because their SQLite
// driver and kioku's register the same database/sql name).
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

// text is the benchmark event's text, as kioku bench sessions sends it.
const text = "I would like a cup of green tea, please."

func main() {
	duration := flag.Duration("duration", 4*time.Second, "how long each round runs")
	rounds := flag.Int("rounds", 3, "rounds of each service, alternating")
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
	fmt.Printf("appends a second, %d writers, %v a round, GOMAXPROCS %d\n", writers, d, runtime.GOMAXPROCS(0))
	var adkRates, kiokuRates []float64
	for r := range rounds {
		a, err := adkRound(ctx, d, writers)
		if err != nil {
			return fmt.Errorf("ADK round %d: %w", r+1, err)
		}
		k, err := kiokuRound(ctx, kioku, d, writers)
		if err != nil {
			return fmt.Errorf("kioku round %d: %w", r+1, err)
		}
		adkRates, kiokuRates = append(adkRates, a), append(kiokuRates, k)
		fmt.Printf("round %d: adk_database %8.0f   kioku_rpc %8.0f   (%.2f×)\n", r+1, a, k, k/a)
	}
	a, k := median(adkRates), median(kiokuRates)
	fmt.Printf("median:  adk_database %8.0f   kioku_rpc %8.0f   (%.2f×)\n", a, k, k/a)
	if asJSON {
		out, err := json.Marshal(map[string]any{"adk_database_rps": round(a), "kioku_rpc_rps": round(k), "ratio": round(k / a), "writers": writers})
		if err != nil {
			return err
		}
		fmt.Println(string(out))
	}
	return nil
}

// adkRound measures ADK's database session service on a fresh SQLite file.
func adkRound(ctx context.Context, d time.Duration, writers int) (float64, error) {
	dir, err := os.MkdirTemp("", "adk-bench-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	conn, err := sql.Open(sqlite.DriverName, "file:"+filepath.Join(dir, "adk.db")+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)")
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	conn.SetMaxOpenConns(1)
	svc, err := database.NewSessionService(&sqlite.Dialector{Conn: conn}, &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return 0, err
	}
	if err := database.AutoMigrate(svc); err != nil {
		return 0, err
	}
	sessions := make([]session.Session, writers)
	for w := range writers {
		res, err := svc.Create(ctx, &session.CreateRequest{AppName: "bench", UserID: fmt.Sprint("u", w), SessionID: fmt.Sprint("s", w)})
		if err != nil {
			return 0, err
		}
		sessions[w] = res.Session
	}
	return throughput(ctx, writers, d, func(ctx context.Context, w, i int) error {
		e := session.NewEvent(ctx, fmt.Sprint("i", i/2))
		e.Author = "user"
		e.Content = genai.NewContentFromText(text, genai.RoleUser)
		e.Actions.StateDelta["turn"] = float64(i)
		return svc.AppendEvent(ctx, sessions[w], e)
	})
}

var listening = regexp.MustCompile(`kioku listening on (https?://\S+)`)

// kiokuRound measures kioku's AppendEvent over RPC on a `kioku serve` of
// its own, on a fresh data directory.
func kiokuRound(ctx context.Context, kioku string, d time.Duration, writers int) (float64, error) {
	dir, err := os.MkdirTemp("", "kioku-bench-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	cmd := exec.Command(kioku, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir, "--log-level", "warn")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
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
		return 0, errors.New("kioku serve did not start listening within 30s")
	}
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	client := &http.Client{Transport: &http.Transport{Protocols: protocols}}
	sc := kiokuv1connect.NewSessionServiceClient(client, url)
	names := make([]string, writers)
	for w := range writers {
		res, err := sc.CreateSession(ctx, connect.NewRequest(&kiokuv1.CreateSessionRequest{Parent: fmt.Sprint("apps/bench/users/u", w), SessionId: fmt.Sprint("s", w)}))
		if err != nil {
			return 0, err
		}
		names[w] = res.Msg.GetName()
	}
	return throughput(ctx, writers, d, func(ctx context.Context, w, i int) error {
		_, err := sc.AppendEvent(ctx, connect.NewRequest(&kiokuv1.AppendEventRequest{Name: names[w], Event: &kiokuv1.Event{
			Id:           fmt.Sprint("e", i),
			InvocationId: fmt.Sprint("i", i/2),
			Author:       "user",
			Content:      &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: text}}},
			Actions:      &kiokuv1.EventActions{StateDelta: &structpb.Struct{Fields: map[string]*structpb.Value{"turn": structpb.NewNumberValue(float64(i))}}},
		}}))
		return err
	})
}

// throughput runs fn from writers goroutines for d and returns the calls a
// second. The first error stops the run.
func throughput(ctx context.Context, writers int, d time.Duration, fn func(ctx context.Context, w, i int) error) (float64, error) {
	var (
		mu    sync.Mutex
		calls int
		first error
		wg    sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for w := range writers {
		wg.Go(func() {
			n := 0
			for ; time.Now().Before(deadline); n++ {
				if err := fn(ctx, w, n); err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
					break
				}
			}
			mu.Lock()
			calls += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if first != nil {
		return 0, first
	}
	return float64(calls) / time.Since(start).Seconds(), nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func round(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }
