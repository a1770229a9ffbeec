// Package blockstest is the conformance suite of blocks.Store: every
// backend runs Run and must pass all of it. The suite drives a Store
// through blocks.Service, as the API does, and checks what a caller sees:
// blocks created and replaced, a user's and an app's shared blocks and
// the apps kept apart, the limits (in characters, and of blocks per
// owner), read-only blocks, the agent's edits and their refusals,
// the background rewrite with its sources, expected revisions and
// concurrent writes that lose no edit, revisions
// and their bound, deletion and a user's erasure, and the primitives of
// export and import.
package blockstest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/blocks"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/suitetest"
)

// Run runs the conformance suite, each case on an empty store of its own
// from newStore, which registers the store's cleanup with t.Cleanup (the
// suite closes nothing).
func Run[S blocks.Store](t *testing.T, newStore func(t *testing.T) S) {
	tests := []suitetest.Case[*Harness]{
		{Name: "CreateAndGet", Run: testCreateAndGet},
		{Name: "UpdateReplaces", Run: testUpdateReplaces},
		{Name: "UserAndSharedApart", Run: testApart},
		{Name: "ListAndPage", Run: testListAndPage},
		{Name: "Limits", Run: testLimits},
		{Name: "MaxBlocks", Run: testMaxBlocks},
		{Name: "ReadOnly", Run: testReadOnly},
		{Name: "Append", Run: testAppend},
		{Name: "Replace", Run: testReplace},
		{Name: "Rewrite", Run: testRewrite},
		{Name: "ExpectedRevision", Run: testExpectedRevision},
		{Name: "ConcurrentEdits", Run: testConcurrentEdits},
		{Name: "ConcurrentExpectedUpdates", Run: testConcurrentExpected},
		{Name: "Revisions", Run: testRevisions},
		{Name: "RevisionsBounded", Run: testRevisionsBounded},
		{Name: "Delete", Run: testDelete},
		{Name: "EraseUser", Run: testEraseUser},
		{Name: "Import", Run: testImport},
		{Name: "AppsAndUsers", Run: testAppsAndUsers},
	}
	suitetest.Run(t, tests, func(t *testing.T) *Harness { return NewHarness(t, newStore(t)) })
}

// Harness is a Service on a store with a clock that moves one millisecond
// at each reading.
type Harness struct {
	T     *testing.T
	Ctx   context.Context
	Store blocks.Store
	Svc   *blocks.Service
}

// NewHarness returns a harness on a store.
func NewHarness(t *testing.T, s blocks.Store) *Harness {
	clock := suitetest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), time.Millisecond)
	return &Harness{T: t, Ctx: t.Context(), Store: s, Svc: blocks.NewService(s, blocks.Config{Now: clock.Tick, MaxAttempts: 100})}
}

// The keys the cases use: ann's and bob's blocks of app1, app1's shared
// persona, and ann's of app2.
var (
	annHuman   = blocks.Key{App: "app1", User: "ann", Label: "human"}
	bobHuman   = blocks.Key{App: "app1", User: "bob", Label: "human"}
	persona    = blocks.Key{App: "app1", Label: "persona"}
	otherHuman = blocks.Key{App: "app2", User: "ann", Label: "human"}
)

// Put writes a block with Update and fails the test on an error.
func (h *Harness) Put(k blocks.Key, value string, limit int) *blocks.Block {
	h.T.Helper()
	b, err := h.Svc.Update(h.Ctx, blocks.UpdateRequest{Key: k, Value: value, Limit: limit})
	if err != nil {
		h.T.Fatalf("updating %s: %v", k.Name(), err)
	}
	return b
}

// Value returns a block's value, failing the test when it cannot be read.
func (h *Harness) Value(k blocks.Key) string {
	h.T.Helper()
	b, err := h.Svc.Get(h.Ctx, k)
	if err != nil {
		h.T.Fatalf("reading %s: %v", k.Name(), err)
	}
	return b.Value
}

// wantErr checks that err has kind and a message holding each of words.
func wantErr(t *testing.T, what string, err error, kind fault.Kind, words ...string) {
	t.Helper()
	if !fault.Is(err, kind) {
		t.Fatalf("%s: %v; want an error of kind %s", what, err, kind)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q does not say %q", what, err, w)
		}
	}
}
