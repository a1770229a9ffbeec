package memorybank_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/internal/memorystore/memstore"
	sessionmemstore "github.com/kioku-ai/kioku/internal/sessionstore/memstore"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/modeltest"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// blockingStore is a memory bank store whose configuration reads wait
// while blocked is open: the first thing a trigger does.
type blockingStore struct {
	memorydriver.Store
	blocked chan struct{}
}

func (s *blockingStore) GetConfig(ctx context.Context, app string) (*appconfig.Config, error) {
	select {
	case <-s.blocked:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Store.GetConfig(ctx, app)
}

// TestTriggersFollowAppendsWithoutDelayingThem wires the memory bank's
// triggers to a session service as kioku serve does, blocks the memory
// store, and appends through the session service directly (no RPC): every
// append completes while the store is blocked. Once it is unblocked, the
// count trigger fires for those appends.
func TestTriggersFollowAppendsWithoutDelayingThem(t *testing.T) {
	ctx := t.Context()
	sessStore, memStore := sessionmemstore.New(), memstore.New()
	sess := sessions.NewService(sessStore, sessions.Config{})
	gemini := modeltest.NewGemini(t)
	store := &blockingStore{Store: memStore, blocked: make(chan struct{})}
	engine := jobs.New(memStore, jobs.Config{})
	mem := memorybank.NewService(store, memorybank.Config{
		Generator:  &model.Gemini{Client: gemini.Client(t), Model: "gemini-test"},
		Sessions:   sess,
		Jobs:       engine,
		Operations: memStore,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err := memStore.PutConfig(ctx, &appconfig.Config{App: "app", Trigger: appconfig.Trigger{EventCount: 5}}); err != nil {
		t.Fatal(err)
	}
	sess.Observe(ctx, "memory_triggers", mem, sessions.ObserveOptions{})

	key := sessiontype.Key{App: "app", User: "u", ID: "s"}
	if _, err := sess.CreateSession(ctx, sessions.CreateSessionRequest{App: key.App, User: key.User, ID: key.ID}); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		if _, err := sess.AppendEvent(ctx, key, &sessiontype.Event{ID: fmt.Sprint("e", i), Author: "user", Content: &sessiontype.Content{Parts: []sessiontype.Part{{Text: "I like tea."}}}}, nil); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			// The first append's notice is the one the store blocks, so
			// that it reads one event, which fires nothing, however fast
			// the next appends come (on an in-memory store, the observer
			// may otherwise first take a notice of five or more, and fire
			// once for it and once for the rest).
			waitDelivered(t, sess)
		}
	}
	// All 50 appends are stored while the memory store is blocked.
	if st := sess.Observers(); len(st) != 1 || st[0].Delivered > 1 || st[0].Waiting != 1 {
		t.Fatalf("observer while the store is blocked: %+v; want the appends merged into one waiting notice", st)
	}
	close(store.blocked)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ops, err := engine.List(ctx, jobs.Query{App: "app", Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(ops) == 1 {
			job, err := memorybank.JobOf(ops[0])
			if err != nil {
				t.Fatal(err)
			}
			if g := job.Generate; g.Session == nil || *g.Session != key {
				t.Fatalf("triggered operation = %+v", g)
			}
			break
		}
		if len(ops) > 1 || time.Now().After(deadline) {
			t.Fatalf("%d operations triggered, want 1", len(ops))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitDelivered waits until the session service's observer was handed a
// notice.
func waitDelivered(t *testing.T, sess *sessions.Service) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if st := sess.Observers(); len(st) == 1 && st[0].Delivered == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("observer never handed a notice: %+v", sess.Observers())
		}
		time.Sleep(time.Millisecond)
	}
}
