// Package suitetest is the shape the conformance suites of kioku's stores
// share (sessiondrivertest, memorydrivertest, jobstest, memoryfilestest,
// blockstest): named cases run as subtests, each on a fresh harness,
// listings read back by pages, workers run in the background until the
// test stops them, gates that hold calls back until the test lets them
// through, and a settable clock.
package suitetest

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Case is one test of a suite, run on a harness H of its own.
type Case[H any] struct {
	Name string
	Run  func(t *testing.T, h H)
}

// Run runs each case as a subtest on a harness newHarness makes for it.
func Run[H any](t *testing.T, cases []Case[H], newHarness func(t *testing.T) H) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) { c.Run(t, newHarness(t)) })
	}
}

// Pages reads a whole listing by pages of size: read returns the items
// after a cursor ("" for the first page), cursor gives an item's, and a
// page shorter than size is the last. A failed read fails the test.
func Pages[T any](t testing.TB, size int, read func(after string, size int) ([]T, error), cursor func(T) string) []T {
	t.Helper()
	var all []T
	after := ""
	for {
		got, err := read(after, size)
		if err != nil {
			t.Fatalf("reading after %q by pages of %d: %v", after, size, err)
		}
		all = append(all, got...)
		if len(got) < size {
			return all
		}
		after = cursor(got[len(got)-1])
	}
}

// Same is the cursor of a listing of names: the name itself.
func Same(s string) string { return s }

// Start runs run (a worker's loop, such as an engine's Run) in a goroutine
// on a context of its own below ctx. stop cancels that context; ended is
// closed once run has returned.
func Start(ctx context.Context, run func(context.Context)) (stop func(), ended <-chan struct{}) {
	ctx, stop = context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx)
	}()
	return stop, done
}

// Gate holds back the calls that pass it (a handler, a fake model's
// replies) until the test opens it.
type Gate struct {
	started chan struct{}
	open    chan struct{}
	once    sync.Once
}

// NewGate returns a closed gate that opens when t ends at the latest;
// Started holds up to n calls not yet received.
func NewGate(t testing.TB, n int) *Gate {
	g := &Gate{started: make(chan struct{}, n), open: make(chan struct{})}
	t.Cleanup(g.Open)
	return g
}

// Started receives one value per call that reached the gate.
func (g *Gate) Started() <-chan struct{} { return g.started }

// Open lets every call through, now and later.
func (g *Gate) Open() { g.once.Do(func() { close(g.open) }) }

// Pass tells Started of a call (unless Started is full and the gate opens
// or ctx ends first), then waits until the gate opens (nil) or ctx ends
// (its error).
func (g *Gate) Pass(ctx context.Context) error {
	select {
	case g.started <- struct{}{}:
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Clock is a settable clock for the services the suites drive: Now reads
// it, Tick moves it on by its step and reads it (so that consecutive
// writes get distinct, ordered times), Advance moves it on.
type Clock struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

// NewClock returns a clock at at that Tick moves on by step.
func NewClock(at time.Time, step time.Duration) *Clock { return &Clock{now: at, step: step} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Tick moves the clock on by its step and returns the new time.
func (c *Clock) Tick() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.step)
	return c.now
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
