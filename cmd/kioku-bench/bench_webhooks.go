package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/cli"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/model"
)

const benchWebhooksUsage = `Usage: kioku-bench webhooks [--json] [--store sqlite|firestore]

Starts kioku in-process on loopback with a fresh temporary store and a
fake Gemini endpoint, and runs the same load twice, in two apps of one
server: first with no webhook, then with a webhook whose receiver accepts
the connection and never answers (every attempt waits out its 10 s
timeout, 8 in flight). The load: --ops GenerateMemories operations (16
callers, each operation in its own scope), and meanwhile one caller
appending events to a session, one call after another. For each app:

  <app>_generate_s       time from the first GenerateMemories to the last
                         operation done
  <app>_append_p50_ms    AppendEvent latency over RPC during the generations
  <app>_append_p99_ms
  <app>_appends          appends measured

with <app> none or hang, and hang_requests, the requests the hanging
receiver took and never answered (at least one: the dispatcher was busy
with it).

With --json the last line of output is one JSON object with those keys.

Flags:
`

func benchWebhooks(ctx context.Context, args []string) error {
	fs := cli.NewFlagSet("kioku-bench webhooks", "KIOKU_", benchWebhooksUsage)
	asJSON := fs.Bool("json", false, "print the results as one JSON object on the last line")
	ops := fs.Int("ops", 0, "GenerateMemories operations of each app (default 500; 100 on Firestore)")
	latency := fs.Duration("model-latency", 0, "time the fake model takes to answer each generation call")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the hanging receiver's phase to this file")
	store := fs.String("store", "sqlite", "store to measure: sqlite or firestore (firestore needs FIRESTORE_EMULATOR_HOST or --firestore-project)")
	project := fs.String("firestore-project", "", "Firestore project (--store firestore; with FIRESTORE_EMULATOR_HOST set, a fresh one by default)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *ops == 0 {
		*ops = map[bool]int{false: 500, true: 100}[*store == "firestore"]
	}
	if err := benchProject(*store, project); err != nil {
		return err
	}
	fakeURL, stopFake, err := serveCelloGemini(*latency)
	if err != nil {
		return err
	}
	defer stopFake()
	// The hanging receiver: it accepts, reads what comes, and never
	// answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	var held atomic.Int64
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				buf := make([]byte, 4096)
				for {
					n, err := conn.Read(buf)
					if err != nil {
						return
					}
					held.Add(int64(strings.Count(string(buf[:n]), "POST ")))
				}
			}()
		}
	}()
	env, err := startBenchNode(ctx, *store, *project, func(c *node.Config) {
		c.Models = model.Config{Provider: "gemini", GeminiAPIKey: "bench", GeminiBaseURL: fakeURL}
		c.Workers = jobs.DefaultWorkers
		c.WebhooksAllowLoopbackHTTP = true
	})
	if err != nil {
		return err
	}
	defer env.close()
	say := func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) }
	say("kioku-bench webhooks: store %s, %d operations an app, model latency %v, receiver at %s never answers", *store, *ops, *latency, ln.Addr())
	mc := env.memories()
	oc := env.operations()
	sc := env.sessions()
	r := &benchReport{}
	say("%-6s %12s %14s %14s %8s", "app", "generate s", "append p50 ms", "append p99 ms", "appends")
	for _, app := range []string{"none", "hang"} {
		if app == "hang" {
			if _, err := mc.UpdateMemoryBankConfig(ctx, connect.NewRequest(&kiokuv1.UpdateMemoryBankConfigRequest{
				MemoryBankConfig: &kiokuv1.MemoryBankConfig{Name: "apps/hang/memoryBankConfig", Webhooks: []*kiokuv1.Webhook{{
					Url: "http://" + ln.Addr().String() + "/hook", Events: []string{"memory.created", "memory.updated", "memory.deleted", "operation.done"},
				}}},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"webhooks"}},
			})); err != nil {
				return err
			}
			stop, err := startCPUProfile(*cpuprofile)
			if err != nil {
				return err
			}
			defer stop()
		}
		if _, err := sc.CreateSession(ctx, connect.NewRequest(&kiokuv1.CreateSessionRequest{Parent: "apps/" + app + "/users/appender", SessionId: "s"})); err != nil {
			return err
		}
		// The appender, until the generations are done.
		actx, stopAppends := context.WithCancel(ctx)
		var (
			lats    []time.Duration
			appErr  error
			appends sync.WaitGroup
		)
		appends.Go(func() {
			for i := 0; actx.Err() == nil; i++ {
				t0 := time.Now()
				_, err := sc.AppendEvent(actx, connect.NewRequest(&kiokuv1.AppendEventRequest{Name: "apps/" + app + "/users/appender/sessions/s", Event: &kiokuv1.Event{
					Author: "user", Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: fmt.Sprintf("Message %d: I practise the cello.", i)}}},
				}}))
				if actx.Err() != nil {
					return
				}
				if err != nil {
					appErr = err
					return
				}
				lats = append(lats, time.Since(t0))
			}
		})
		start := time.Now()
		names := make([]string, *ops)
		err := parallel(ctx, 16, *ops, func(ctx context.Context, i int) error {
			res, err := mc.GenerateMemories(ctx, connect.NewRequest(&kiokuv1.GenerateMemoriesRequest{
				Parent: "apps/" + app, Scope: map[string]string{"user_id": fmt.Sprint("gen-", i)},
				Source: &kiokuv1.GenerateMemoriesRequest_EventsSource{EventsSource: &kiokuv1.EventsSource{Events: []*kiokuv1.Event{
					{Author: "user", Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: "I started playing the cello."}}}},
				}}},
			}))
			if err == nil {
				names[i] = res.Msg.GetName()
			}
			return err
		})
		var failed atomic.Int64
		if err == nil {
			err = parallel(ctx, 16, *ops, func(ctx context.Context, i int) error {
				res, err := oc.WaitOperation(ctx, connect.NewRequest(&kiokuv1.WaitOperationRequest{Name: names[i], Timeout: durationpb.New(5 * time.Minute)}))
				if err == nil && (!res.Msg.GetDone() || res.Msg.GetError() != nil) {
					failed.Add(1)
				}
				return err
			})
		}
		elapsed := time.Since(start)
		stopAppends()
		appends.Wait()
		if err != nil {
			return err
		}
		if appErr != nil {
			return fmt.Errorf("append: %w", appErr)
		}
		if failed.Load() > 0 {
			return fmt.Errorf("%d of %d operations of app %s did not succeed", failed.Load(), *ops, app)
		}
		p50, p99 := ms(percentile(lats, 0.5)), ms(percentile(lats, 0.99))
		r.set(app+"_generate_s", elapsed.Seconds())
		r.set(app+"_append_p50_ms", p50)
		r.set(app+"_append_p99_ms", p99)
		r.set(app+"_appends", float64(len(lats)))
		say("%-6s %12.2f %14.2f %14.2f %8d", app, elapsed.Seconds(), p50, p99, len(lats))
	}
	// A short run may end before the dispatcher's first request arrives.
	for wait := time.Now(); held.Load() == 0 && time.Since(wait) < 5*time.Second; {
		time.Sleep(10 * time.Millisecond)
	}
	r.set("hang_requests", float64(held.Load()))
	say("the hanging receiver took %d requests", held.Load())
	if held.Load() == 0 {
		return fmt.Errorf("the hanging receiver got no request: the webhook was not dispatched")
	}
	if *asJSON {
		return r.printJSON(stdout)
	}
	return nil
}
