package sessions_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/internal/sessionstore/memstore"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// newService returns a service on an empty in-memory store.
func newService(t *testing.T) *sessions.Service {
	t.Helper()
	return sessions.NewService(memstore.New(), sessions.Config{})
}

// recorder is an observer that keeps its notices and can be blocked.
type recorder struct {
	mu      sync.Mutex
	notices []sessions.Notice
	gate    chan struct{} // while open (nil or closed), Observe returns at once
	got     chan struct{}
}

func (r *recorder) Observe(ctx context.Context, n sessions.Notice) {
	if r.gate != nil {
		select {
		case <-r.gate:
		case <-ctx.Done():
			return
		}
	}
	r.mu.Lock()
	r.notices = append(r.notices, n)
	r.mu.Unlock()
	select {
	case r.got <- struct{}{}:
	default:
	}
}

func (r *recorder) all() []sessions.Notice {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sessions.Notice(nil), r.notices...)
}

// waitFor waits until cond holds on the notices received.
func (r *recorder) waitFor(t *testing.T, what string, cond func([]sessions.Notice) bool) []sessions.Notice {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if n := r.all(); cond(n) {
			return n
		}
		select {
		case <-r.got:
		case <-deadline:
			t.Fatalf("waiting for %s; notices so far: %+v", what, r.all())
		}
	}
}

func appendText(t *testing.T, svc *sessions.Service, key sessiontype.Key, id string) *sessiontype.Event {
	t.Helper()
	e, err := svc.AppendEvent(t.Context(), key, &sessiontype.Event{ID: id, Author: "user", Content: &sessiontype.Content{Parts: []sessiontype.Part{{Text: "hello " + id}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestObserversSeeAppendsAndDeletions(t *testing.T) {
	svc := newService(t)
	ctx := t.Context()
	a, b := &recorder{got: make(chan struct{}, 1)}, &recorder{got: make(chan struct{}, 1)}
	svc.Observe(ctx, "a", a, sessions.ObserveOptions{})
	svc.Observe(ctx, "b", b, sessions.ObserveOptions{})
	key := sessiontype.Key{App: "app", User: "u", ID: "s"}
	if _, err := svc.CreateSession(ctx, sessions.CreateSessionRequest{App: key.App, User: key.User, ID: key.ID}); err != nil {
		t.Fatal(err)
	}
	e1 := appendText(t, svc, key, "e1")
	// A retried append stores nothing and is not told again.
	appendText(t, svc, key, "e1")
	// A partial event is not stored and not told either.
	if _, err := svc.AppendEvent(ctx, key, &sessiontype.Event{Author: "model", Partial: true}, nil); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*recorder{a, b} {
		got := r.waitFor(t, "the first append", func(n []sessions.Notice) bool { return len(n) >= 1 })
		if got[0].Key != key || got[0].Sequence != 1 || got[0].Appends != 1 || !got[0].Time.Equal(e1.Timestamp) || got[0].Bytes <= 0 || got[0].Deleted {
			t.Fatalf("notice of the first append = %+v", got[0])
		}
	}
	if err := svc.DeleteSession(ctx, key); err != nil {
		t.Fatal(err)
	}
	got := a.waitFor(t, "the deletion", func(n []sessions.Notice) bool { return len(n) >= 2 })
	if len(got) != 2 || got[1].Key != key || !got[1].Deleted {
		t.Fatalf("notices = %+v; want the append, then the deletion", got)
	}
	stats := svc.Observers()
	if len(stats) != 2 || stats[0].Name != "a" || stats[0].Delivered != 2 || stats[0].Dropped != 0 || stats[0].Waiting != 0 {
		t.Fatalf("observer stats = %+v", stats)
	}
}

// TestBlockedObserverDoesNotDelayAppends blocks an observer for good and
// appends to more sessions than its queue holds: every append completes,
// the notices of one session merge into one, the queue stays within its
// bound and the excess is counted as dropped; once unblocked, the observer
// gets the latest state of each waiting session.
func TestBlockedObserverDoesNotDelayAppends(t *testing.T) {
	svc := newService(t)
	ctx := t.Context()
	r := &recorder{gate: make(chan struct{}), got: make(chan struct{}, 1)}
	const queue = 5
	svc.Observe(ctx, "blocked", r, sessions.ObserveOptions{Queue: queue})
	const sessionsN, perSession = 8, 20
	var wg sync.WaitGroup
	for i := range sessionsN {
		wg.Go(func() {
			key := sessiontype.Key{App: "app", User: "u", ID: fmt.Sprint("s", i)}
			if _, err := svc.CreateSession(ctx, sessions.CreateSessionRequest{App: key.App, User: key.User, ID: key.ID}); err != nil {
				t.Error(err)
				return
			}
			for j := range perSession {
				if _, err := svc.AppendEvent(ctx, key, &sessiontype.Event{ID: fmt.Sprint("e", j), Author: "user"}, nil); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait() // the observer is still blocked: the appends did not wait for it
	st := svc.Observers()[0]
	// One notice may be in the observer's hands (blocked), the others wait.
	if st.Waiting > queue || st.Waiting < queue-1 || st.Dropped == 0 || st.Delivered > 1 {
		t.Fatalf("while blocked: %+v; want at most %d waiting and the rest dropped", st, queue)
	}
	close(r.gate)
	got := r.waitFor(t, "the waiting notices", func(n []sessions.Notice) bool { return len(n) >= int(st.Delivered)+st.Waiting })
	// The first notice was taken before the gate opened, while appends
	// went on; every later one waited until all appends were done, merging
	// them, so it carries its session's last sequence.
	merged := false
	for _, n := range got[1:] {
		merged = merged || n.Appends > 1
		if n.Sequence != perSession {
			t.Fatalf("notice %+v, delivered after every append, does not carry the last sequence %d", n, perSession)
		}
	}
	if !merged {
		t.Fatalf("no notice merged the appends of its session: %+v", got)
	}
}
