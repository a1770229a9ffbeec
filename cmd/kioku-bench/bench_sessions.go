package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/cli"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/sqlitedb"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"google.golang.org/protobuf/types/known/structpb"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

const benchSessionsUsage = `Usage: kioku-bench sessions [--json] [--store sqlite|firestore] [--rate N,...] [--sender child|inline]

Starts kioku in-process on loopback with a fresh temporary store and
measures, in one run:

  noop_rps              health Check RPCs per second through the same server
                        stack (64 concurrent clients)
  noop_cpu_us           CPU time the process spent a Check, clients included
                        (in microseconds; hardly moved by other load)
  append_rps            durable AppendEvent RPCs per second (64 concurrent
                        clients, one session each), with append_p50_ms,
                        append_p99_ms and append_cpu_us (CPU time an append,
                        as noop_cpu_us)
  append_writes_per_commit  appends per group commit (one fsync) during that
                        phase (sqlite store only)
  append_unsynced_rps   the same appends on a second, fresh SQLite file whose
                        commits are not synced to disk (sqlite store only; a
                        setting kioku never serves with), to show what
                        durability costs
  open_<N>_p50_ms       with --rate N (appends a second; several, comma-
  open_<N>_p99_ms       separated, run one after another): the same appends
  open_<N>_max_ms       sent at a fixed arrival rate, each at its scheduled
  open_<N>_rps          time whether or not earlier ones have returned (an
  open_<N>_failed       open loop, 64 sessions in turn), their latencies
                        counted from the scheduled time (no coordinated
                        omission: a server or sender that falls behind
                        shows in them), the appends returned a second, and
                        how many failed (past the server's capacity, calls
                        run out of their deadline; a failed call counts the
                        time until it failed); sent by a child process
                        (--sender child, the default), so that the sender's
                        own goroutines do not share the server's runtime
  get_recent_100_ms     GetSession(num_recent_events=20) median latency on a
  get_recent_10000_ms   session of 100 and of 10,000 events
  list_page_ms          ListSessions first page of 100 among 10,000 sessions
                        of one user, median latency

With --store firestore it also counts the Firestore documents each call
reads, writes and deletes (the units Firestore bills; one call at a time,
over RPC; the server's background reads, a few a minute, may add a
fraction), and what an idle server reads per minute:

  create_session_reads, _writes
  append_reads, _writes          an event with a session-scoped state delta
  append_user_state_reads, _writes  an event that also writes a user: key
  get_session_20_reads           GetSession(num_recent_events=20)
  list_sessions_100_reads        ListSessions, a page of 100
  delete_session_reads, _writes, _deletes  a session of 20 events
  idle_per_minute_reads, _writes nothing asked for --idle (default 60s)

With --json the last line of output is one JSON object with those keys.

Flags:
`

func benchSessions(ctx context.Context, args []string) error {
	fs := cli.NewFlagSet("kioku-bench sessions", "KIOKU_", benchSessionsUsage)
	asJSON := fs.Bool("json", false, "print the results as one JSON object on the last line")
	store := fs.String("store", "sqlite", "store to measure: sqlite or firestore (firestore needs FIRESTORE_EMULATOR_HOST or --firestore-project)")
	project := fs.String("firestore-project", "", "Firestore project (--store firestore; with FIRESTORE_EMULATOR_HOST set, a fresh one by default)")
	duration := fs.Duration("duration", 4*time.Second, "how long each throughput phase runs")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the append phase to this file")
	longEvents := fs.Int("events", 10_000, "events of the long session (get_recent_<N>_ms)")
	listSessions := fs.Int("sessions", 10_000, "sessions of the listed user (list_page_ms)")
	idle := fs.Duration("idle", time.Minute, "how long the idle phase watches Firestore usage (--store firestore)")
	encrypted := fs.Bool("encrypted", false, "encrypt the sqlite store under a new master key, as serve --encryption-key-file does")
	rateList := fs.String("rate", "", "open-loop phases: appends a second, comma-separated (2000,5000); each runs for --duration")
	sender := fs.String("sender", "child", "where --rate's appends are sent from: child (a process of their own) or inline (this one, beside the server)")
	target := fs.String("target", "", "run only the open-loop phases (--rate), against the kioku serving h2c at this URL (no API keys); the sender process is this")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rates, err := parseRates(*rateList)
	if err != nil {
		return err
	}
	if *duration <= 0 {
		return fmt.Errorf("--duration is %v; it must be positive", *duration)
	}
	if *sender != "child" && *sender != "inline" {
		return fmt.Errorf("--sender %q: use child or inline", *sender)
	}
	const clients = 64
	if *target != "" {
		return benchOpenTarget(ctx, *target, rates, clients, *duration, *asJSON)
	}
	if *longEvents <= 100 {
		return fmt.Errorf("--events is %d; the long session must have more than the short one's 100 events", *longEvents)
	}
	if *listSessions < 1 {
		return fmt.Errorf("--sessions is %d; it must be at least 1", *listSessions)
	}
	if err := benchProject(*store, project); err != nil {
		return err
	}
	env, err := startBenchNode(ctx, *store, *project, benchEncryption(*encrypted))
	if err != nil {
		return err
	}
	defer env.close()

	r := &benchReport{}
	say := func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) }
	say("kioku-bench sessions: store %s (encrypted %v), %d clients, %v per throughput phase", *store, *encrypted, clients, *duration)

	// No-op RPCs through the same stack.
	health := grpchealth.NewClient(env.httpClient, env.url)
	cpu := cpuTime()
	noop, lat, err := measureThroughput(ctx, clients, *duration, func(ctx context.Context, _, _ int) error {
		_, err := health.Check(ctx, &grpchealth.CheckRequest{})
		return err
	})
	if err != nil {
		return fmt.Errorf("noop phase: %w", err)
	}
	r.set("noop_rps", noop)
	r.set("noop_cpu_us", cpuPerCall(cpu, float64(len(lat))))
	say("noop_rps            %10.0f   (%.0f µs of CPU a call)", noop, r.get("noop_cpu_us"))

	// Durable appends, one session per client.
	stopProfile, err := startCPUProfile(*cpuprofile)
	if err != nil {
		return err
	}
	var commitsBefore sqlitedb.Stats
	if env.node.SQLite != nil {
		commitsBefore = env.node.SQLite.Stats()
	}
	cpu = cpuTime()
	appendRPS, lat, err := env.measureAppends(ctx, clients, *duration)
	appendCPU := cpuPerCall(cpu, float64(len(lat)))
	stopProfile()
	if err != nil {
		return fmt.Errorf("append phase: %w", err)
	}
	if env.node.SQLite != nil {
		st := env.node.SQLite.Stats()
		if commits := st.Commits - commitsBefore.Commits; commits > 0 {
			r.set("append_writes_per_commit", float64(st.Writes-commitsBefore.Writes)/float64(commits))
		}
	}
	r.set("append_rps", appendRPS)
	r.set("append_p50_ms", ms(percentile(lat, 0.50)))
	r.set("append_p99_ms", ms(percentile(lat, 0.99)))
	r.set("append_cpu_us", appendCPU)
	say("append_rps          %10.0f   (%.2f of noop; %.0f µs of CPU an append)", appendRPS, appendRPS/noop, appendCPU)
	say("append_p50_ms       %10.2f", ms(percentile(lat, 0.50)))
	say("append_p99_ms       %10.2f", ms(percentile(lat, 0.99)))
	if w := r.get("append_writes_per_commit"); w > 0 {
		say("append_writes_per_commit %5.1f   (appends sharing one commit and fsync)", w)
	}

	// The same appends on a SQLite file whose commits are not synced: what
	// durability itself costs.
	if *store == "sqlite" {
		unsynced, err := startBenchNode(ctx, *store, "", benchEncryption(*encrypted), func(c *node.Config) { c.BenchUnsynced = true })
		if err != nil {
			return err
		}
		rps, _, err := unsynced.measureAppends(ctx, clients, *duration)
		unsynced.close()
		if err != nil {
			return fmt.Errorf("unsynced append phase: %w", err)
		}
		r.set("append_unsynced_rps", rps)
		say("append_unsynced_rps %10.0f   %s", rps, unsyncedNote(appendRPS, rps))
	}

	// Open loops: appends at fixed arrival rates.
	if err := openPhases(ctx, env, r, say, *sender, rates, clients, *duration); err != nil {
		return err
	}

	sc := env.sessions()
	// Reads of recent events on a short and a long session.
	for _, n := range []int{100, *longEvents} {
		key := sessiontype.Key{App: "bench", User: "reader", ID: fmt.Sprintf("long-%d", n)}
		if err := env.seedEvents(ctx, key, n); err != nil {
			return err
		}
		lat, err := measureLatency(ctx, 300, func(ctx context.Context) error {
			res, err := sc.GetSession(ctx, connect.NewRequest(&kiokuv1.GetSessionRequest{Name: key.Name(), NumRecentEvents: 20}))
			if err == nil && len(res.Msg.GetEvents()) != 20 {
				err = fmt.Errorf("GetSession returned %d events, want 20", len(res.Msg.GetEvents()))
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("get_recent on %d events: %w", n, err)
		}
		name := fmt.Sprintf("get_recent_%d_ms", n)
		r.set(name, ms(percentile(lat, 0.5)))
		say("%-19s %10.3f", name, ms(percentile(lat, 0.5)))
	}
	say("get_recent ratio    %10.2f   (%d / 100 events)", r.get(fmt.Sprintf("get_recent_%d_ms", *longEvents))/r.get("get_recent_100_ms"), *longEvents)

	// Listing among many sessions.
	if err := env.seedSessions(ctx, "bench", "lister", *listSessions); err != nil {
		return err
	}
	lat, err = measureLatency(ctx, 200, func(ctx context.Context) error {
		res, err := sc.ListSessions(ctx, connect.NewRequest(&kiokuv1.ListSessionsRequest{Parent: "apps/bench/users/lister", PageSize: 100}))
		if want := min(100, *listSessions); err == nil && len(res.Msg.GetSessions()) != want {
			err = fmt.Errorf("ListSessions returned %d sessions, want %d", len(res.Msg.GetSessions()), want)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("list phase: %w", err)
	}
	r.set("list_page_ms", ms(percentile(lat, 0.5)))
	say("list_page_ms        %10.3f", ms(percentile(lat, 0.5)))

	if *store == "firestore" {
		if err := env.sessionCosts(ctx, r, say, *idle); err != nil {
			return fmt.Errorf("cost phase: %w", err)
		}
	}
	if *asJSON {
		return r.printJSON(stdout)
	}
	return nil
}

// measureAppends runs AppendEvent from clients goroutines, each on a session
// of its own, for d, and returns the appends per second and their
// latencies.
func (e *benchEnv) measureAppends(ctx context.Context, clients int, d time.Duration) (float64, []time.Duration, error) {
	sc := e.sessions()
	names, err := createBenchSessions(ctx, sc, "append", clients)
	if err != nil {
		return 0, nil, err
	}
	return measureThroughput(ctx, clients, d, func(ctx context.Context, c, i int) error {
		return benchAppend(ctx, sc, names[c], i)
	})
}

// measureOpenAppends sends AppendEvent at rate appends a second for d, to
// sessions sessions (ids phase-N) in turn (measureOpenLoop).
func (e *benchEnv) measureOpenAppends(ctx context.Context, phase string, sessions int, rate float64, d time.Duration) (*openLoop, error) {
	sc := e.sessions()
	names, err := createBenchSessions(ctx, sc, phase, sessions)
	if err != nil {
		return nil, err
	}
	// The senders share openConns connections of their own, so that no
	// connection carries more streams than a server allows on one.
	const openConns = openSenders / 128
	var clients [openConns]kiokuv1connect.SessionServiceClient
	for c := range clients {
		hc := &http.Client{Transport: benchTransport()}
		defer hc.CloseIdleConnections()
		clients[c] = kiokuv1connect.NewSessionServiceClient(hc, e.url)
	}
	return measureOpenLoop(ctx, rate, d, func(ctx context.Context, sender, i int) error {
		return benchAppend(ctx, clients[sender%openConns], names[i%sessions], i)
	})
}

// createBenchSessions creates n sessions, each of a user of its own, with
// ids prefix-0 to prefix-(n-1), and returns their names.
func createBenchSessions(ctx context.Context, sc kiokuv1connect.SessionServiceClient, prefix string, n int) ([]string, error) {
	names := make([]string, n)
	for c := range n {
		res, err := sc.CreateSession(ctx, connect.NewRequest(&kiokuv1.CreateSessionRequest{
			Parent: "apps/bench/users/u" + fmt.Sprint(c), SessionId: fmt.Sprintf("%s-%d", prefix, c),
		}))
		if err != nil {
			return nil, err
		}
		names[c] = res.Msg.GetName()
	}
	return names, nil
}

// benchAppend appends the benchmark's event number i to a session: a short
// text with a session-scoped state delta.
func benchAppend(ctx context.Context, sc kiokuv1connect.SessionServiceClient, name string, i int) error {
	_, err := sc.AppendEvent(ctx, connect.NewRequest(&kiokuv1.AppendEventRequest{
		Name: name,
		Event: &kiokuv1.Event{
			Id:           fmt.Sprintf("e%d", i),
			InvocationId: fmt.Sprintf("i%d", i/2),
			Author:       "user",
			Content:      &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: "I would like a cup of green tea, please."}}},
			Actions:      &kiokuv1.EventActions{StateDelta: benchDelta(i)},
		},
	}))
	return err
}

// parseRates parses --rate: appends a second, comma-separated.
func parseRates(list string) ([]int, error) {
	var rates []int
	for f := range strings.SplitSeq(list, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 1_000_000 {
			return nil, fmt.Errorf("--rate %q: want appends a second between 1 and 1000000, comma-separated", list)
		}
		rates = append(rates, n)
	}
	return rates, nil
}

// benchDelta is the state delta of a benchmark event: a session-scoped
// turn counter, the most common kind of state an agent writes per turn.
func benchDelta(i int) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		"turn": structpb.NewNumberValue(float64(i)),
	}}
}

// seedEvents appends n events to a new session through the service (not
// the RPC), 64 at a time.
func (e *benchEnv) seedEvents(ctx context.Context, key sessiontype.Key, n int) error {
	if _, err := e.node.Sessions.CreateSession(ctx, sessions.CreateSessionRequest{App: key.App, User: key.User, ID: key.ID}); err != nil {
		return err
	}
	return parallel(ctx, 64, n, func(ctx context.Context, i int) error {
		_, err := e.node.Sessions.AppendEvent(ctx, key, &sessiontype.Event{
			ID:      fmt.Sprint("e", i),
			Author:  "user",
			Content: &sessiontype.Content{Role: "user", Parts: []sessiontype.Part{{Text: "a message of moderate length, like people write to an agent"}}},
		}, nil)
		return err
	})
}

// seedSessions creates n sessions of one user.
func (e *benchEnv) seedSessions(ctx context.Context, app, user string, n int) error {
	return parallel(ctx, 64, n, func(ctx context.Context, i int) error {
		_, err := e.node.Sessions.CreateSession(ctx, sessions.CreateSessionRequest{App: app, User: user, ID: fmt.Sprintf("%s-%d", user, i), DisplayName: "chat"})
		return err
	})
}

// parallel runs fn(i) for i in [0, n) on workers goroutines.
func parallel(ctx context.Context, workers, n int, fn func(ctx context.Context, i int) error) error {
	var (
		mu   sync.Mutex
		next int
		errs []error
		wg   sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				if err := fn(ctx, i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// unsyncedNote compares durable appends with unsynced ones. Durable appends
// do the same work and more, so a ratio above 1 means the machine's load
// changed between the phases, and the note says the run cannot be trusted.
func unsyncedNote(durable, unsynced float64) string {
	ratio := durable / unsynced
	if ratio > 1 {
		return fmt.Sprintf("(durable appends ran at %.2f of this: above 1, the run was too noisy to compare; run it again on a quieter machine or with a longer --duration)", ratio)
	}
	return fmt.Sprintf("(durable appends run at %.2f of this)", ratio)
}

// sessionCosts counts the Firestore documents of each kind of session
// call, one call at a time, and of an idle server.
func (e *benchEnv) sessionCosts(ctx context.Context, r *benchReport, say func(string, ...any), idle time.Duration) error {
	sc := e.sessions()
	const parent = "apps/bench/users/cost"
	name := func(i int) string { return fmt.Sprintf("%s/sessions/cost-%d", parent, i) }
	event := func(i int, delta *structpb.Struct) *kiokuv1.Event {
		return &kiokuv1.Event{Id: fmt.Sprint("e", i), Author: "user", Actions: &kiokuv1.EventActions{StateDelta: delta},
			Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: "I would like a cup of green tea, please."}}}}
	}
	for _, p := range []struct {
		name string
		n    int
		call func(ctx context.Context, i int) error
	}{
		{"create_session", 10, func(ctx context.Context, i int) error {
			_, err := sc.CreateSession(ctx, connect.NewRequest(&kiokuv1.CreateSessionRequest{Parent: parent, SessionId: fmt.Sprint("cost-", i)}))
			return err
		}},
		{"append", 20, func(ctx context.Context, i int) error {
			_, err := sc.AppendEvent(ctx, connect.NewRequest(&kiokuv1.AppendEventRequest{Name: name(0), Event: event(i, benchDelta(i))}))
			return err
		}},
		{"append_user_state", 10, func(ctx context.Context, i int) error {
			delta := &structpb.Struct{Fields: map[string]*structpb.Value{"user:last_drink": structpb.NewStringValue(fmt.Sprint("tea ", i))}}
			_, err := sc.AppendEvent(ctx, connect.NewRequest(&kiokuv1.AppendEventRequest{Name: name(1), Event: event(i, delta)}))
			return err
		}},
		{"get_session_20", 10, func(ctx context.Context, _ int) error {
			_, err := sc.GetSession(ctx, connect.NewRequest(&kiokuv1.GetSessionRequest{Name: name(0), NumRecentEvents: 20}))
			return err
		}},
		{"list_sessions_100", 5, func(ctx context.Context, _ int) error {
			_, err := sc.ListSessions(ctx, connect.NewRequest(&kiokuv1.ListSessionsRequest{Parent: "apps/bench/users/lister", PageSize: 100}))
			return err
		}},
		{"delete_session", 1, func(ctx context.Context, _ int) error {
			_, err := sc.DeleteSession(ctx, connect.NewRequest(&kiokuv1.DeleteSessionRequest{Name: name(0)}))
			return err
		}},
	} {
		per, err := e.storeUsage(ctx, p.n, p.call)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		reportUsage(r, say, p.name, per)
	}
	per, err := e.idleUsage(ctx, idle)
	if err != nil {
		return err
	}
	reportUsage(r, say, "idle_per_minute", per)
	return nil
}

// benchProject checks the store flag and, on the emulator, picks a fresh
// project when none is given.
func benchProject(store string, project *string) error {
	switch {
	case store != "sqlite" && store != "firestore":
		return fmt.Errorf("--store %q: use sqlite or firestore", store)
	case store == "firestore" && *project == "":
		if os.Getenv("FIRESTORE_EMULATOR_HOST") == "" {
			return fmt.Errorf("--store firestore needs FIRESTORE_EMULATOR_HOST (the emulator) or --firestore-project")
		}
		*project = "bench-" + aip.NewID()
	}
	return nil
}
