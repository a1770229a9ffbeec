package sessions_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
)

// backlogStore is a Store with a search backlog of sessions to index
// again; it implements only what the sweeper calls.
type backlogStore struct {
	sessiondriver.Store
	mu      sync.Mutex
	backlog int
	calls   []int // what each ReindexSearch call did
}

func (b *backlogStore) DeleteExpired(context.Context, time.Time, int) (int, error) { return 0, nil }

func (b *backlogStore) ReindexSearch(_ context.Context, limit int) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := min(limit, b.backlog)
	b.backlog -= n
	b.calls = append(b.calls, n)
	return n, nil
}

// TestSweeperWorksOffTheSearchBacklog: the sweeper's first round indexes
// the whole backlog, a batch of 100 sessions after another, without
// waiting for the next round between full batches.
func TestSweeperWorksOffTheSearchBacklog(t *testing.T) {
	store := &backlogStore{backlog: 250}
	svc := sessions.NewService(store, sessions.Config{})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		svc.RunSweeper(ctx, time.Hour)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		store.mu.Lock()
		calls := slices.Clone(store.calls)
		store.mu.Unlock()
		if len(calls) >= 3 {
			if !slices.Equal(calls, []int{100, 100, 50}) {
				t.Errorf("ReindexSearch calls did %v; want 100, 100 and 50 in the first round", calls)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10s the sweeper's first round made the calls %v; want the whole backlog of 250 worked off", calls)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
}
