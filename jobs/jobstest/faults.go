package jobstest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/jobs"
)

// The engine's answers to work that hangs or asks to be retried later.

// testShareOfWorkers: with two workers, an app whose runs hang holds one
// of them while another app's operation waits, so that the other app's
// operation runs although it was queued last; with nothing else to claim,
// the app's next operation takes the second worker. The claims' order is
// read from the operations' start times: the runs' goroutines may reach
// their handler in any order.
func testShareOfWorkers(t *testing.T, h *harness) {
	e := h.engine("w1", jobs.Config{Workers: 2, LocalQueue: true})
	u1 := h.enqueue(e, "slow", "u1", request{Hang: true})
	u2 := h.enqueue(e, "slow", "u2", request{Hang: true})
	fast := h.enqueue(e, "fast", "u3", request{})
	defer h.start(e)()
	w, err := e.Wait(h.ctx, "fast", fast.ID, 10*time.Second)
	if err != nil || w.State != jobs.Succeeded {
		t.Fatalf("the other app's operation while one app's run hangs: %+v, %v", w, err)
	}
	hung := map[string]bool{}
	for range 2 {
		select {
		case got := <-h.hanging:
			hung[got] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("hanging runs %v: with nothing else to claim, the app did not get the second worker", hung)
		}
	}
	if !hung["slow/u1"] || !hung["slow/u2"] {
		t.Fatalf("hanging runs %v, want slow/u1 and slow/u2", hung)
	}
	first, second := h.get(u1).StartTime, h.get(u2).StartTime
	if !first.Before(w.StartTime) || !w.StartTime.Before(second) {
		t.Fatalf("claimed slow/u1 at %v, fast at %v, slow/u2 at %v: want them in that order", first, w.StartTime, second)
	}
}

// testShareOfOwner: an owner whose runs hang holds at most
// MaxWorkersPerOwner workers, even with workers free: another owner's run
// hangs beside theirs, a third owner's operations of the same app run one
// after the other while both hang, and the first owner's next operation
// waits, pending, for one of their runs to end. Operations without an
// owner have the app's share only.
func testShareOfOwner(t *testing.T, h *harness) {
	e := h.engine("w1", jobs.Config{Workers: 4, MaxWorkersPerOwner: 1, LocalQueue: true})
	h.enqueue(e, "a", "u1/x", request{Hang: true})
	waiting := h.enqueue(e, "a", "u1/y", request{Hang: true})
	h.enqueue(e, "a", "u2/x", request{Hang: true})
	moving := []*jobs.Operation{h.enqueue(e, "a", "u3/x", request{}), h.enqueue(e, "a", "u3/y", request{})}
	defer h.start(e)()
	hung := func(want ...string) {
		t.Helper()
		got := map[string]bool{}
		for range want {
			select {
			case k := <-h.hanging:
				got[k] = true
			case <-time.After(10 * time.Second):
				t.Fatalf("hanging runs %v; want %v", got, want)
			}
		}
		for _, k := range want {
			if !got[k] {
				t.Fatalf("hanging runs %v; want %v", got, want)
			}
		}
	}
	hung("a/u1/x", "a/u2/x")
	for _, op := range moving {
		if w, err := e.Wait(h.ctx, "a", op.ID, 10*time.Second); err != nil || w.State != jobs.Succeeded {
			t.Fatalf("u3's operation (%s) while u1's and u2's runs hang: %+v, %v", op.Key, w, err)
		}
	}
	if got := h.get(waiting); got.State != jobs.Pending {
		t.Fatalf("u1's second operation while their first hangs, two workers free: %s; want PENDING", got.State)
	}
	h.enqueue(e, "a", "backend1", request{Hang: true})
	h.enqueue(e, "a", "backend2", request{Hang: true})
	hung("a/backend1", "a/backend2")
	if got := h.get(waiting); got.State != jobs.Pending {
		t.Fatalf("u1's second operation: %s; want PENDING", got.State)
	}
}

// testOwnerAtShareHidesNothing: the pending operations of an owner at
// their share fill more than a scheduler's scan of the queue (32), and
// another owner's operation, queued after all of them, still runs while
// the first owner's run hangs.
func testOwnerAtShareHidesNothing(t *testing.T, h *harness) {
	h.behindWaitingWork(func(i int) string { return fmt.Sprintf("u1/%d", i) })
}

// testBusyKeyHidesNothing: the pending operations of a key that runs
// (without an owner) fill more than a scheduler's scan of the queue, and
// another owner's operation, queued after all of them, still runs while
// the key's run hangs.
func testBusyKeyHidesNothing(t *testing.T, h *harness) {
	h.behindWaitingWork(func(int) string { return "x" })
}

// behindWaitingWork queues 48 operations that hang, of the keys key(i),
// then one of owner u2, for two workers of which an owner holds at most
// one, and checks that the last one runs while the first one hangs.
func (h *harness) behindWaitingWork(key func(i int) string) {
	t := h.t
	e := h.engine("w1", jobs.Config{Workers: 2, MaxWorkersPerOwner: 1, MaxQueuedPerOwner: 50, MaxQueuedPerKey: 50, LocalQueue: true})
	for i := range 48 {
		h.enqueue(e, "a", key(i), request{Hang: true})
		h.clock.Advance(time.Millisecond) // queued in this order
	}
	last := h.enqueue(e, "a", "u2/x", request{})
	defer h.start(e)()
	if w, err := e.Wait(h.ctx, "a", last.ID, 10*time.Second); err != nil || w.State != jobs.Succeeded {
		t.Fatalf("u2's operation behind 48 others, the first of them hanging: %+v, %v", w, err)
	}
	if got := <-h.hanging; got != "a/"+key(0) {
		t.Fatalf("hanging run: %s", got)
	}
}

// testAttemptTimeout: a run past its kind's Timeout ends its attempt with
// DeadlineExceeded, retried, and fails for good after MaxAttempts, saying
// why.
func testAttemptTimeout(t *testing.T, h *harness) {
	h.timeout = 50 * time.Millisecond
	e := h.engine("w1", jobs.Config{MaxAttempts: 2})
	op := h.enqueue(e, "app1", "k", request{Hang: true})
	h.drain(e)
	<-h.hanging
	if got := h.get(op); got.State != jobs.Pending || got.Attempt != 1 || !strings.Contains(got.Progress, "ran longer than 50ms") {
		t.Fatalf("after an attempt past the timeout: %s attempt %d %q", got.State, got.Attempt, got.Progress)
	}
	h.clock.Advance(time.Minute)
	h.drain(e)
	<-h.hanging
	got := h.get(op)
	if got.State != jobs.Failed || got.ErrorKind != fault.DeadlineExceeded || !strings.Contains(got.ErrorMessage, "gave up after 2 attempts") || !strings.Contains(got.ErrorMessage, "ran longer than 50ms") {
		t.Fatalf("after its attempts: %s %v %q", got.State, got.ErrorKind, got.ErrorMessage)
	}
}

// testRetryDelay: a failure that asks for a wait before its retry (a
// model's Retry-After) is retried no earlier, up to MaxRetryDelay; one
// that asks for nothing waits the jittered backoff (here its longest).
func testRetryDelay(t *testing.T, h *harness) {
	e := h.engine("w1", jobs.Config{MaxRetryDelay: 10 * time.Minute})
	asked := h.enqueue(e, "app1", "k1", request{Fail: "unavailable", RetryAfter: 90 * time.Second})
	capped := h.enqueue(e, "app1", "k2", request{Fail: "unavailable", RetryAfter: 24 * time.Hour})
	plain := h.enqueue(e, "app1", "k3", request{Fail: "unavailable"})
	h.drain(e)
	for _, c := range []struct {
		op   *jobs.Operation
		wait time.Duration
	}{{asked, 90 * time.Second}, {capped, 10 * time.Minute}, {plain, 2 * time.Second}} {
		got := h.get(c.op)
		if wait := got.NotBefore.Sub(got.StartTime); got.State != jobs.Pending || wait < c.wait || wait > c.wait+time.Second {
			t.Errorf("%s: %s, retried %v after its start; want %v", c.op.Key, got.State, wait, c.wait)
		}
	}
}
