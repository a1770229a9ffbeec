package firestoredb

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/fault"
)

// TestLocks: a key's lock is held by one at a time, other keys' are not
// held up, a wait ends with its context holding nothing, several keys are
// held together, and a key's lock is forgotten once no one holds or waits
// for it.
func TestLocks(t *testing.T) {
	var l Locks
	ctx := t.Context()
	unlockA, err := l.Lock(ctx, "a", "a")
	if err != nil {
		t.Fatal(err)
	}
	unlockB, err := l.Lock(ctx, "b", "b")
	if err != nil {
		t.Fatalf("another key's lock: %v", err)
	}
	unlockB()
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := l.Lock(short, "the first writer", "a"); !fault.Is(err, fault.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for the first writer") {
		t.Fatalf("a wait past its deadline: %v, want DeadlineExceeded naming what it waited for", err)
	}
	got := make(chan func())
	go func() {
		u, err := l.Lock(ctx, "a", "a")
		if err != nil {
			t.Error(err)
		}
		got <- u
	}()
	select {
	case <-got:
		t.Fatal("a second holder of a held lock")
	case <-time.After(20 * time.Millisecond):
	}
	unlockA()
	(<-got)()
	// Several keys at once: each is held until the lot is given back.
	unlockAB, err := l.Lock(ctx, "a and b", "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	short, cancel = context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := l.Lock(short, "a and b", "b"); !fault.Is(err, fault.DeadlineExceeded) {
		t.Fatalf("b while a and b are held: %v", err)
	}
	unlockAB()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.locks) != 0 {
		t.Errorf("%d locks kept with no holder and no waiter", len(l.locks))
	}
}
