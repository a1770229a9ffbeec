package workflow_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/internal/workflow"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorydriver/memorydrivertest"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/modeltest"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// TestCompactionTriggers wires the session service, the memory bank and
// the jobs engine into an App as kioku serve does, on SQLite and on the
// Firestore emulator, and checks the
// per-app compaction triggers: every N events since the last compaction
// (recursively), and every M bytes.
func TestCompactionTriggers(t *testing.T) {
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			ss, ms, _ := open(t)
			testCompactionTriggers(t, ss, ms)
		})
	}
}

func testCompactionTriggers(t *testing.T, ss sessiondriver.Store, ms memorydrivertest.Backend) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	gemini := modeltest.NewGemini(t)
	summaries := 0
	gemini.SetResponder(func(c modeltest.Call) modeltest.Reply {
		summaries++
		return modeltest.Reply{Text: fmt.Sprintf("summary %d", summaries)}
	})
	gen := &model.Gemini{Client: gemini.Client(t), Model: "gemini-test"}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	sess := sessions.NewService(ss, sessions.Config{Generator: gen, Logger: logger})
	engine := jobs.New(ms, jobs.Config{Logger: logger})
	mem := memorybank.NewService(ms, memorybank.Config{Generator: gen, Sessions: sess, Jobs: engine, Operations: ms, Logger: logger})
	a := workflow.New(workflow.Config{Sessions: sess, Memories: mem, Jobs: engine, Logger: logger})
	var handled atomic.Uint64 // notices the triggers have finished with
	sess.Observe(ctx, "triggers", sessions.ObserverFunc(func(ctx context.Context, n sessions.Notice) {
		a.Observe(ctx, n)
		handled.Add(1)
	}), sessions.ObserveOptions{})
	done := make(chan struct{})
	go func() { engine.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	if _, err := mem.UpdateConfig(ctx, &appconfig.Config{App: "count", Compaction: sessions.CompactionTrigger{EventCount: 10, KeepRecent: 2}}, []string{"compaction_trigger"}); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.UpdateConfig(ctx, &appconfig.Config{App: "bytes", Compaction: sessions.CompactionTrigger{EventBytes: 2000, KeepRecent: 1}}, []string{"compaction_trigger"}); err != nil {
		t.Fatal(err)
	}

	// settled waits until the observer has handled every notice and no
	// compaction of the app is pending or running (a compaction's own
	// append brings one more notice), and returns the compaction operations
	// of the app.
	settled := func(appID string) []*workflow.Operation {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			st := sess.Observers()[0]
			idle := st.Waiting == 0 && st.Delivered == handled.Load()
			ops, _, err := a.ListOperations(ctx, appID, nil, 0, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, op := range ops {
				idle = idle && op.State.Done()
			}
			if idle {
				if st2 := sess.Observers()[0]; st2.Delivered == st.Delivered && st2.Waiting == 0 {
					return ops
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("not settled after 30s: %+v, %d handled, %d operations", st, handled.Load(), len(ops))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	appendN := func(key sessiontype.Key, from, n int, text string) {
		t.Helper()
		for i := from; i < from+n; i++ {
			if _, err := sess.AppendEvent(ctx, key, &sessiontype.Event{ID: fmt.Sprint("e", i), Author: "user", Content: &sessiontype.Content{Parts: []sessiontype.Part{{Text: text}}}}, nil); err != nil {
				t.Fatal(err)
			}
			settled(key.App)
		}
	}
	view := func(key sessiontype.Key) []*sessiontype.Event {
		t.Helper()
		_, events, err := sess.GetSession(ctx, key, sessions.GetSessionRequest{Compacted: true})
		if err != nil {
			t.Fatal(err)
		}
		return events
	}

	// Every 10 events since the last compaction.
	key := sessiontype.Key{App: "count", User: "u", ID: "s"}
	if _, err := sess.CreateSession(ctx, sessions.CreateSessionRequest{App: key.App, User: key.User, ID: key.ID}); err != nil {
		t.Fatal(err)
	}
	appendN(key, 1, 9, "hello")
	if ops := settled("count"); len(ops) != 0 {
		t.Fatalf("%d compactions after 9 events", len(ops))
	}
	appendN(key, 10, 1, "hello") // the 10th event
	ops := settled("count")
	if len(ops) != 1 || ops[0].Kind != workflow.KindCompact || ops[0].State != jobs.Succeeded {
		t.Fatalf("after 10 events: %+v", ops)
	}
	v := view(key)
	if c := v[0].Actions.Compaction; c == nil || c.EndSequence != 8 || len(v) != 3 {
		t.Fatalf("view after the first compaction: %d events, first %+v", len(v), v[0])
	}
	appendN(key, 11, 9, "hello") // 9 after the compaction event
	if ops := settled("count"); len(ops) != 1 {
		t.Fatalf("%d compactions after 9 more events", len(ops))
	}
	appendN(key, 20, 1, "hello")
	if ops := settled("count"); len(ops) != 2 {
		t.Fatalf("%d compactions after 10 more events, want 2", len(ops))
	}
	v = view(key)
	if c := v[0].Actions.Compaction; c == nil || c.StartSequence != 1 || c.EndSequence != 19 || !strings.HasPrefix(v[0].Content.Text(), "summary") {
		t.Fatalf("view after the second compaction: first %+v", v[0])
	}

	// Every 2000 bytes.
	bkey := sessiontype.Key{App: "bytes", User: "u", ID: "s"}
	if _, err := sess.CreateSession(ctx, sessions.CreateSessionRequest{App: bkey.App, User: bkey.User, ID: bkey.ID}); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 500) // about 620 bytes encoded
	appendN(bkey, 1, 3, big)
	if ops := settled("bytes"); len(ops) != 0 {
		t.Fatalf("%d compactions after 3 events of 620 bytes", len(ops))
	}
	appendN(bkey, 4, 1, big)
	if ops := settled("bytes"); len(ops) != 1 {
		t.Fatalf("%d compactions after 4 events of 620 bytes, want 1", len(ops))
	}
	if v := view(bkey); v[0].Actions.Compaction == nil || v[0].Actions.Compaction.EndSequence != 3 {
		t.Fatalf("bytes view: %+v", v[0])
	}
}
