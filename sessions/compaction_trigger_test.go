package sessions_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/sessionstore/memstore"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// summariser is a generation model the triggers require but never call.
type summariser struct{}

func (summariser) Generate(context.Context, *model.GenerateRequest) (*model.GenerateResponse, error) {
	return nil, errors.New("the triggers only queue compactions")
}
func (summariser) Name() string { return "test:summariser" }

// triggers is a session service in memory with its compaction triggers,
// whose configuration and queue the test sets.
type triggers struct {
	t   *testing.T
	svc *sessions.Service
	c   *sessions.CompactionTriggers

	mu      sync.Mutex
	trigger sessions.CompactionTrigger
	cfgErr  error
	fail    error
	queued  []string // "session keepRecent" of each compaction queued
}

func newTriggers(t *testing.T, gen model.Generator) *triggers {
	store := memstore.New()
	tr := &triggers{t: t, svc: sessions.NewService(store, sessions.Config{Generator: gen})}
	tr.c = tr.svc.CompactionTriggers(func(_ context.Context, app string) (sessions.CompactionTrigger, error) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return tr.trigger, tr.cfgErr
	}, func(_ context.Context, key sessiontype.Key, keep int) (string, error) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		if tr.fail != nil {
			return "", tr.fail
		}
		tr.queued = append(tr.queued, fmt.Sprint(key.ID, " ", keep))
		return fmt.Sprint("apps/a/operations/op", len(tr.queued)), nil
	})
	return tr
}

// appendBytes appends an event to a session and tells the triggers of it
// with a size of bytes, as the service's observers are told.
func (tr *triggers) appendBytes(key sessiontype.Key, bytes int64) {
	tr.t.Helper()
	ctx := tr.t.Context()
	if _, _, err := tr.svc.GetSession(ctx, key, sessions.GetSessionRequest{SkipEvents: true}); fault.Is(err, fault.NotFound) {
		if _, err := tr.svc.CreateSession(ctx, sessions.CreateSessionRequest{App: key.App, User: key.User, ID: key.ID}); err != nil {
			tr.t.Fatal(err)
		}
	}
	ev, err := tr.svc.AppendEvent(ctx, key, &sessiontype.Event{Author: "user", Content: &sessiontype.Content{Parts: []sessiontype.Part{{Text: "hello"}}}}, nil)
	if err != nil {
		tr.t.Fatal(err)
	}
	tr.c.Observe(ctx, sessions.Notice{Key: key, Sequence: ev.Sequence, Appends: 1, Bytes: bytes})
}

func (tr *triggers) count() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.queued)
}

func TestCompactionTriggerValidate(t *testing.T) {
	for _, bad := range []sessions.CompactionTrigger{{EventCount: -1}, {EventBytes: -1}, {KeepRecent: -1}} {
		if err := bad.Validate(); !fault.Is(err, fault.Invalid) {
			t.Errorf("%+v: %v, want INVALID_ARGUMENT", bad, err)
		}
	}
	for _, ok := range []sessions.CompactionTrigger{{}, {EventCount: 10, EventBytes: 1 << 20, KeepRecent: 5}} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
}

// TestCompactionTriggersCountEvents: a session is compacted once its
// events since the last compaction reach the count, and not again until
// that compaction ends.
func TestCompactionTriggersCountEvents(t *testing.T) {
	tr := newTriggers(t, summariser{})
	tr.trigger = sessions.CompactionTrigger{EventCount: 3, KeepRecent: 2}
	key := sessiontype.Key{App: "a", User: "u", ID: "s"}
	for i := range 2 {
		tr.appendBytes(key, 10)
		if n := tr.count(); n != 0 {
			t.Fatalf("%d compactions after %d events", n, i+1)
		}
	}
	tr.appendBytes(key, 10)
	if tr.count() != 1 || tr.queued[0] != "s 2" {
		t.Fatalf("after 3 events: %v; want one compaction keeping 2", tr.queued)
	}
	for range 4 {
		tr.appendBytes(key, 10)
	}
	if n := tr.count(); n != 1 {
		t.Fatalf("%d compactions while the first one runs", n)
	}
	tr.c.Ended(key, "apps/a/operations/other") // another operation's end changes nothing
	tr.appendBytes(key, 10)
	if n := tr.count(); n != 1 {
		t.Fatalf("%d compactions after another operation ended", n)
	}
	tr.c.Ended(key, "apps/a/operations/op1")
	tr.appendBytes(key, 10)
	if n := tr.count(); n != 2 {
		t.Fatalf("%d compactions after the first ended, want 2 (its events are still uncompacted)", n)
	}
}

// TestCompactionTriggersBytes: a session is compacted once the bytes
// appended through the service reach the bound; the count starts again
// after each.
func TestCompactionTriggersBytes(t *testing.T) {
	tr := newTriggers(t, summariser{})
	tr.trigger = sessions.CompactionTrigger{EventBytes: 1000}
	key := sessiontype.Key{App: "a", User: "u", ID: "s"}
	for _, want := range []int{0, 0, 1} {
		tr.appendBytes(key, 400)
		if n := tr.count(); n != want {
			t.Fatalf("%d compactions, want %d", n, want)
		}
	}
	tr.c.Ended(key, "apps/a/operations/op1")
	for _, want := range []int{1, 1, 2} {
		tr.appendBytes(key, 400)
		if n := tr.count(); n != want {
			t.Fatalf("after the first ended: %d compactions, want %d", n, want)
		}
	}
}

// TestCompactionTriggersOff: no trigger, no model, or a configuration
// that cannot be read queue nothing; a compaction that could not be
// queued is tried again on the next append; a deleted session is
// forgotten.
func TestCompactionTriggersOff(t *testing.T) {
	key := sessiontype.Key{App: "a", User: "u", ID: "s"}
	off := newTriggers(t, summariser{})
	noModel := newTriggers(t, nil)
	noModel.trigger = sessions.CompactionTrigger{EventCount: 1}
	unread := newTriggers(t, summariser{})
	unread.trigger, unread.cfgErr = sessions.CompactionTrigger{EventCount: 1}, errors.New("store down")
	for name, tr := range map[string]*triggers{"no trigger": off, "no model": noModel, "an unreadable configuration": unread} {
		for range 3 {
			tr.appendBytes(key, 1<<20)
		}
		if n := tr.count(); n != 0 {
			t.Errorf("%s: %d compactions", name, n)
		}
	}

	tr := newTriggers(t, summariser{})
	tr.trigger, tr.fail = sessions.CompactionTrigger{EventCount: 1}, fault.New(fault.ResourceExhausted, "queue full")
	tr.appendBytes(key, 10)
	tr.fail = nil
	tr.appendBytes(key, 10)
	if n := tr.count(); n != 1 {
		t.Fatalf("%d compactions after a refused one, want 1", n)
	}
	tr.c.Observe(t.Context(), sessions.Notice{Key: key, Deleted: true})
	tr.appendBytes(sessiontype.Key{App: "a", User: "u", ID: "s2"}, 10)
	if err := tr.svc.DeleteSession(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	tr.appendBytes(key, 10) // a new session of the same name, not the compaction's
	if n := tr.count(); n != 3 {
		t.Fatalf("%d compactions; want the deleted session's forgotten (3)", n)
	}
}
