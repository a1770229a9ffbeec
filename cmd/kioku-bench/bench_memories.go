package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/cli"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/scripted"
	"google.golang.org/protobuf/types/known/durationpb"
)

const benchMemoriesUsage = `Usage: kioku-bench memories [--json] [--store sqlite|firestore]

Starts kioku in-process on loopback with a fresh temporary store, the
offline embedder, and a zero-latency fake Gemini endpoint (an HTTP server
speaking generateContent, behind the real genai client), and measures:

  retrieve_1000_p50_ms    RetrieveMemories (similarity, top_k 10) over RPC in
  retrieve_1000_p95_ms    a scope of 1,000 memories, and of 10,000
  retrieve_10000_p50_ms
  retrieve_10000_p95_ms
  generate_ops_per_s      GenerateMemories operations completed per second
                          (queued over RPC, each from two inline events in
                          its own scope that holds one similar memory, so
                          that both extraction and consolidation run)
  model_calls_per_op      generation calls to the model per operation
  model_calls_in_flight_max  the most generation calls the model had at once

--model-latency makes the fake model answer each call after that time, as
a real one would; --sizes 0 measures generation only.

With --store firestore (the emulator; scopes of 100 and 1,000 and 100
operations by default) it also counts the Firestore documents each call
reads, writes and deletes, one call at a time, over RPC:

  create_memory_reads, _writes      CreateMemory
  retrieve_<N>_reads                RetrieveMemories (similarity, top_k 10)
                                    in the scope of N memories
  generate_reads, _writes           GenerateMemories from two inline events
                                    with consolidation against one memory,
                                    run by the worker, and one
                                    WaitOperation for its result
  generate_session_40_reads, _writes  the same from a session of 40 events
                                    (a day of 20 turns)

With --json the last line of output is one JSON object with those keys.

Flags:
`

// vocabulary for synthetic facts.
var benchWords = strings.Fields(`tea coffee hiking tennis piano guitar Kyoto Osaka Lisbon Paris nurse teacher
engineer painter cat dog rabbit garden tomatoes roses novel poetry jazz opera sushi ramen curry pasta
bicycle train marathon yoga chess football swimming camping sister brother daughter son grandmother
birthday wedding holiday vacation allergy peanuts gluten vegetarian morning evening weekend Monday
Friday winter summer mountains ocean river lake forest museum library cinema theatre concert festival`)

func syntheticFact(r *rand.Rand) string {
	pick := func() string { return benchWords[r.IntN(len(benchWords))] }
	templates := []string{
		"The user likes %s and %s on the %s.",
		"The user's %s lives near the %s in %s.",
		"The user plans a %s trip to %s with their %s.",
		"The user works as a %s and enjoys %s after %s.",
		"The user is learning %s and %s this %s.",
	}
	return fmt.Sprintf(templates[r.IntN(len(templates))], pick(), pick(), pick())
}

func benchMemories(ctx context.Context, args []string) error {
	fs := cli.NewFlagSet("kioku-bench memories", "KIOKU_", benchMemoriesUsage)
	asJSON := fs.Bool("json", false, "print the results as one JSON object on the last line")
	ops := fs.Int("ops", 0, "GenerateMemories operations to run (default 1000; 100 on Firestore)")
	workers := fs.Int("workers", jobs.DefaultWorkers, "memory operations run at once at most (kioku serve's --workers)")
	latency := fs.Duration("model-latency", 0, "time the fake model takes to answer each generation call")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the generation phase to this file")
	sizesFlag := fs.String("sizes", "", "scope sizes to measure retrieval in (default 1000,10000; 100,1000 on Firestore; 0: no retrieval phase)")
	store := fs.String("store", "sqlite", "store to measure: sqlite or firestore (firestore needs FIRESTORE_EMULATOR_HOST or --firestore-project)")
	encrypted := fs.Bool("encrypted", false, "encrypt the sqlite store under a new master key, as serve --encryption-key-file does")
	project := fs.String("firestore-project", "", "Firestore project (--store firestore; with FIRESTORE_EMULATOR_HOST set, a fresh one by default)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *ops == 0 {
		*ops = map[bool]int{false: 1000, true: 100}[*store == "firestore"]
	}
	if *sizesFlag == "" {
		*sizesFlag = map[bool]string{false: "1000,10000", true: "100,1000"}[*store == "firestore"]
	}
	if err := benchProject(*store, project); err != nil {
		return err
	}
	var modelCalls, inFlight, maxInFlight atomic.Int64
	fakeURL, stopFake, err := scripted.Serve(&scripted.Gemini{Respond: func(c scripted.Call) (scripted.Reply, error) {
		modelCalls.Add(1)
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
		}
		time.Sleep(*latency)
		if strings.Contains(c.System, "New\nfacts") || strings.Contains(c.Text(), "Existing memories:") {
			return scripted.Reply{Text: `{"actions":[{"candidate":1,"action":"CREATE","memory":0,"fact":"The user now plays the cello on Sundays."}]}`}, nil
		}
		return scripted.Reply{Text: `{"facts":[{"fact":"The user plays the cello on Sundays.","topic":"USER_PREFERENCES","events":[1,2]}]}`}, nil
	}})
	if err != nil {
		return err
	}
	defer stopFake()
	env, err := startBenchNode(ctx, *store, *project, benchEncryption(*encrypted), func(c *node.Config) {
		c.Models = model.Config{Provider: "gemini", GeminiAPIKey: "bench", GeminiBaseURL: fakeURL}
		c.Workers = *workers
	})
	if err != nil {
		return err
	}
	defer env.close()
	r := &benchReport{}
	say := func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) }
	say("kioku-bench memories: store %s (encrypted %v), embedder %s, up to %d workers, model latency %v", *store, *encrypted, env.node.Memories.EmbedderName(), *workers, *latency)
	mc := env.memories()
	oc := env.operations()
	rng := rand.New(rand.NewPCG(1, 2))

	var sizes []int
	for _, f := range strings.Split(*sizesFlag, ",") {
		if *sizesFlag == "0" {
			break
		}
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 10 {
			return fmt.Errorf("--sizes %q: want numbers of at least 10", *sizesFlag)
		}
		sizes = append(sizes, n)
	}

	// Retrieval latency in scopes of 1,000 and 10,000 memories.
	for _, n := range sizes {
		scope := memorytype.Scope{"user_id": fmt.Sprint("retrieve-", n)}
		facts := make([]string, n)
		for i := range facts {
			facts[i] = syntheticFact(rng)
		}
		if err := parallel(ctx, 16, n, func(ctx context.Context, i int) error {
			_, err := env.node.Memories.CreateMemory(ctx, "bench", memorybank.MemoryInput{Fact: facts[i], Scope: scope})
			return err
		}); err != nil {
			return err
		}
		lat, err := measureLatency(ctx, 300, func(ctx context.Context) error {
			res, err := mc.RetrieveMemories(ctx, connect.NewRequest(&kiokuv1.RetrieveMemoriesRequest{
				Parent: "apps/bench", Scope: scope,
				Method: &kiokuv1.RetrieveMemoriesRequest_SimilaritySearch{SimilaritySearch: &kiokuv1.SimilaritySearch{Query: syntheticFact(rng), TopK: 10}},
			}))
			if err == nil && len(res.Msg.GetRetrievedMemories()) != 10 {
				err = fmt.Errorf("retrieved %d memories, want 10", len(res.Msg.GetRetrievedMemories()))
			}
			return err
		})
		if err != nil {
			return err
		}
		p50, p95 := ms(percentile(lat, 0.5)), ms(percentile(lat, 0.95))
		r.set(fmt.Sprintf("retrieve_%d_p50_ms", n), p50)
		r.set(fmt.Sprintf("retrieve_%d_p95_ms", n), p95)
		say("retrieve %6d memories   p50 %6.2f ms   p95 %6.2f ms", n, p50, p95)
		per, err := env.storeUsage(ctx, 10, func(ctx context.Context, _ int) error {
			_, err := mc.RetrieveMemories(ctx, connect.NewRequest(&kiokuv1.RetrieveMemoriesRequest{
				Parent: "apps/bench", Scope: scope,
				Method: &kiokuv1.RetrieveMemoriesRequest_SimilaritySearch{SimilaritySearch: &kiokuv1.SimilaritySearch{Query: syntheticFact(rng), TopK: 10}},
			}))
			return err
		})
		if err != nil {
			return err
		}
		if *store == "firestore" {
			reportUsage(r, say, fmt.Sprintf("retrieve_%d", n), per)
		}
	}

	// Generation throughput: each operation's scope holds one memory so
	// that consolidation has something to compare with.
	if err := parallel(ctx, 16, *ops, func(ctx context.Context, i int) error {
		_, err := env.node.Memories.CreateMemory(ctx, "bench", memorybank.MemoryInput{Fact: "The user plays the cello.", Scope: memorytype.Scope{"user_id": fmt.Sprint("gen-", i)}})
		return err
	}); err != nil {
		return err
	}
	modelCalls.Store(0)
	maxInFlight.Store(0)
	names := make([]string, *ops)
	stopProfile, err := startCPUProfile(*cpuprofile)
	if err != nil {
		return err
	}
	defer stopProfile()
	start := time.Now()
	if err := parallel(ctx, 16, *ops, func(ctx context.Context, i int) error {
		res, err := mc.GenerateMemories(ctx, connect.NewRequest(&kiokuv1.GenerateMemoriesRequest{
			Parent: "apps/bench", Scope: map[string]string{"user_id": fmt.Sprint("gen-", i)},
			Source: &kiokuv1.GenerateMemoriesRequest_EventsSource{EventsSource: &kiokuv1.EventsSource{Events: []*kiokuv1.Event{
				{Author: "user", Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: "I started playing the cello."}}}},
				{Author: "user", Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: "I practise every Sunday."}}}},
			}}},
		}))
		if err == nil {
			names[i] = res.Msg.GetName()
		}
		return err
	}); err != nil {
		return err
	}
	var failed atomic.Int64
	if err := parallel(ctx, 16, *ops, func(ctx context.Context, i int) error {
		res, err := oc.WaitOperation(ctx, connect.NewRequest(&kiokuv1.WaitOperationRequest{Name: names[i], Timeout: durationpb.New(5 * time.Minute)}))
		if err != nil {
			return err
		}
		if !res.Msg.GetDone() || res.Msg.GetError() != nil {
			failed.Add(1)
		}
		return nil
	}); err != nil {
		return err
	}
	elapsed := time.Since(start)
	if failed.Load() > 0 {
		return fmt.Errorf("%d of %d operations did not succeed", failed.Load(), *ops)
	}
	opsPerS := float64(*ops) / elapsed.Seconds()
	perOp := float64(modelCalls.Load()) / float64(*ops)
	r.set("generate_ops_per_s", opsPerS)
	r.set("model_calls_per_op", perOp)
	r.set("model_calls_in_flight_max", float64(maxInFlight.Load()))
	say("generate              %8.0f operations/s (%d in %v)", opsPerS, *ops, elapsed.Round(time.Millisecond))
	say("model calls/operation %8.2f", perOp)
	say("model calls in flight %8d at most", maxInFlight.Load())
	if *store == "firestore" {
		if err := env.memoryCosts(ctx, r, say); err != nil {
			return fmt.Errorf("cost phase: %w", err)
		}
	}
	if *asJSON {
		return r.printJSON(stdout)
	}
	return nil
}

// memoryCosts counts the Firestore documents of creating memories and of
// generations, one call at a time.
func (e *benchEnv) memoryCosts(ctx context.Context, r *benchReport, say func(string, ...any)) error {
	mc := e.memories()
	oc := e.operations()
	sc := e.sessions()
	generate := func(ctx context.Context, req *kiokuv1.GenerateMemoriesRequest) error {
		res, err := mc.GenerateMemories(ctx, connect.NewRequest(req))
		if err != nil {
			return err
		}
		done, err := oc.WaitOperation(ctx, connect.NewRequest(&kiokuv1.WaitOperationRequest{Name: res.Msg.GetName(), Timeout: durationpb.New(time.Minute)}))
		if err == nil && (!done.Msg.GetDone() || done.Msg.GetError() != nil) {
			err = fmt.Errorf("operation %s: done %v, error %v", res.Msg.GetName(), done.Msg.GetDone(), done.Msg.GetError())
		}
		return err
	}
	const sessionEvents, calls = 40, 5
	for i := range calls {
		parent := fmt.Sprintf("apps/bench/users/cost-%d", i)
		if _, err := sc.CreateSession(ctx, connect.NewRequest(&kiokuv1.CreateSessionRequest{Parent: parent, SessionId: fmt.Sprint("cost-", i)})); err != nil {
			return err
		}
		for j := range sessionEvents {
			if _, err := sc.AppendEvent(ctx, connect.NewRequest(&kiokuv1.AppendEventRequest{Name: fmt.Sprintf("%s/sessions/cost-%d", parent, i), Event: &kiokuv1.Event{
				Author: "user", Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: fmt.Sprintf("Message %d: I started playing the cello.", j)}}},
			}})); err != nil {
				return err
			}
		}
	}
	for _, p := range []struct {
		name string
		call func(ctx context.Context, i int) error
	}{
		{"create_memory", func(ctx context.Context, i int) error {
			_, err := mc.CreateMemory(ctx, connect.NewRequest(&kiokuv1.CreateMemoryRequest{Parent: "apps/bench",
				Memory: &kiokuv1.Memory{Fact: "The user plays the cello.", Scope: map[string]string{"user_id": fmt.Sprint("cost-", i)}}}))
			return err
		}},
		{"generate", func(ctx context.Context, i int) error {
			return generate(ctx, &kiokuv1.GenerateMemoriesRequest{
				Parent: "apps/bench", Scope: map[string]string{"user_id": fmt.Sprint("cost-", i)},
				Source: &kiokuv1.GenerateMemoriesRequest_EventsSource{EventsSource: &kiokuv1.EventsSource{Events: []*kiokuv1.Event{
					{Author: "user", Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: "I started playing the cello."}}}},
					{Author: "user", Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: "I practise every Sunday."}}}},
				}}},
			})
		}},
		{fmt.Sprintf("generate_session_%d", sessionEvents), func(ctx context.Context, i int) error {
			return generate(ctx, &kiokuv1.GenerateMemoriesRequest{Parent: "apps/bench",
				Source: &kiokuv1.GenerateMemoriesRequest_SessionSource{SessionSource: &kiokuv1.SessionSource{Session: fmt.Sprintf("apps/bench/users/cost-%d/sessions/cost-%d", i, i)}}})
		}},
	} {
		per, err := e.storeUsage(ctx, calls, p.call)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		reportUsage(r, say, p.name, per)
	}
	return nil
}
