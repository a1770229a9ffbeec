package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/firestoretest"
	"github.com/kioku-ai/kioku/model/modeltest"
)

// TestWebhooksSurviveSIGKILL kills `kioku serve` 20 times during memory
// generations (a fake model whose calls take 0.2 to 1.2 s) while webhooks
// are sent, on each store (SQLite, and Firestore on the emulator);
// afterwards every committed change of a memory (WatchMemories from
// cursor 0) has been delivered at least once, and every delivery is of a
// committed change, with that change's revision. The webhook-id is
// msg_{app}_{cursor}: the cursor names the change.
//
// --operation-lease 2s makes the dispatch lease 1 s, so that a restarted
// server takes over the dispatch of the killed one within its round: the
// kills cut deliveries as well as generations.
//
// On Firestore a transaction cut by a kill holds its locks until
// Firestore expires it, about a minute later, and the emulator locks a
// query's whole collection id (kioku_operations of every app, for an
// operation's claim): the next calls wait for them, so the test sends a
// call again until it is accepted, and each round generates in an app of
// its own (all 20 have the webhook from the start, and every server
// dispatches all of them), so that the locks on one app's documents hold
// no later round up.
//
// The two stores run at once: most of the time is spent waiting.
func TestWebhooksSurviveSIGKILL(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		webhooksSurviveSIGKILL(t, "--data-dir", t.TempDir())
	})
	t.Run("firestore", func(t *testing.T) {
		t.Parallel()
		webhooksSurviveSIGKILL(t, "--store", "firestore", "--firestore-project", firestoretest.Project(t))
	})
}

func webhooksSurviveSIGKILL(t *testing.T, store ...string) {
	start := time.Now()
	args := append(store, "--operation-lease", "2s", "--webhooks-allow-loopback-http", "--webhooks-max-retry-delay", "200ms")
	var (
		mu sync.Mutex
		// delivered holds the revision each webhook-id was delivered
		// with, or "!" and why when two deliveries of one id differed.
		delivered = map[string]string{}
		requests  int // requests received
	)
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			Data struct {
				Name     string `json:"name"`
				Revision int64  `json:"revision"`
			} `json:"data"`
		}
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// A delivery counts once answered; the answer takes up to 200 ms,
		// and a sender killed meanwhile has not delivered (it must send
		// again), so that a dispatcher that recorded the delivery before
		// it had the answer fails the test.
		select {
		case <-time.After(time.Duration(rand.N(200)) * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		rev := fmt.Sprintf("%s/revisions/%d", ev.Data.Name, ev.Data.Revision)
		id := r.Header.Get("webhook-id")
		mu.Lock()
		if prev, ok := delivered[id]; ok && prev != rev {
			rev = fmt.Sprintf("! delivered as %s and as %s", prev, rev)
		}
		delivered[id] = rev
		requests++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rx.Close()
	ctx := t.Context()
	const kills = 20
	fake := newSlowModel(t)
	args = append(args, "--model-provider", "gemini", "--gemini-base-url", fake.URL)
	app := func(round int) string { return fmt.Sprint("crash", round) }
	var (
		proc    *kiokuProcess
		before  int // requests before the round
		sending int // rounds whose server sent some before it was killed
		retried int // GenerateMemories calls sent again (under mu)
	)
	for round := range kills + 1 {
		proc = startKioku(t, args...)
		c := client.New(proc.url)
		if round == 0 {
			for r := range kills {
				_, err := c.UpdateMemoryBankConfig(ctx, &kiokuv1.UpdateMemoryBankConfigRequest{
					MemoryBankConfig: &kiokuv1.MemoryBankConfig{Name: "apps/" + app(r) + "/memoryBankConfig", Webhooks: []*kiokuv1.Webhook{{Url: rx.URL + "/hook", Events: []string{"memory.created", "memory.updated", "memory.deleted"}}}},
					UpdateMask:       &fieldmaskpb.FieldMask{Paths: []string{"webhooks"}},
				})
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		if round == kills {
			break // the last server runs on: its dispatcher sends what is left
		}
		// The round's generations: each call is sent until it is
		// accepted (on Firestore a call may wait for a lock that a
		// transaction the last kill cut holds, until Firestore expires
		// it), and the kill comes once the model has been called for one
		// of them, during the generations.
		called := fake.calls.Load()
		var calls sync.WaitGroup
		for i := range 3 {
			user := fmt.Sprintf("u%d", (round*3+i)%5)
			calls.Go(func() {
				for {
					_, err := c.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{
						Parent: "apps/" + app(round), Scope: client.Scope(user),
						Source: &kiokuv1.GenerateMemoriesRequest_EventsSource{EventsSource: &kiokuv1.EventsSource{Events: []*kiokuv1.Event{
							{Author: "user", Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: "Round " + fmt.Sprint(round) + ": a few things about me."}}}},
						}}},
					})
					if err == nil || ctx.Err() != nil {
						return
					}
					mu.Lock()
					retried++
					mu.Unlock()
					time.Sleep(100 * time.Millisecond)
				}
			})
		}
		calls.Wait()
		waitFrom := time.Now()
		for fake.calls.Load() == called {
			if time.Since(waitFrom) > 90*time.Second {
				t.Fatalf("round %d: the model was not called within 90 s of the generations' acceptance", round)
			}
			time.Sleep(10 * time.Millisecond)
		}
		// A model call takes 0.2 to 1.2 s: the kill, up to 1 s after the
		// first, finds some generations at the model, some writing, some
		// done; and past the killed server's dispatch lease in some
		// rounds, so that this server sends and is killed sending.
		time.Sleep(time.Duration(rand.N(1000)) * time.Millisecond)
		if err := proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		proc.cmd.Wait()
		mu.Lock()
		if requests > before {
			sending++
			before = requests
		}
		mu.Unlock()
	}
	if sending == 0 {
		t.Fatal("no killed server sent a webhook: the kills never cut a dispatch")
	}
	killed := time.Since(start)

	// The last server finishes the operations the kills cut; then what
	// is committed no longer changes.
	c := client.New(proc.url)
	// A minute for the locks of the last kills' transactions to expire
	// (Firestore), and time to send what they held back.
	deadline := time.Now().Add(2 * time.Minute)
	failed := 0
	for {
		running, n := 0, 0
		failed = 0
		for r := range kills {
			for op, err := range c.AllOperations(ctx, &kiokuv1.ListOperationsRequest{Parent: "apps/" + app(r)}) {
				if err != nil {
					t.Fatal(err)
				}
				n++
				if !op.GetDone() {
					running++
				} else if op.GetError() != nil {
					failed++
				}
			}
		}
		if running == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d operations not done", running, n)
		}
		time.Sleep(500 * time.Millisecond)
	}

	// The committed changes, as the feeds have them (webhook-id →
	// revision): read again once each has been delivered, until a read
	// finds no more. A read of an app's feed ends when no change came for
	// a second.
	readFeeds := func() map[string]string {
		var (
			fmu       sync.Mutex
			committed = map[string]string{}
			reads     sync.WaitGroup
		)
		for r := range kills {
			reads.Go(func() {
				wctx, cancel := context.WithCancel(ctx)
				defer cancel()
				quiet := time.AfterFunc(5*time.Second, cancel) // the first change may take a while on a busy emulator
				for resp, err := range c.WatchMemories(wctx, &kiokuv1.WatchMemoriesRequest{Parent: "apps/" + app(r), StartCursor: "0"}) {
					if wctx.Err() != nil {
						return
					}
					if err != nil {
						t.Errorf("reading the feed of %s: %v", app(r), err)
						return
					}
					quiet.Reset(time.Second)
					fmu.Lock()
					committed["msg_"+app(r)+"_"+resp.GetCursor()] = resp.GetRevision()
					fmu.Unlock()
				}
			})
		}
		reads.Wait()
		if t.Failed() {
			t.FailNow()
		}
		return committed
	}
	committed := readFeeds()
	if len(committed) == 0 {
		t.Fatal("no change was committed")
	}
	for {
		mu.Lock()
		missing := 0
		for id := range committed {
			if delivered[id] == "" {
				missing++
			}
		}
		mu.Unlock()
		if missing > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d committed changes never delivered", missing, len(committed))
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		again := readFeeds()
		if len(again) > len(committed) {
			committed = again
			continue
		}
		// The memories' revisions as stored, each of which is a change
		// (nothing is deleted here): the feed must name every one (a feed
		// written apart from the change's transaction would miss some).
		var unfed []string
		fed := map[string]bool{}
		for _, rev := range committed {
			fed[rev] = true
		}
		revisions := 0
		for r := range kills {
			for m, err := range c.AllMemories(ctx, &kiokuv1.ListMemoriesRequest{Parent: "apps/" + app(r)}) {
				if err != nil {
					t.Fatal(err)
				}
				for rev, err := range c.AllMemoryRevisions(ctx, &kiokuv1.ListMemoryRevisionsRequest{Parent: m.GetName()}) {
					if err != nil {
						t.Fatal(err)
					}
					revisions++
					if !fed[rev.GetName()] {
						unfed = append(unfed, rev.GetName())
					}
				}
			}
		}
		if len(unfed) > 0 {
			t.Fatalf("%d of %d stored revisions are in no change of the feed, never delivered: %s", len(unfed), revisions, strings.Join(unfed, ", "))
		}
		mu.Lock()
		var invented []string
		for id, rev := range delivered {
			if committed[id] != rev {
				invented = append(invented, fmt.Sprintf("%s (%s; committed: %q)", id, rev, committed[id]))
			}
		}
		total, reqs, resent := len(delivered), requests, retried
		mu.Unlock()
		if len(invented) > 0 {
			t.Fatalf("deliveries of changes not committed: %s", strings.Join(invented, ", "))
		}
		apps := map[string]bool{}
		for id := range committed {
			apps[id[:strings.LastIndex(id, "_")]] = true
		}
		t.Logf("%d generations (%d calls sent again, %d failed), %d model calls; %d committed changes (%d revisions stored) in %d apps, each delivered (%d webhook-ids, %d requests) across %d SIGKILLs, %d of them of a server that had sent some; the kills took %v, all delivered after %v",
			3*kills, resent, failed, fake.calls.Load(), len(committed), revisions, len(apps), total, reqs, kills, sending, killed.Round(time.Second), time.Since(start).Round(time.Second))
		return
	}
}

// slowModel is a fake Gemini whose every call takes 0.2 to 1.2 s and
// extracts four facts.
type slowModel struct {
	*modeltest.Gemini
	calls atomic.Int64
}

func newSlowModel(t *testing.T) *slowModel {
	m := &slowModel{Gemini: modeltest.NewGemini(t)}
	m.SetResponder(func(modeltest.Call) modeltest.Reply {
		m.calls.Add(1)
		time.Sleep(200*time.Millisecond + time.Duration(rand.N(1000))*time.Millisecond)
		return modeltest.Reply{Text: `{"facts":[` +
			`{"fact":"The user keeps a diary.","topic":"USER_PERSONAL_INFO","events":[1]},` +
			`{"fact":"The user plays the cello.","topic":"USER_PREFERENCES","events":[1]},` +
			`{"fact":"The user lives in Kyoto.","topic":"USER_PERSONAL_INFO","events":[1]},` +
			`{"fact":"The user is learning Go.","topic":"USER_PERSONAL_INFO","events":[1]}]}`}
	})
	return m
}
