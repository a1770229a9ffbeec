// Package suitetest is the shape the conformance suites of kioku's stores
// share (sessionstest, memorybanktest, jobstest, memoryfilestest): named
// cases run as subtests, each on a fresh harness, listings read back by
// pages, and workers run in the background until the test stops them.
package suitetest

import (
	"context"
	"testing"
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
