package sessions_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// indexingStore is a Store that defers search indexing (SearchIndexer); it
// implements only what appends and the indexer call. Each append leaves one
// event waiting; IndexSearch takes up to limit of them, or fails while
// failing is set.
type indexingStore struct {
	sessiondriver.Store
	mu      sync.Mutex
	waiting int
	failing bool
	calls   []time.Time // when IndexSearch was called (the bubble's clock)
	taken   []int       // what each call took
}

func (s *indexingStore) AppendEvent(_ context.Context, r *sessiondriver.AppendEventParams) (*sessiondriver.AppendResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting++
	e := *r.Event
	e.Sequence = int64(s.waiting)
	return &sessiondriver.AppendResult{Event: &e}, nil
}

func (s *indexingStore) IndexSearch(_ context.Context, limit int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, time.Now())
	if s.failing {
		s.taken = append(s.taken, 0)
		return 0, errors.New("disk on fire")
	}
	n := min(limit, s.waiting)
	s.waiting -= n
	s.taken = append(s.taken, n)
	return n, nil
}

func (s *indexingStore) state() (calls []time.Time, taken []int, waiting int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.calls...), append([]int(nil), s.taken...), s.waiting
}

// TestIndexerIndexesWithinTheDelay: on a store that defers indexing, the
// indexer takes what waits at start (a crash leaves events to index), then
// indexes every appended event exactly SearchIndexDelay after the append
// that found it idle, all of them, a batch of 1000 after another; appends
// made meanwhile gather into that round. A failing round is tried again
// after the delay; a stop indexes what waits. (The clock is synctest's:
// the delays are exact.)
func TestIndexerIndexesWithinTheDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &indexingStore{waiting: 1500} // left by a crash
		const delay = 700 * time.Millisecond
		svc := sessions.NewService(store, sessions.Config{SearchIndexDelay: delay, Logger: slog.New(slog.DiscardHandler)})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			svc.RunIndexer(ctx)
			close(done)
		}()
		synctest.Wait()
		start := time.Now()
		calls, taken, waiting := store.state()
		if len(calls) != 2 || taken[0] != 1000 || taken[1] != 500 || waiting != 0 || !calls[1].Equal(start) {
			t.Fatalf("start-up round: calls at %v took %v, %d left; want 1000 then 500 at once", calls, taken, waiting)
		}

		key := sessiontype.Key{App: "a", User: "u", ID: "s"}
		appendOne := func(id string) {
			t.Helper()
			if _, err := svc.AppendEvent(ctx, key, &sessiontype.Event{ID: id, Author: "user"}, nil); err != nil {
				t.Fatal(err)
			}
		}
		appendOne("e1")
		appended := time.Now()
		time.Sleep(delay / 2)
		appendOne("e2") // gathers into the same round
		time.Sleep(delay/2 - time.Nanosecond)
		synctest.Wait()
		if calls, _, waiting := store.state(); len(calls) != 2 || waiting != 2 {
			t.Fatalf("before the delay: %d calls, %d waiting; want nothing indexed yet", len(calls), waiting)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		calls, taken, waiting = store.state()
		if len(calls) != 3 || taken[2] != 2 || waiting != 0 || !calls[2].Equal(appended.Add(delay)) {
			t.Fatalf("after the delay: calls at %v took %v, %d waiting; want both events at %v", calls, taken, waiting, appended.Add(delay))
		}

		store.mu.Lock()
		store.failing = true
		store.mu.Unlock()
		appendOne("e3")
		failedAt := time.Now().Add(delay)
		time.Sleep(delay)
		synctest.Wait()
		store.mu.Lock()
		store.failing = false
		store.mu.Unlock()
		time.Sleep(delay)
		synctest.Wait()
		calls, taken, waiting = store.state()
		if len(calls) != 5 || !calls[3].Equal(failedAt) || taken[3] != 0 || !calls[4].Equal(failedAt.Add(delay)) || taken[4] != 1 || waiting != 0 {
			t.Fatalf("after a failure: calls at %v took %v, %d waiting; want a retry one delay after the failure", calls, taken, waiting)
		}

		// Stopping indexes what waits, at once.
		appendOne("e4")
		stopped := time.Now()
		cancel()
		<-done
		calls, taken, waiting = store.state()
		if len(calls) != 6 || !calls[5].Equal(stopped) || taken[5] != 1 || waiting != 0 {
			t.Fatalf("after the stop: calls at %v took %v, %d waiting; want the last event indexed when stopping", calls, taken, waiting)
		}
	})
}
