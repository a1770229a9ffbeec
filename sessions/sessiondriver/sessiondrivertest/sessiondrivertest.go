// Package sessiondrivertest is the conformance suite of the session store
// contract (package sessions/sessiondriver): every backend runs Run and
// must pass all of it. The suite drives a store through sessions.Service,
// so it checks the whole contract a caller sees: names and isolation,
// idempotent appends, sequences, optimistic concurrency, scoped state,
// reads, listings, expiry, forks, watches, compaction; and, for each
// optional part the store implements, event search (Searcher), the
// primitives of export and import (Transferer) and the erasure of a user
// (Eraser). For a part it leaves out, the suite checks that the service
// answers Unimplemented where a caller would need it.
package sessiondrivertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/suitetest"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// Run runs the conformance suite, each case on an empty store of its own
// from newStore, which registers the store's cleanup with t.Cleanup (the
// suite closes nothing). The optional parts are found on the first store
// newStore returns.
func Run[S sessiondriver.Store](t *testing.T, newStore func(t *testing.T) S) {
	core := []suitetest.Case[*harness]{
		{Name: "CreateWithCallerID", Run: testCreateWithCallerID},
		{Name: "CreateDuplicateIDInApp", Run: testCreateDuplicateIDInApp},
		{Name: "CreateServerIDs", Run: testCreateServerIDs},
		{Name: "CreateInitialStateScopes", Run: testCreateInitialStateScopes},
		{Name: "InvalidNames", Run: testInvalidNames},
		{Name: "Isolation", Run: testIsolation},
		{Name: "EventTimestamps", Run: testEventTimestamps},
		{Name: "KeepZeroTimestamp", Run: testKeepZeroTimestamp},
		{Name: "FindSession", Run: testFindSession},
		{Name: "AppendAssignsIDsAndSequences", Run: testAppendAssignsIDsAndSequences},
		{Name: "AppendIdempotent", Run: testAppendIdempotent},
		{Name: "AppendSameIDOtherContent", Run: testAppendSameIDOtherContent},
		{Name: "ExpectedSequence", Run: testExpectedSequence},
		{Name: "ConcurrentAppends", Run: testConcurrentAppends},
		{Name: "PartialNotPersisted", Run: testPartialNotPersisted},
		{Name: "StateScopes", Run: testStateScopes},
		{Name: "StateReplaceAndDelete", Run: testStateReplaceAndDelete},
		{Name: "TempStateNeverStored", Run: testTempStateNeverStored},
		{Name: "AppendAtomicOnLimit", Run: testAppendAtomicOnLimit},
		{Name: "EventRoundTrip", Run: testEventRoundTrip},
		{Name: "GetRecentAndAfter", Run: testGetRecentAndAfter},
		{Name: "ListEventsPaging", Run: testListEventsPaging},
		{Name: "ReadBudget", Run: testReadBudget},
		{Name: "ListSessionsPagingAndOrder", Run: testListSessionsPagingAndOrder},
		{Name: "ListSessionsFilter", Run: testListSessionsFilter},
		{Name: "ListSessionsOrderBy", Run: testListSessionsOrderBy},
		{Name: "UpdateSession", Run: testUpdateSession},
		{Name: "DeleteSession", Run: testDeleteSession},
		{Name: "Expiry", Run: testExpiry},
		{Name: "SharedState", Run: testSharedState},
		{Name: "Fork", Run: testFork},
		{Name: "Watch", Run: testWatch},
		{Name: "Limits", Run: testLimits},
		{Name: "CompactionView", Run: testCompactionView},
		{Name: "CompactionIdempotent", Run: testCompactionIdempotent},
		{Name: "CompactionRecursive", Run: testCompactionRecursive},
		{Name: "CompactionBounds", Run: testCompactionBounds},
	}
	search := []suitetest.Case[*harness]{
		{Name: "SearchRanking", Run: testSearchRanking},
		{Name: "SearchFilters", Run: testSearchFilters},
		{Name: "SearchPaging", Run: testSearchPaging},
		{Name: "SearchDeletionAndExpiry", Run: testSearchDeletionAndExpiry},
		{Name: "SearchIsolation", Run: testSearchIsolation},
	}
	transfer := []suitetest.Case[*harness]{
		{Name: "Scan", Run: testScan},
		{Name: "Import", Run: testImport},
	}
	var first sessiondriver.Store = newStore(t)
	tests := core
	_, searches := first.(sessiondriver.Searcher)
	if searches {
		tests = append(tests, search...)
	} else {
		tests = append(tests, suitetest.Case[*harness]{Name: "SearchUnimplemented", Run: testSearchUnimplemented})
	}
	_, transfers := first.(sessiondriver.Transferer)
	if transfers {
		tests = append(tests, transfer...)
	}
	switch _, erases := first.(sessiondriver.Eraser); {
	case !erases:
		tests = append(tests, suitetest.Case[*harness]{Name: "DeleteUserUnimplemented", Run: testDeleteUserUnimplemented})
	case transfers && searches:
		// The erasure is checked on the store's own listings and search.
		tests = append(tests, suitetest.Case[*harness]{Name: "DeleteUser", Run: testDeleteUser})
	default:
		t.Fatalf("a store that erases users (sessiondriver.Eraser) must implement sessiondriver.Transferer and sessiondriver.Searcher too, which the suite checks the erasure with")
	}
	suitetest.Run(t, tests, func(t *testing.T) *harness {
		clock := suitetest.NewClock(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC), time.Microsecond)
		store := newStore(t)
		svc := sessions.NewService(store, sessions.Config{
			Now:               clock.Tick,
			WatchPollInterval: 50 * time.Millisecond,
			Limits: sessions.Limits{
				MaxEventBytes: 64 << 10,
				MaxStateBytes: 16 << 10,
				MaxReadBytes:  256 << 10,
			},
		})
		return &harness{svc: svc, store: store, clock: clock, ctx: t.Context(), fresh: func() sessiondriver.Store { return newStore(t) }}
	})
}

// transferStore is a store with the export and import primitives.
type transferStore interface {
	sessiondriver.Store
	sessiondriver.Transferer
}

type harness struct {
	svc   *sessions.Service
	store sessiondriver.Store
	clock *suitetest.Clock
	ctx   context.Context
	// fresh returns another empty store of the backend (an import's
	// target).
	fresh func() sessiondriver.Store
}

// transfer returns the store as a transferStore (the cases of that part
// run only on stores that are one).
func (h *harness) transfer() transferStore { return h.store.(transferStore) }

// testSearchUnimplemented: without the Searcher part, a search is
// Unimplemented, not an empty result.
func testSearchUnimplemented(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	h.append(t, s.Key, textEvent("e1", "user", "the lighthouse"))
	_, _, err := h.svc.SearchEvents(h.ctx, sessions.SearchEventsRequest{App: "app1", User: "u1", Query: "lighthouse"})
	wantKind(t, "SearchEvents on a store without Searcher", err, fault.Unimplemented)
}

// testDeleteUserUnimplemented: without the Eraser part, erasing a user is
// Unimplemented, and deletes nothing.
func testDeleteUserUnimplemented(t *testing.T, h *harness) {
	s := h.create(t, "app1", "ann", "s1", nil)
	_, err := h.svc.DeleteUser(h.ctx, "app1", "ann")
	wantKind(t, "DeleteUser on a store without Eraser", err, fault.Unimplemented)
	h.get(t, s.Key, sessions.GetSessionRequest{})
}

func (h *harness) create(t *testing.T, app, user, id string, state map[string]any) *sessiontype.Session {
	t.Helper()
	s, err := h.svc.CreateSession(h.ctx, sessions.CreateSessionRequest{App: app, User: user, ID: id, State: state})
	if err != nil {
		t.Fatalf("CreateSession(%s/%s/%s): %v", app, user, id, err)
	}
	return s
}

func (h *harness) append(t *testing.T, key sessiontype.Key, e *sessiontype.Event) *sessiontype.Event {
	t.Helper()
	got, err := h.svc.AppendEvent(h.ctx, key, e, nil)
	if err != nil {
		t.Fatalf("AppendEvent(%s, %q): %v", key.Name(), e.ID, err)
	}
	return got
}

func (h *harness) get(t *testing.T, key sessiontype.Key, r sessions.GetSessionRequest) (*sessiontype.Session, []*sessiontype.Event) {
	t.Helper()
	s, events, err := h.svc.GetSession(h.ctx, key, r)
	if err != nil {
		t.Fatalf("GetSession(%s): %v", key.Name(), err)
	}
	return s, events
}

// appendSpaced appends n user events e1, e2, ... to key, event i at base
// plus i steps, and returns base (1 January 2025).
func (h *harness) appendSpaced(t *testing.T, key sessiontype.Key, n int, step time.Duration) time.Time {
	t.Helper()
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 1; i <= n; i++ {
		e := textEvent(fmt.Sprint("e", i), "user", "m")
		e.Timestamp = base.Add(time.Duration(i) * step)
		h.append(t, key, e)
	}
	return base
}

func textEvent(id, author, text string) *sessiontype.Event {
	return &sessiontype.Event{
		ID:           id,
		InvocationID: "inv-" + id,
		Author:       author,
		Content:      &sessiontype.Content{Role: author, Parts: []sessiontype.Part{{Text: text}}},
	}
}

func deltaEvent(id string, delta map[string]any) *sessiontype.Event {
	e := textEvent(id, "agent", "set state")
	e.Actions.StateDelta = delta
	return e
}

func wantKind(t *testing.T, what string, err error, kind fault.Kind) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: got no error, want %v", what, kind)
	}
	if got := fault.KindOf(err); got != kind {
		t.Fatalf("%s: got error %q of kind %v, want kind %v", what, err, got, kind)
	}
}

func ids(events []*sessiontype.Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.ID)
	}
	return out
}

func seqs(events []*sessiontype.Event) []int64 {
	var out []int64
	for _, e := range events {
		out = append(out, e.Sequence)
	}
	return out
}

// ptr returns a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }
