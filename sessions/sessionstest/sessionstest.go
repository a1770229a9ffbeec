// Package sessionstest is the conformance suite of sessions.Store: every
// backend runs Run and must pass all of it. The suite drives a Store through
// sessions.Service, so it checks the whole contract a caller sees: names and
// isolation, idempotent appends, sequences, optimistic concurrency, scoped
// state, reads, listings, expiry, forks, watches, event search,
// compaction, the primitives of export and import, and the erasure of a
// user.
package sessionstest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/sessions"
)

// Clock is a settable clock for the suite's Service.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock at t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Tick moves the clock forward by one microsecond and returns the new time,
// so that consecutive writes get distinct, ordered times.
func (c *Clock) Tick() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Microsecond)
	return c.now
}

// NewStore returns an empty store for one test. The suite closes nothing:
// the function should register its own cleanup with t.Cleanup.
type NewStore func(t *testing.T) sessions.Store

// Run runs the conformance suite.
func Run(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h *harness)
	}{
		{"CreateWithCallerID", testCreateWithCallerID},
		{"CreateDuplicateIDInApp", testCreateDuplicateIDInApp},
		{"CreateServerIDs", testCreateServerIDs},
		{"CreateInitialStateScopes", testCreateInitialStateScopes},
		{"InvalidNames", testInvalidNames},
		{"Isolation", testIsolation},
		{"EventTimestamps", testEventTimestamps},
		{"KeepZeroTimestamp", testKeepZeroTimestamp},
		{"FindSession", testFindSession},
		{"AppendAssignsIDsAndSequences", testAppendAssignsIDsAndSequences},
		{"AppendIdempotent", testAppendIdempotent},
		{"AppendSameIDOtherContent", testAppendSameIDOtherContent},
		{"ExpectedSequence", testExpectedSequence},
		{"ConcurrentAppends", testConcurrentAppends},
		{"PartialNotPersisted", testPartialNotPersisted},
		{"StateScopes", testStateScopes},
		{"StateReplaceAndDelete", testStateReplaceAndDelete},
		{"TempStateNeverStored", testTempStateNeverStored},
		{"AppendAtomicOnLimit", testAppendAtomicOnLimit},
		{"EventRoundTrip", testEventRoundTrip},
		{"GetRecentAndAfter", testGetRecentAndAfter},
		{"ListEventsPaging", testListEventsPaging},
		{"ReadBudget", testReadBudget},
		{"ListSessionsPagingAndOrder", testListSessionsPagingAndOrder},
		{"ListSessionsFilter", testListSessionsFilter},
		{"ListSessionsOrderBy", testListSessionsOrderBy},
		{"UpdateSession", testUpdateSession},
		{"DeleteSession", testDeleteSession},
		{"Expiry", testExpiry},
		{"SharedState", testSharedState},
		{"Fork", testFork},
		{"Watch", testWatch},
		{"Limits", testLimits},
		{"SearchRanking", testSearchRanking},
		{"SearchFilters", testSearchFilters},
		{"SearchPaging", testSearchPaging},
		{"SearchDeletionAndExpiry", testSearchDeletionAndExpiry},
		{"SearchIsolation", testSearchIsolation},
		{"CompactionView", testCompactionView},
		{"CompactionIdempotent", testCompactionIdempotent},
		{"CompactionRecursive", testCompactionRecursive},
		{"CompactionBounds", testCompactionBounds},
		{"Scan", testScan},
		{"Import", testImport},
		{"DeleteUser", testDeleteUser},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := NewClock(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
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
			tc.fn(t, &harness{svc: svc, store: store, clock: clock, ctx: t.Context(), fresh: func() sessions.Store { return newStore(t) }})
		})
	}
}

type harness struct {
	svc   *sessions.Service
	store sessions.Store
	clock *Clock
	ctx   context.Context
	// fresh returns another empty store of the backend (an import's
	// target).
	fresh func() sessions.Store
}

func (h *harness) create(t *testing.T, app, user, id string, state map[string]any) *sessions.Session {
	t.Helper()
	s, err := h.svc.CreateSession(h.ctx, sessions.CreateSessionRequest{App: app, User: user, ID: id, State: state})
	if err != nil {
		t.Fatalf("CreateSession(%s/%s/%s): %v", app, user, id, err)
	}
	return s
}

func (h *harness) append(t *testing.T, key sessions.Key, e *sessions.Event) *sessions.Event {
	t.Helper()
	got, err := h.svc.AppendEvent(h.ctx, key, e, nil)
	if err != nil {
		t.Fatalf("AppendEvent(%s, %q): %v", key.Name(), e.ID, err)
	}
	return got
}

func (h *harness) get(t *testing.T, key sessions.Key, r sessions.GetSessionRequest) (*sessions.Session, []*sessions.Event) {
	t.Helper()
	s, events, err := h.svc.GetSession(h.ctx, key, r)
	if err != nil {
		t.Fatalf("GetSession(%s): %v", key.Name(), err)
	}
	return s, events
}

func textEvent(id, author, text string) *sessions.Event {
	return &sessions.Event{
		ID:           id,
		InvocationID: "inv-" + id,
		Author:       author,
		Content:      &sessions.Content{Role: author, Parts: []sessions.Part{{Text: text}}},
	}
}

func deltaEvent(id string, delta map[string]any) *sessions.Event {
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

func ids(events []*sessions.Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.ID)
	}
	return out
}

func seqs(events []*sessions.Event) []int64 {
	var out []int64
	for _, e := range events {
		out = append(out, e.Sequence)
	}
	return out
}

func testCreateWithCallerID(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	if s.Key != (sessions.Key{App: "app1", User: "u1", ID: "s1"}) {
		t.Fatalf("created key = %+v", s.Key)
	}
	if s.CreateTime.IsZero() || s.UpdateTime.IsZero() || s.LastSequence != 0 {
		t.Fatalf("created session times/sequence = %v %v %d", s.CreateTime, s.UpdateTime, s.LastSequence)
	}
	got, events := h.get(t, s.Key, sessions.GetSessionRequest{})
	if got.ID != "s1" || len(events) != 0 {
		t.Fatalf("GetSession = %+v with %d events", got, len(events))
	}
}

func testCreateDuplicateIDInApp(t *testing.T, h *harness) {
	h.create(t, "app1", "u1", "dup", nil)
	_, err := h.svc.CreateSession(h.ctx, sessions.CreateSessionRequest{App: "app1", User: "u1", ID: "dup"})
	wantKind(t, "same user, same id", err, fault.AlreadyExists)
	_, err = h.svc.CreateSession(h.ctx, sessions.CreateSessionRequest{App: "app1", User: "u2", ID: "dup"})
	wantKind(t, "other user, same id", err, fault.AlreadyExists)
	// Another app is another namespace.
	h.create(t, "app2", "u1", "dup", nil)
	// The original is untouched.
	got, _ := h.get(t, sessions.Key{App: "app1", User: "u1", ID: "dup"}, sessions.GetSessionRequest{})
	if got.User != "u1" {
		t.Fatalf("original session's user = %q", got.User)
	}
}

func testCreateServerIDs(t *testing.T, h *harness) {
	seen := map[string]bool{}
	for range 20 {
		s := h.create(t, "app1", "u1", "", nil)
		if seen[s.ID] {
			t.Fatalf("server-chosen id %q repeated", s.ID)
		}
		seen[s.ID] = true
		if len(s.ID) < 16 {
			t.Fatalf("server-chosen id %q is too short to be random", s.ID)
		}
		for _, c := range s.ID {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				t.Fatalf("server-chosen id %q is not URL-safe", s.ID)
			}
		}
		if err := aip.ValidateID("session id", s.ID, aip.SessionIDChars); err != nil {
			t.Fatalf("server-chosen id %q is not a valid id: %v", s.ID, err)
		}
	}
}

func testCreateInitialStateScopes(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", map[string]any{
		"k": "session", "user:k": "user", "app:k": "app", "temp:k": "temp",
	})
	want := map[string]any{"k": "session", "user:k": "user", "app:k": "app"}
	if diff := cmp.Diff(want, s.State); diff != "" {
		t.Fatalf("created state (-want +got):\n%s", diff)
	}
	other := h.create(t, "app1", "u1", "s2", nil)
	if diff := cmp.Diff(map[string]any{"user:k": "user", "app:k": "app"}, other.State); diff != "" {
		t.Fatalf("same user's other session state (-want +got):\n%s", diff)
	}
	stranger := h.create(t, "app1", "u2", "s3", nil)
	if diff := cmp.Diff(map[string]any{"app:k": "app"}, stranger.State); diff != "" {
		t.Fatalf("other user's session state (-want +got):\n%s", diff)
	}
}

func testInvalidNames(t *testing.T, h *harness) {
	for _, k := range []sessions.Key{
		{App: "", User: "u", ID: "s"},
		{App: "a/b", User: "u", ID: "s"},
		{App: "a", User: "", ID: "s"},
		{App: "a", User: "u", ID: "bad id"},
		{App: "a", User: "u", ID: ".."},
		{App: "a", User: "u", ID: "__x__"},
		{App: "a", User: "u", ID: strings.Repeat("x", aip.MaxIDBytes+1)},
		{App: "a", User: "u\xff", ID: "s"},
	} {
		_, err := h.svc.CreateSession(h.ctx, sessions.CreateSessionRequest{App: k.App, User: k.User, ID: k.ID})
		wantKind(t, fmt.Sprintf("CreateSession(%q)", k), err, fault.Invalid)
		_, _, err = h.svc.GetSession(h.ctx, k, sessions.GetSessionRequest{})
		wantKind(t, fmt.Sprintf("GetSession(%q)", k), err, fault.Invalid)
	}
	_, err := h.svc.AppendEvent(h.ctx, sessions.Key{App: "a", User: "u", ID: "s"}, &sessions.Event{ID: "no spaces"}, nil)
	wantKind(t, "event id with a space", err, fault.Invalid)
}

func testIsolation(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	h.append(t, s.Key, textEvent("e1", "user", "secret"))
	for _, k := range []sessions.Key{
		{App: "app1", User: "u2", ID: "s1"},
		{App: "app2", User: "u1", ID: "s1"},
	} {
		_, _, err := h.svc.GetSession(h.ctx, k, sessions.GetSessionRequest{})
		wantKind(t, "GetSession "+k.Name(), err, fault.NotFound)
		if strings.Contains(err.Error(), "u1") && k.User != "u1" {
			t.Fatalf("error %q hints at the owner", err)
		}
		_, err = h.svc.AppendEvent(h.ctx, k, textEvent("e2", "user", "x"), nil)
		wantKind(t, "AppendEvent "+k.Name(), err, fault.NotFound)
		_, _, err = h.svc.ListEvents(h.ctx, k, sessions.ListEventsRequest{})
		wantKind(t, "ListEvents "+k.Name(), err, fault.NotFound)
		_, err = h.svc.UpdateSession(h.ctx, k, sessions.UpdateSessionRequest{DisplayName: ptr("x")})
		wantKind(t, "UpdateSession "+k.Name(), err, fault.NotFound)
		_, err = h.svc.ForkSession(h.ctx, k, sessions.ForkSessionRequest{})
		wantKind(t, "ForkSession "+k.Name(), err, fault.NotFound)
		err = h.svc.DeleteSession(h.ctx, k)
		wantKind(t, "DeleteSession "+k.Name(), err, fault.NotFound)
	}
	list, _, err := h.svc.ListSessions(h.ctx, sessions.ListSessionsRequest{App: "app1", User: "u2"})
	if err != nil || len(list) != 0 {
		t.Fatalf("ListSessions of another user = %v, %v", list, err)
	}
	// Still intact for its owner.
	_, events := h.get(t, s.Key, sessions.GetSessionRequest{})
	if len(events) != 1 {
		t.Fatalf("owner sees %d events, want 1", len(events))
	}
}

func ptr[T any](v T) *T { return &v }

func testEventTimestamps(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	callerTime := time.Date(2020, 5, 6, 7, 8, 9, 123456789, time.UTC)
	e := textEvent("e1", "user", "hi")
	e.Timestamp = callerTime
	got := h.append(t, s.Key, e)
	if !got.Timestamp.Equal(callerTime) {
		t.Fatalf("stored timestamp = %v, want the caller's %v", got.Timestamp, callerTime)
	}
	before := h.clock.Now()
	got2 := h.append(t, s.Key, textEvent("e2", "user", "hi again"))
	if got2.Timestamp.Before(before) || got2.Timestamp.After(h.clock.Now()) {
		t.Fatalf("server timestamp %v not within [%v, %v]", got2.Timestamp, before, h.clock.Now())
	}
	// after_time filters on the event timestamp, inclusively.
	_, events := h.get(t, s.Key, sessions.GetSessionRequest{After: callerTime})
	if diff := cmp.Diff([]string{"e1", "e2"}, ids(events)); diff != "" {
		t.Fatalf("after = caller time (-want +got):\n%s", diff)
	}
	_, events = h.get(t, s.Key, sessions.GetSessionRequest{After: callerTime.Add(time.Nanosecond)})
	if diff := cmp.Diff([]string{"e2"}, ids(events)); diff != "" {
		t.Fatalf("after = caller time + 1ns (-want +got):\n%s", diff)
	}
}

func testKeepZeroTimestamp(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	e := textEvent("e1", "user", "hi")
	e.KeepZeroTimestamp = true
	if got := h.append(t, s.Key, e); !got.Timestamp.IsZero() {
		t.Fatalf("stored timestamp = %v, want the zero time kept", got.Timestamp)
	}
	h.append(t, s.Key, textEvent("e2", "user", "later"))
	_, events := h.get(t, s.Key, sessions.GetSessionRequest{})
	if len(events) != 2 || !events[0].Timestamp.IsZero() || events[1].Timestamp.IsZero() {
		t.Fatalf("events = %v, want e1 at the zero time and e2 at the server's", events)
	}
	// A time filter leaves the zero-time event out.
	_, events = h.get(t, s.Key, sessions.GetSessionRequest{After: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)})
	if diff := cmp.Diff([]string{"e2"}, ids(events)); diff != "" {
		t.Fatalf("after 2000 (-want +got):\n%s", diff)
	}
	// A retry with the zero time is the same event.
	retry := textEvent("e1", "user", "hi")
	retry.KeepZeroTimestamp = true
	if got := h.append(t, s.Key, retry); got.Sequence != 1 {
		t.Fatalf("retry stored again at sequence %d", got.Sequence)
	}
}

func testFindSession(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	h.create(t, "app2", "u2", "s1", nil)
	got, err := h.svc.FindSession(h.ctx, "app1", "s1")
	if err != nil || got != s.Key {
		t.Fatalf("FindSession(app1, s1) = %v, %v; want %v", got, err, s.Key)
	}
	if got, err := h.svc.FindSession(h.ctx, "app2", "s1"); err != nil || got.User != "u2" {
		t.Fatalf("FindSession(app2, s1) = %v, %v; want user u2", got, err)
	}
	for _, id := range []string{"absent", "s2"} {
		if _, err := h.svc.FindSession(h.ctx, "app1", id); !fault.Is(err, fault.NotFound) {
			t.Fatalf("FindSession(app1, %s) error = %v, want NotFound", id, err)
		}
	}
	if _, err := h.svc.FindSession(h.ctx, "app1", "no spaces"); !fault.Is(err, fault.Invalid) {
		t.Fatalf("FindSession with a bad id: error = %v, want Invalid", err)
	}
	exp, err := h.svc.CreateSession(h.ctx, sessions.CreateSessionRequest{App: "app1", User: "u1", ID: "brief", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(2 * time.Minute)
	if _, err := h.svc.FindSession(h.ctx, "app1", exp.ID); !fault.Is(err, fault.NotFound) {
		t.Fatalf("FindSession of an expired session: error = %v, want NotFound", err)
	}
	if err := h.svc.DeleteSession(h.ctx, s.Key); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.FindSession(h.ctx, "app1", "s1"); !fault.Is(err, fault.NotFound) {
		t.Fatalf("FindSession of a deleted session: error = %v, want NotFound", err)
	}
}

func testAppendAssignsIDsAndSequences(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	var got []*sessions.Event
	for i := range 5 {
		e := textEvent("", "user", fmt.Sprint("m", i))
		e.Sequence = 99 // ignored
		got = append(got, h.append(t, s.Key, e))
	}
	seen := map[string]bool{}
	for i, e := range got {
		if e.ID == "" || seen[e.ID] {
			t.Fatalf("event %d has id %q (empty or repeated)", i, e.ID)
		}
		seen[e.ID] = true
		if e.Sequence != int64(i+1) {
			t.Fatalf("event %d has sequence %d, want %d", i, e.Sequence, i+1)
		}
	}
	sess, events := h.get(t, s.Key, sessions.GetSessionRequest{})
	if sess.LastSequence != 5 {
		t.Fatalf("LastSequence = %d, want 5", sess.LastSequence)
	}
	if diff := cmp.Diff([]int64{1, 2, 3, 4, 5}, seqs(events)); diff != "" {
		t.Fatalf("sequences (-want +got):\n%s", diff)
	}
}

func testAppendIdempotent(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	e := deltaEvent("e1", map[string]any{"count": 1.0, "user:seen": true})
	first := h.append(t, s.Key, e)
	h.append(t, s.Key, deltaEvent("e2", map[string]any{"count": 2.0}))
	retry := h.append(t, s.Key, deltaEvent("e1", map[string]any{"count": 1.0, "user:seen": true}))
	if retry.Sequence != first.Sequence || !retry.Timestamp.Equal(first.Timestamp) {
		t.Fatalf("retry returned sequence %d at %v, want the stored %d at %v", retry.Sequence, retry.Timestamp, first.Sequence, first.Timestamp)
	}
	sess, events := h.get(t, s.Key, sessions.GetSessionRequest{})
	if len(events) != 2 || sess.LastSequence != 2 {
		t.Fatalf("after retry: %d events, last sequence %d; want 2, 2", len(events), sess.LastSequence)
	}
	if sess.State["count"] != 2.0 {
		t.Fatalf("retry re-applied its delta: count = %v, want 2", sess.State["count"])
	}
	// A retry with the caller's timestamp equal to the stored one is still a retry.
	withTime := deltaEvent("e1", map[string]any{"count": 1.0, "user:seen": true})
	withTime.Timestamp = first.Timestamp
	if got := h.append(t, s.Key, withTime); got.Sequence != 1 {
		t.Fatalf("retry with the same timestamp got sequence %d", got.Sequence)
	}
}

func testAppendSameIDOtherContent(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	h.append(t, s.Key, textEvent("e1", "user", "hello"))
	_, err := h.svc.AppendEvent(h.ctx, s.Key, textEvent("e1", "user", "goodbye"), nil)
	wantKind(t, "same id, other text", err, fault.AlreadyExists)
	other := textEvent("e1", "user", "hello")
	other.Timestamp = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err = h.svc.AppendEvent(h.ctx, s.Key, other, nil)
	wantKind(t, "same id, other timestamp", err, fault.AlreadyExists)
	_, events := h.get(t, s.Key, sessions.GetSessionRequest{})
	if len(events) != 1 || events[0].Content.Text() != "hello" {
		t.Fatalf("stored events after conflicting retries = %v", ids(events))
	}
}

func testExpectedSequence(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	if _, err := h.svc.AppendEvent(h.ctx, s.Key, deltaEvent("e1", map[string]any{"k": "one"}), ptr(int64(0))); err != nil {
		t.Fatalf("append at expected 0: %v", err)
	}
	_, err := h.svc.AppendEvent(h.ctx, s.Key, deltaEvent("e2", map[string]any{"k": "stale", "app:k": "stale"}), ptr(int64(0)))
	wantKind(t, "stale expected_sequence", err, fault.FailedPrecondition)
	sess, events := h.get(t, s.Key, sessions.GetSessionRequest{})
	if len(events) != 1 || sess.State["k"] != "one" || sess.State["app:k"] != nil {
		t.Fatalf("stale append wrote something: events %v, state %v", ids(events), sess.State)
	}
	got, err := h.svc.AppendEvent(h.ctx, s.Key, deltaEvent("e2", map[string]any{"k": "two"}), ptr(int64(1)))
	if err != nil || got.Sequence != 2 {
		t.Fatalf("append at expected 1 = %v, %v", got, err)
	}
	// An idempotent retry of an applied append is not stale.
	if _, err := h.svc.AppendEvent(h.ctx, s.Key, deltaEvent("e2", map[string]any{"k": "two"}), ptr(int64(1))); err != nil {
		t.Fatalf("retry of an applied append with its expected_sequence: %v", err)
	}
}

func testConcurrentAppends(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	other := h.create(t, "app1", "u2", "s2", nil)
	const workers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := fmt.Sprintf("w%d-%d", w, i)
				key := s.Key
				if i%5 == 0 {
					key = other.Key
				}
				_, err := h.svc.AppendEvent(h.ctx, key, deltaEvent(id, map[string]any{"last": id, "app:last": id, "user:n": float64(i)}), nil)
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent append: %v", err)
	}
	total := 0
	for _, key := range []sessions.Key{s.Key, other.Key} {
		sess, events := h.get(t, key, sessions.GetSessionRequest{})
		total += len(events)
		for i, e := range events {
			if e.Sequence != int64(i+1) {
				t.Fatalf("%s: event %d has sequence %d; sequences must be contiguous", key.ID, i, e.Sequence)
			}
		}
		if n := len(events); n > 0 {
			if sess.State["last"] != events[n-1].ID {
				t.Fatalf("%s: state last = %v, want the last event's id %s (deltas apply in sequence order)", key.ID, sess.State["last"], events[n-1].ID)
			}
		}
	}
	if total != workers*each {
		t.Fatalf("stored %d events, want %d", total, workers*each)
	}
}

func testPartialNotPersisted(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	p := deltaEvent("p1", map[string]any{"k": "partial"})
	p.Partial = true
	got := h.append(t, s.Key, p)
	if got.Sequence != 0 {
		t.Fatalf("partial event got sequence %d", got.Sequence)
	}
	sess, events := h.get(t, s.Key, sessions.GetSessionRequest{})
	if len(events) != 0 || sess.State["k"] != nil {
		t.Fatalf("partial event stored: events %v, state %v", ids(events), sess.State)
	}
}

func testStateScopes(t *testing.T, h *harness) {
	a := h.create(t, "app1", "u1", "a", nil)
	h.append(t, a.Key, deltaEvent("e1", map[string]any{"s": 1.0, "user:u": 2.0, "app:a": 3.0}))
	b := h.create(t, "app1", "u1", "b", nil)
	c := h.create(t, "app1", "u2", "c", nil)
	d := h.create(t, "app2", "u1", "d", nil)
	for _, tc := range []struct {
		key  sessions.Key
		want map[string]any
	}{
		{a.Key, map[string]any{"s": 1.0, "user:u": 2.0, "app:a": 3.0}},
		{b.Key, map[string]any{"user:u": 2.0, "app:a": 3.0}},
		{c.Key, map[string]any{"app:a": 3.0}},
		{d.Key, map[string]any{}},
	} {
		got, _ := h.get(t, tc.key, sessions.GetSessionRequest{})
		if diff := cmp.Diff(tc.want, got.State); diff != "" {
			t.Errorf("state of %s (-want +got):\n%s", tc.key.Name(), diff)
		}
	}
	// The stored event keeps its (non-temp) delta as written.
	_, events := h.get(t, a.Key, sessions.GetSessionRequest{})
	if diff := cmp.Diff(map[string]any{"s": 1.0, "user:u": 2.0, "app:a": 3.0}, events[0].Actions.StateDelta); diff != "" {
		t.Errorf("stored delta (-want +got):\n%s", diff)
	}
}

func testStateReplaceAndDelete(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", map[string]any{
		"obj": map[string]any{"a": 1.0, "b": 2.0}, "gone": "x", "user:gone": "y", "app:gone": "z",
	})
	h.append(t, s.Key, deltaEvent("e1", map[string]any{
		"obj": map[string]any{"c": 3.0}, "gone": nil, "user:gone": nil, "app:gone": nil, "list": []any{1.0, "two"},
	}))
	got, _ := h.get(t, s.Key, sessions.GetSessionRequest{})
	want := map[string]any{"obj": map[string]any{"c": 3.0}, "list": []any{1.0, "two"}}
	if diff := cmp.Diff(want, got.State); diff != "" {
		t.Fatalf("state after replace/delete (-want +got):\n%s", diff)
	}
}

func testTempStateNeverStored(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", map[string]any{"temp:init": 1.0})
	got := h.append(t, s.Key, deltaEvent("e1", map[string]any{"temp:scratch": "x", "kept": "y"}))
	if _, ok := got.Actions.StateDelta["temp:scratch"]; ok {
		t.Fatalf("returned event keeps a temp key: %v", got.Actions.StateDelta)
	}
	h.append(t, s.Key, deltaEvent("e2", map[string]any{"temp:only": "z"}))
	sess, events := h.get(t, s.Key, sessions.GetSessionRequest{})
	for k := range sess.State {
		if strings.HasPrefix(k, "temp:") {
			t.Fatalf("temp key %q returned by a later read", k)
		}
	}
	for _, e := range events {
		for k := range e.Actions.StateDelta {
			if strings.HasPrefix(k, "temp:") {
				t.Fatalf("stored event %s keeps temp key %q", e.ID, k)
			}
		}
	}
	if sess.State["kept"] != "y" || len(events) != 2 {
		t.Fatalf("state %v, %d events", sess.State, len(events))
	}
}

func testAppendAtomicOnLimit(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", map[string]any{"k": "before"})
	big := strings.Repeat("x", 20<<10) // over the suite's 16 KiB state limit
	_, err := h.svc.AppendEvent(h.ctx, s.Key, deltaEvent("e1", map[string]any{"k": "after", "user:k": "after", "app:big": big[:10<<10], "app:big2": big[:10<<10]}), nil)
	wantKind(t, "append overflowing app state", err, fault.ResourceExhausted)
	if !strings.Contains(err.Error(), "limit") {
		t.Fatalf("error %q does not name the limit", err)
	}
	sess, events := h.get(t, s.Key, sessions.GetSessionRequest{})
	if len(events) != 0 || sess.LastSequence != 0 || sess.State["k"] != "before" || sess.State["user:k"] != nil {
		t.Fatalf("failed append left changes: events %v, last %d, state %v", ids(events), sess.LastSequence, sess.State)
	}
	// The session works afterwards.
	if got := h.append(t, s.Key, deltaEvent("e1", map[string]any{"k": "after"})); got.Sequence != 1 {
		t.Fatalf("append after failure got sequence %d", got.Sequence)
	}
}

func testEventRoundTrip(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	e := &sessions.Event{
		ID:           "full",
		InvocationID: "inv1",
		Author:       "model",
		Content: &sessions.Content{Role: "model", Parts: []sessions.Part{
			{Text: "thinking", Thought: true, ThoughtSignature: []byte{1, 2, 3}},
			{InlineData: &sessions.Blob{MIMEType: "image/png", Data: []byte("png-bytes"), DisplayName: "pic"}},
			{FileData: &sessions.FileData{MIMEType: "application/pdf", FileURI: "gs://b/f.pdf"}},
			{FunctionCall: &sessions.FunctionCall{ID: "c1", Name: "lookup", Args: map[string]any{"q": "tea", "n": 3.0}}},
			{FunctionResponse: &sessions.FunctionResponse{ID: "c1", Name: "lookup", Response: map[string]any{"ok": true}}},
			{Extensions: map[string]any{"executableCode": map[string]any{"code": "print(1)"}}},
		}},
		Actions: sessions.Actions{
			StateDelta:        map[string]any{"k": "v"},
			ArtifactDelta:     map[string]int64{"f.txt": 2},
			TransferToAgent:   "helper",
			Escalate:          true,
			SkipSummarization: true,
		},
		Timestamp:          time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC),
		TurnComplete:       true,
		ErrorCode:          "E1",
		ErrorMessage:       "boom",
		CustomMetadata:     map[string]any{"x": "y"},
		Branch:             "root.child",
		Interrupted:        true,
		LongRunningToolIDs: []string{"c1"},
		UsageMetadata:      map[string]any{"totalTokenCount": 12.0},
		GroundingMetadata:  map[string]any{"webSearchQueries": []any{"q"}},
		CitationMetadata:   map[string]any{"citations": []any{map[string]any{"uri": "https://x"}}},
		FinishReason:       "STOP",
		ModelVersion:       "m-1",
		Extensions:         map[string]any{"routes": []any{"a"}},
	}
	stored := h.append(t, s.Key, e)
	_, events := h.get(t, s.Key, sessions.GetSessionRequest{})
	want := *e
	want.Sequence = 1
	// Its size is that of the encoding stored before it had a sequence.
	if want.Size = len(mustMarshal(t, e)); want.Size == 0 || stored.Size != want.Size {
		t.Errorf("stored size %d, want the size of its encoding, %d", stored.Size, want.Size)
	}
	if diff := cmp.Diff(&want, stored); diff != "" {
		t.Fatalf("returned event (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&want, events[0]); diff != "" {
		t.Fatalf("read event (-want +got):\n%s", diff)
	}
}

func testGetRecentAndAfter(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 1; i <= 10; i++ {
		e := textEvent(fmt.Sprint("e", i), "user", "m")
		e.Timestamp = base.Add(time.Duration(i) * time.Second)
		h.append(t, s.Key, e)
	}
	for _, tc := range []struct {
		r    sessions.GetSessionRequest
		want []int64
	}{
		{sessions.GetSessionRequest{NumRecentEvents: 3}, []int64{8, 9, 10}},
		{sessions.GetSessionRequest{NumRecentEvents: 20}, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{sessions.GetSessionRequest{After: base.Add(8 * time.Second)}, []int64{8, 9, 10}},
		{sessions.GetSessionRequest{After: base.Add(5 * time.Second), NumRecentEvents: 2}, []int64{9, 10}},
		{sessions.GetSessionRequest{After: base.Add(11 * time.Second)}, nil},
		{sessions.GetSessionRequest{SkipEvents: true}, nil},
	} {
		_, events := h.get(t, s.Key, tc.r)
		if diff := cmp.Diff(tc.want, seqs(events)); diff != "" {
			t.Errorf("GetSession(%+v) sequences (-want +got):\n%s", tc.r, diff)
		}
	}
	_, _, err := h.svc.GetSession(h.ctx, s.Key, sessions.GetSessionRequest{NumRecentEvents: -1})
	wantKind(t, "negative num_recent_events", err, fault.Invalid)
}

// testReadBudget: a read returns at most MaxReadBytes of events (and the
// event that passes it): GetSession fails beyond it, pointing to ListEvents;
// ListEvents pages end early at it and page on to the last event, with no
// token after it; a listing with state has pages of at most 32 sessions.
func testReadBudget(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	big := func(i int) *sessions.Event {
		return textEvent(fmt.Sprint("e", i), "user", strings.Repeat(fmt.Sprint(i%10), 60<<10))
	}
	collect := func(r sessions.ListEventsRequest) ([]int64, int) {
		t.Helper()
		var all []int64
		for pages := 1; ; pages++ {
			page, next, err := h.svc.ListEvents(h.ctx, s.Key, r)
			if err != nil || pages > 20 {
				t.Fatalf("ListEvents(%+v): %v (page %d)", r, err, pages)
			}
			if n := size(page); n > (256+64)<<10 {
				t.Fatalf("a page of %d bytes; the budget is 256 KiB and one event", n)
			}
			all = append(all, seqs(page)...)
			if next == "" {
				return all, pages
			}
			r.PageToken = next
		}
	}
	for i := 1; i <= 5; i++ {
		h.append(t, s.Key, big(i))
	}
	// Five events of 60 KiB: the fifth passes the budget and ends the
	// page, and nothing follows it.
	if got, pages := collect(sessions.ListEventsRequest{PageSize: 100}); !slices.Equal(got, []int64{1, 2, 3, 4, 5}) || pages != 1 {
		t.Errorf("five events: %v in %d pages, want all in one with no next token", got, pages)
	}
	for i := 6; i <= 12; i++ {
		h.append(t, s.Key, big(i))
	}
	all := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	if got, pages := collect(sessions.ListEventsRequest{PageSize: 100}); !slices.Equal(got, all) || pages != 3 {
		t.Errorf("ascending: %v in %d pages, want every event in 3", got, pages)
	}
	if got, _ := collect(sessions.ListEventsRequest{PageSize: 100, Descending: true}); !slices.Equal(got, []int64{12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1}) {
		t.Errorf("descending: %v", got)
	}
	if got, pages := collect(sessions.ListEventsRequest{PageSize: 2}); !slices.Equal(got, all) || pages != 6 {
		t.Errorf("pages of 2: %v in %d pages", got, pages)
	}

	_, _, err := h.svc.GetSession(h.ctx, s.Key, sessions.GetSessionRequest{})
	wantKind(t, "GetSession of 720 KiB of events", err, fault.FailedPrecondition)
	if err == nil || !strings.Contains(err.Error(), "ListEvents") || !strings.Contains(err.Error(), "num_recent_events") {
		t.Errorf("GetSession over the budget: %v; want it to point to ListEvents and num_recent_events", err)
	}
	if _, events := h.get(t, s.Key, sessions.GetSessionRequest{NumRecentEvents: 3}); !slices.Equal(seqs(events), []int64{10, 11, 12}) {
		t.Errorf("the 3 most recent: %v", seqs(events))
	}
	if _, events := h.get(t, s.Key, sessions.GetSessionRequest{SkipEvents: true}); len(events) != 0 {
		t.Errorf("skip_events returned %d events", len(events))
	}
	_, _, err = h.svc.GetSession(h.ctx, s.Key, sessions.GetSessionRequest{NumRecentEvents: 8})
	wantKind(t, "8 recent events of 480 KiB", err, fault.FailedPrecondition)

	for i := range 34 {
		h.create(t, "app1", "u2", fmt.Sprint("listed", i), map[string]any{"k": i})
	}
	// A listing with states holds as many sessions as the page size asks
	// while their states stay within the read budget...
	page, next, err := h.svc.ListSessions(h.ctx, sessions.ListSessionsRequest{App: "app1", User: "u2", PageSize: 100, IncludeState: true})
	if err != nil || len(page) != 34 || next != "" {
		t.Errorf("a listing with state: %d sessions, next %q, %v; want all 34 and no next page", len(page), next, err)
	}
	if page, _, err := h.svc.ListSessions(h.ctx, sessions.ListSessionsRequest{App: "app1", User: "u2", PageSize: 100}); err != nil || len(page) != 34 {
		t.Errorf("a listing without state: %d sessions, %v; want all 34", len(page), err)
	}
	// ...and a page ends early at MaxReadBytes (256 KiB here) of states,
	// with a token that lists the rest.
	for i := range 40 {
		h.create(t, "app1", "u3", fmt.Sprint("heavy", i), map[string]any{"blob": strings.Repeat("x", 15<<10)})
	}
	seen := map[string]bool{}
	token := ""
	for pages := 1; ; pages++ {
		page, next, err := h.svc.ListSessions(h.ctx, sessions.ListSessionsRequest{App: "app1", User: "u3", PageSize: 100, PageToken: token, IncludeState: true})
		if err != nil || pages > 10 {
			t.Fatalf("ListSessions with states, page %d: %v", pages, err)
		}
		bytes := 0
		for _, s := range page {
			seen[s.ID] = true
			if len(s.State["blob"].(string)) != 15<<10 {
				t.Fatalf("session %s listed without its state", s.ID)
			}
			bytes += 15 << 10
		}
		if bytes > (256+16)<<10 {
			t.Errorf("page %d holds %d bytes of states; the budget is 256 KiB and one state", pages, bytes)
		}
		if next == "" {
			if pages < 2 {
				t.Errorf("600 KiB of states came in one page")
			}
			break
		}
		token = next
	}
	if len(seen) != 40 {
		t.Errorf("the pages held %d sessions, want 40", len(seen))
	}
}

func mustMarshal(t *testing.T, e *sessions.Event) []byte {
	t.Helper()
	b, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// size returns the stored size of events.
func size(events []*sessions.Event) int {
	n := 0
	for _, e := range events {
		n += e.Size
	}
	return n
}

func testListEventsPaging(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 1; i <= 25; i++ {
		e := textEvent(fmt.Sprint("e", i), "user", "m")
		e.Timestamp = base.Add(time.Duration(i) * time.Minute)
		h.append(t, s.Key, e)
	}
	collect := func(r sessions.ListEventsRequest) []int64 {
		t.Helper()
		var all []int64
		for pages := 0; ; pages++ {
			if pages > 30 {
				t.Fatalf("paging does not end")
			}
			page, next, err := h.svc.ListEvents(h.ctx, s.Key, r)
			if err != nil {
				t.Fatalf("ListEvents(%+v): %v", r, err)
			}
			if len(page) > int(r.PageSize) {
				t.Fatalf("page of %d events, page size %d", len(page), r.PageSize)
			}
			all = append(all, seqs(page)...)
			if next == "" {
				return all
			}
			r.PageToken = next
		}
	}
	var asc, desc []int64
	for i := int64(1); i <= 25; i++ {
		asc = append(asc, i)
		desc = append(desc, 26-i)
	}
	if diff := cmp.Diff(asc, collect(sessions.ListEventsRequest{PageSize: 10})); diff != "" {
		t.Errorf("ascending (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(desc, collect(sessions.ListEventsRequest{PageSize: 7, Descending: true})); diff != "" {
		t.Errorf("descending (-want +got):\n%s", diff)
	}
	ranged := collect(sessions.ListEventsRequest{PageSize: 4, From: base.Add(10 * time.Minute), To: base.Add(15 * time.Minute)})
	if diff := cmp.Diff([]int64{10, 11, 12, 13, 14}, ranged); diff != "" {
		t.Errorf("time range [10m, 15m) (-want +got):\n%s", diff)
	}
	_, next, _ := h.svc.ListEvents(h.ctx, s.Key, sessions.ListEventsRequest{PageSize: 5})
	_, _, err := h.svc.ListEvents(h.ctx, s.Key, sessions.ListEventsRequest{PageSize: 5, PageToken: next, Descending: true})
	wantKind(t, "page token reused with other parameters", err, fault.Invalid)
	_, _, err = h.svc.ListEvents(h.ctx, s.Key, sessions.ListEventsRequest{PageToken: "garbage!"})
	wantKind(t, "malformed page token", err, fault.Invalid)
}

// testListSessionsOrderBy: every order a listing takes, over pages of 2,
// for a user and for the app, and a page token bound to its order.
func testListSessionsOrderBy(t *testing.T, h *harness) {
	for i := range 5 {
		user := "u1"
		if i == 2 {
			user = "u2"
		}
		h.create(t, "app1", user, fmt.Sprintf("s%d", i), nil)
	}
	// s1, then s3, are updated last: update order s3 s1 s4 s2 s0.
	h.append(t, sessions.Key{App: "app1", User: "u1", ID: "s1"}, textEvent("e1", "user", "m"))
	h.append(t, sessions.Key{App: "app1", User: "u1", ID: "s3"}, textEvent("e1", "user", "m"))
	list := func(user, order string) []string {
		t.Helper()
		var all []string
		token := ""
		for {
			page, next, err := h.svc.ListSessions(h.ctx, sessions.ListSessionsRequest{App: "app1", User: user, PageSize: 2, PageToken: token, OrderBy: order})
			if err != nil {
				t.Fatalf("ListSessions(order %q): %v", order, err)
			}
			for _, s := range page {
				all = append(all, s.ID)
			}
			if next == "" {
				return all
			}
			token = next
		}
	}
	for _, c := range []struct {
		order, user string
		want        []string
	}{
		{"", "", []string{"s3", "s1", "s4", "s2", "s0"}},
		{"update_time desc", "u1", []string{"s3", "s1", "s4", "s0"}},
		{"update_time", "", []string{"s0", "s2", "s4", "s1", "s3"}},
		{"updateTime asc", "u1", []string{"s0", "s4", "s1", "s3"}},
		{"create_time", "", []string{"s0", "s1", "s2", "s3", "s4"}},
		{"create_time desc", "", []string{"s4", "s3", "s2", "s1", "s0"}},
		{"createTime DESC", "u1", []string{"s4", "s3", "s1", "s0"}},
	} {
		if diff := cmp.Diff(c.want, list(c.user, c.order)); diff != "" {
			t.Errorf("order %q, user %q (-want +got):\n%s", c.order, c.user, diff)
		}
	}
	_, next, err := h.svc.ListSessions(h.ctx, sessions.ListSessionsRequest{App: "app1", PageSize: 2, OrderBy: "create_time"})
	if err != nil || next == "" {
		t.Fatalf("first page: %q, %v", next, err)
	}
	if _, _, err := h.svc.ListSessions(h.ctx, sessions.ListSessionsRequest{App: "app1", PageSize: 2, PageToken: next}); !fault.Is(err, fault.Invalid) {
		t.Errorf("a page token of another order: %v, want Invalid", err)
	}
	for _, bad := range []string{"name", "create_time up", "create_time desc x"} {
		if _, _, err := h.svc.ListSessions(h.ctx, sessions.ListSessionsRequest{App: "app1", OrderBy: bad}); !fault.Is(err, fault.Invalid) {
			t.Errorf("order %q: %v, want Invalid", bad, err)
		}
	}
}

func testListSessionsPagingAndOrder(t *testing.T, h *harness) {
	var made []string
	for i := range 23 {
		user := "u1"
		if i%3 == 0 {
			user = "u2"
		}
		s := h.create(t, "app1", user, fmt.Sprintf("s%02d", i), nil)
		made = append(made, s.ID)
	}
	h.create(t, "other", "u1", "x", nil)
	// Touch s00 (u2) so it becomes the most recently updated.
	h.append(t, sessions.Key{App: "app1", User: "u2", ID: "s00"}, textEvent("e", "user", "m"))
	list := func(user string, size int32) []string {
		t.Helper()
		var all []string
		token := ""
		for {
			page, next, err := h.svc.ListSessions(h.ctx, sessions.ListSessionsRequest{App: "app1", User: user, PageSize: size, PageToken: token})
			if err != nil {
				t.Fatalf("ListSessions: %v", err)
			}
			for _, s := range page {
				all = append(all, s.ID)
				if user != "" && s.User != user {
					t.Fatalf("listing user %s returned a session of %s", user, s.User)
				}
			}
			if next == "" {
				return all
			}
			token = next
		}
	}
	all := list("", 5)
	want := []string{"s00"}
	for i := 22; i > 0; i-- {
		want = append(want, made[i])
	}
	if diff := cmp.Diff(want, all); diff != "" {
		t.Fatalf("app listing, newest update first (-want +got):\n%s", diff)
	}
	u2 := list("u2", 2)
	var wantU2 []string
	for _, id := range want {
		n := 0
		fmt.Sscanf(id, "s%d", &n)
		if n%3 == 0 {
			wantU2 = append(wantU2, id)
		}
	}
	if diff := cmp.Diff(wantU2, u2); diff != "" {
		t.Fatalf("user listing (-want +got):\n%s", diff)
	}
	_, _, err := h.svc.ListSessions(h.ctx, sessions.ListSessionsRequest{App: "app1", PageSize: -1})
	wantKind(t, "page_size -1", err, fault.Invalid)
	// A page size over the maximum is coerced to it (AIP-158).
	if page, _, err := h.svc.ListSessions(h.ctx, sessions.ListSessionsRequest{App: "app1", PageSize: aip.MaxPageSize + 1}); err != nil || len(page) != 23 {
		t.Errorf("page_size %d: %d sessions, %v; want all 23", aip.MaxPageSize+1, len(page), err)
	}
}

func testListSessionsFilter(t *testing.T, h *harness) {
	mk := func(id, name string, labels map[string]string) {
		if _, err := h.svc.CreateSession(h.ctx, sessions.CreateSessionRequest{App: "app1", User: "u1", ID: id, DisplayName: name, Labels: labels}); err != nil {
			t.Fatal(err)
		}
	}
	mk("a", "weekly sync", map[string]string{"team": "core", "env.kind": "prod"})
	mk("b", "weekly sync", map[string]string{"team": "web"})
	mk("c", "standup", map[string]string{"team": "core"})
	c := h.clock.Now()
	if _, err := h.svc.CreateSession(h.ctx, sessions.CreateSessionRequest{App: "app1", User: "u2", ID: "d", DisplayName: "retro"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		filter string
		want   []string
	}{
		{`display_name = "weekly sync"`, []string{"b", "a"}},
		{`labels.team = "core"`, []string{"c", "a"}},
		{`labels.team = core AND display_name = "weekly sync"`, []string{"a"}},
		{`labels.env.kind = "prod"`, []string{"a"}},
		{`labels.team = "core" AND labels.team = "web"`, nil},
		{`labels.missing = "x"`, nil},
		{``, []string{"d", "c", "b", "a"}},
		// AIP-160: OR (tighter than AND), NOT, parentheses, has, other
		// comparisons, user_id, lowerCamelCase names.
		{`labels.team = "core" OR labels.team = "web"`, []string{"c", "b", "a"}},
		{`displayName = "weekly sync" AND (labels.team = "web" OR labels.team = "ops")`, []string{"b"}},
		{`display_name = "standup" OR labels.team = "web" AND user_id = "u1"`, []string{"c", "b"}},
		{`(display_name = "standup" OR labels.team = "web") AND user_id = "u1"`, []string{"c", "b"}},
		{`NOT labels.team = "core"`, []string{"d", "b"}},
		{`-labels:team`, []string{"d"}},
		{`labels:env.kind`, []string{"a"}},
		{`labels.team != "core"`, []string{"b"}},
		{`user_id = "u2" OR userId = "u1" AND display_name = "standup"`, []string{"c"}},
		{`user_id = "u2" OR (userId = "u1" AND display_name = "standup")`, []string{"d", "c"}},
		{`userId = "u2"`, []string{"d"}},
		{`create_time > "` + c.Format(time.RFC3339Nano) + `"`, []string{"d"}},
		{`createTime <= "` + c.Format(time.RFC3339Nano) + `" AND NOT display_name = "standup"`, []string{"b", "a"}},
	} {
		page, _, err := h.svc.ListSessions(h.ctx, sessions.ListSessionsRequest{App: "app1", Filter: tc.filter})
		if err != nil {
			t.Fatalf("filter %q: %v", tc.filter, err)
		}
		var got []string
		for _, s := range page {
			got = append(got, s.ID)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("filter %q (-want +got):\n%s", tc.filter, diff)
		}
	}
	for _, bad := range []string{`state.x = "1"`, `display_name "x"`, `display_name = "x`, `labels.team = "a" OR`, `display_name > "a"`, `create_time >= "yesterday"`, `labels.bad/key = "x"`} {
		_, _, err := h.svc.ListSessions(h.ctx, sessions.ListSessionsRequest{App: "app1", Filter: bad})
		wantKind(t, "filter "+bad, err, fault.Invalid)
	}
	// A filter checked session by session pages honestly: full pages but
	// the last, every match once.
	for i := range 9 {
		team := "core"
		if i%3 == 0 {
			team = "web"
		}
		mk(fmt.Sprint("p", i), "paged", map[string]string{"team": team})
	}
	var got []string
	token := ""
	for pages := 1; ; pages++ {
		page, next, err := h.svc.ListSessions(h.ctx, sessions.ListSessionsRequest{App: "app1", PageSize: 2, PageToken: token,
			Filter: `display_name = "paged" AND (labels.team = "web" OR NOT labels.team = "web") AND NOT user_id = "u2"`})
		if err != nil || pages > 10 {
			t.Fatalf("paging a filter, page %d: %v", pages, err)
		}
		if next != "" && len(page) != 2 {
			t.Errorf("page %d holds %d sessions and has a next page", pages, len(page))
		}
		for _, s := range page {
			got = append(got, s.ID)
		}
		if next == "" {
			break
		}
		token = next
	}
	if diff := cmp.Diff([]string{"p8", "p7", "p6", "p5", "p4", "p3", "p2", "p1", "p0"}, got); diff != "" {
		t.Errorf("paging a filter (-want +got):\n%s", diff)
	}
}

func testUpdateSession(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", map[string]any{"k": "v"})
	got, err := h.svc.UpdateSession(h.ctx, s.Key, sessions.UpdateSessionRequest{
		DisplayName: ptr("renamed"),
		Labels:      &map[string]string{"a": "b"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.DisplayName != "renamed" || got.Labels["a"] != "b" || got.State["k"] != "v" || !got.UpdateTime.After(s.UpdateTime) {
		t.Fatalf("updated session = %+v", got)
	}
	// Only the named fields change.
	got, err = h.svc.UpdateSession(h.ctx, s.Key, sessions.UpdateSessionRequest{TTL: ptr(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if got.DisplayName != "renamed" || got.ExpireTime.IsZero() {
		t.Fatalf("after ttl update: %+v", got)
	}
	got, err = h.svc.UpdateSession(h.ctx, s.Key, sessions.UpdateSessionRequest{ExpireTime: &time.Time{}})
	if err != nil || !got.ExpireTime.IsZero() {
		t.Fatalf("clearing expiry: %+v, %v", got, err)
	}
	_, err = h.svc.UpdateSession(h.ctx, s.Key, sessions.UpdateSessionRequest{Labels: &map[string]string{"bad key": "x"}})
	wantKind(t, "bad label key", err, fault.Invalid)
}

func testDeleteSession(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", map[string]any{"user:k": "kept"})
	h.append(t, s.Key, textEvent("e1", "user", "m"))
	if err := h.svc.DeleteSession(h.ctx, s.Key); err != nil {
		t.Fatal(err)
	}
	_, _, err := h.svc.GetSession(h.ctx, s.Key, sessions.GetSessionRequest{})
	wantKind(t, "GetSession after delete", err, fault.NotFound)
	err = h.svc.DeleteSession(h.ctx, s.Key)
	wantKind(t, "second delete", err, fault.NotFound)
	// The id can be used again and starts empty; user state survives.
	again := h.create(t, "app1", "u1", "s1", nil)
	_, events := h.get(t, again.Key, sessions.GetSessionRequest{})
	if len(events) != 0 || again.LastSequence != 0 {
		t.Fatalf("recreated session has %d old events", len(events))
	}
	if again.State["user:k"] != "kept" {
		t.Fatalf("user state lost with the session: %v", again.State)
	}
}

func testExpiry(t *testing.T, h *harness) {
	s, err := h.svc.CreateSession(h.ctx, sessions.CreateSessionRequest{App: "app1", User: "u1", ID: "ttl", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if s.ExpireTime.IsZero() {
		t.Fatalf("session with ttl has no expire time")
	}
	keep := h.create(t, "app1", "u1", "keep", nil)
	h.append(t, s.Key, textEvent("e1", "user", "m"))
	h.clock.Advance(2 * time.Minute)
	_, _, err = h.svc.GetSession(h.ctx, s.Key, sessions.GetSessionRequest{})
	wantKind(t, "GetSession after expiry", err, fault.NotFound)
	_, err = h.svc.AppendEvent(h.ctx, s.Key, textEvent("e2", "user", "m"), nil)
	wantKind(t, "AppendEvent after expiry", err, fault.NotFound)
	list, _, err := h.svc.ListSessions(h.ctx, sessions.ListSessionsRequest{App: "app1"})
	if err != nil || len(list) != 1 || list[0].ID != keep.ID {
		t.Fatalf("listing after expiry = %v, %v", list, err)
	}
	n, err := h.svc.SweepExpired(h.ctx)
	if err != nil || n != 1 {
		t.Fatalf("SweepExpired = %d, %v; want 1", n, err)
	}
	if n, _ := h.svc.SweepExpired(h.ctx); n != 0 {
		t.Fatalf("second sweep deleted %d", n)
	}
	// An expired id is free again.
	again := h.create(t, "app1", "u2", "ttl", nil)
	_, events := h.get(t, again.Key, sessions.GetSessionRequest{})
	if len(events) != 0 {
		t.Fatalf("new session under an expired id has %d events", len(events))
	}
	_, err = h.svc.CreateSession(h.ctx, sessions.CreateSessionRequest{App: "app1", User: "u1", ID: "past", ExpireTime: h.clock.Now().Add(-time.Second)})
	wantKind(t, "expire_time in the past", err, fault.Invalid)
	_, err = h.svc.CreateSession(h.ctx, sessions.CreateSessionRequest{App: "app1", User: "u1", ID: "both", ExpireTime: h.clock.Now().Add(time.Hour), TTL: time.Hour})
	wantKind(t, "both expire_time and ttl", err, fault.Invalid)
}

func testSharedState(t *testing.T, h *harness) {
	user := sessions.StateRef{App: "app1", User: "u1"}
	app := sessions.StateRef{App: "app1"}
	st, err := h.svc.GetState(h.ctx, user)
	if err != nil || len(st.State) != 0 || !st.UpdateTime.IsZero() {
		t.Fatalf("empty user state = %+v, %v", st, err)
	}
	if _, err := h.svc.UpdateState(h.ctx, user, map[string]any{"user:name": "Ann", "user:x": 1.0}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.UpdateState(h.ctx, app, map[string]any{"app:greeting": "hello"}); err != nil {
		t.Fatal(err)
	}
	st, err = h.svc.UpdateState(h.ctx, user, map[string]any{"user:x": nil})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"user:name": "Ann"}, st.State); diff != "" {
		t.Fatalf("user state after delete (-want +got):\n%s", diff)
	}
	s := h.create(t, "app1", "u1", "s1", nil)
	if diff := cmp.Diff(map[string]any{"user:name": "Ann", "app:greeting": "hello"}, s.State); diff != "" {
		t.Fatalf("session sees shared state (-want +got):\n%s", diff)
	}
	h.append(t, s.Key, deltaEvent("e1", map[string]any{"app:greeting": "hi"}))
	st, err = h.svc.GetState(h.ctx, app)
	if err != nil || st.State["app:greeting"] != "hi" || st.UpdateTime.IsZero() {
		t.Fatalf("app state after append = %+v, %v", st, err)
	}
	_, err = h.svc.UpdateState(h.ctx, user, map[string]any{"app:sneaky": 1.0})
	wantKind(t, "app key in user state", err, fault.Invalid)
	_, err = h.svc.UpdateState(h.ctx, app, map[string]any{"plain": 1.0})
	wantKind(t, "unprefixed key in app state", err, fault.Invalid)
	_, err = h.svc.UpdateState(h.ctx, app, map[string]any{"app:big": strings.Repeat("x", 20<<10)})
	wantKind(t, "oversized app state", err, fault.ResourceExhausted)
	st, _ = h.svc.GetState(h.ctx, app)
	if st.State["app:greeting"] != "hi" || st.State["app:big"] != nil {
		t.Fatalf("rejected update changed app state: %v", st.State)
	}
}

func testFork(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "src", map[string]any{"init": "yes"})
	h.append(t, s.Key, deltaEvent("e1", map[string]any{"step": 1.0, "user:u": "shared"}))
	h.append(t, s.Key, deltaEvent("e2", map[string]any{"step": 2.0, "gone": "soon"}))
	h.append(t, s.Key, deltaEvent("e3", map[string]any{"step": 3.0, "gone": nil}))
	fork, err := h.svc.ForkSession(h.ctx, s.Key, sessions.ForkSessionRequest{ID: "fork", EventID: "e2", DisplayName: "what if"})
	if err != nil {
		t.Fatal(err)
	}
	if fork.ID != "fork" || fork.User != "u1" || fork.DisplayName != "what if" || fork.LastSequence != 2 {
		t.Fatalf("fork = %+v", fork)
	}
	want := map[string]any{"init": "yes", "step": 2.0, "gone": "soon", "user:u": "shared"}
	if diff := cmp.Diff(want, fork.State); diff != "" {
		t.Fatalf("fork state as of e2 (-want +got):\n%s", diff)
	}
	_, events := h.get(t, fork.Key, sessions.GetSessionRequest{})
	if diff := cmp.Diff([]string{"e1", "e2"}, ids(events)); diff != "" {
		t.Fatalf("forked events (-want +got):\n%s", diff)
	}
	_, srcEvents := h.get(t, s.Key, sessions.GetSessionRequest{})
	if diff := cmp.Diff(srcEvents[:2], events); diff != "" {
		t.Fatalf("forked events differ from the source's (-src +fork):\n%s", diff)
	}
	// The fork goes its own way; appends continue its sequence.
	if got := h.append(t, fork.Key, deltaEvent("e3", map[string]any{"step": 30.0})); got.Sequence != 3 {
		t.Fatalf("first append to the fork got sequence %d", got.Sequence)
	}
	src, _ := h.get(t, s.Key, sessions.GetSessionRequest{})
	if src.State["step"] != 3.0 || src.LastSequence != 3 {
		t.Fatalf("source changed by the fork: %v", src.State)
	}
	// Fork of everything, with a server-chosen id.
	all, err := h.svc.ForkSession(h.ctx, s.Key, sessions.ForkSessionRequest{})
	if err != nil || all.LastSequence != 3 || all.State["step"] != 3.0 || all.State["gone"] != nil {
		t.Fatalf("full fork = %+v, %v", all, err)
	}
	_, err = h.svc.ForkSession(h.ctx, s.Key, sessions.ForkSessionRequest{EventID: "nope"})
	wantKind(t, "fork at an unknown event", err, fault.NotFound)
	_, err = h.svc.ForkSession(h.ctx, s.Key, sessions.ForkSessionRequest{ID: "fork"})
	wantKind(t, "fork onto an existing id", err, fault.AlreadyExists)
}

func testWatch(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	h.append(t, s.Key, textEvent("old", "user", "before the watch"))
	type result struct {
		ids []string
		err error
	}
	watch := func(after *int64, n int) (chan result, context.CancelFunc) {
		ctx, cancel := context.WithTimeout(h.ctx, 20*time.Second)
		out := make(chan result, 1)
		ready := make(chan struct{})
		go func() {
			var got []string
			close(ready)
			err := h.svc.Watch(ctx, s.Key, after, func(e *sessions.Event) error {
				got = append(got, e.ID)
				if len(got) == n {
					return errStop
				}
				return nil
			})
			out <- result{got, err}
		}()
		<-ready
		return out, cancel
	}
	live, cancelLive := watch(nil, 2)
	defer cancelLive()
	replay, cancelReplay := watch(ptr(int64(0)), 3)
	defer cancelReplay()
	time.Sleep(200 * time.Millisecond) // let the watches subscribe
	h.append(t, s.Key, textEvent("new1", "user", "m"))
	h.append(t, s.Key, textEvent("new2", "user", "m"))
	if r := <-live; !errors.Is(r.err, errStop) || !slices.Equal(r.ids, []string{"new1", "new2"}) {
		t.Fatalf("live watch = %v, %v; want [new1 new2]", r.ids, r.err)
	}
	if r := <-replay; !errors.Is(r.err, errStop) || !slices.Equal(r.ids, []string{"old", "new1", "new2"}) {
		t.Fatalf("replaying watch = %v, %v; want [old new1 new2]", r.ids, r.err)
	}
	// Deleting the session ends the stream without error.
	ending, cancelEnding := watch(nil, 100)
	defer cancelEnding()
	time.Sleep(100 * time.Millisecond)
	if err := h.svc.DeleteSession(h.ctx, s.Key); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-ending:
		if r.err != nil {
			t.Fatalf("watch of a deleted session ended with %v, want nil", r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("watch did not end after the session was deleted")
	}
	err := h.svc.Watch(h.ctx, s.Key, nil, func(*sessions.Event) error { return nil })
	wantKind(t, "watch of a missing session", err, fault.NotFound)
}

var errStop = errors.New("enough")

func testLimits(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	limits := h.svc.Limits()
	big := textEvent("big", "user", strings.Repeat("x", limits.MaxEventBytes))
	_, err := h.svc.AppendEvent(h.ctx, s.Key, big, nil)
	wantKind(t, "oversized event", err, fault.ResourceExhausted)
	if !strings.Contains(err.Error(), "MaxEventBytes") {
		t.Fatalf("oversized event error %q does not name the limit", err)
	}
	for name, delta := range map[string]map[string]any{
		"empty key":          {"": 1.0},
		"long key":           {strings.Repeat("k", limits.MaxStateKeyBytes+1): 1.0},
		"bad utf-8 key":      {"k\xff": 1.0},
		"bad utf-8 value":    {"k": "v\xff"},
		"bare prefix":        {"user:": 1.0},
		"non-JSON value":     {"k": struct{}{}},
		"not a finite value": {"k": nan()},
	} {
		_, err := h.svc.AppendEvent(h.ctx, s.Key, deltaEvent("bad", delta), nil)
		wantKind(t, name, err, fault.Invalid)
	}
	bad := textEvent("bad", "user", "hello \xff")
	_, err = h.svc.AppendEvent(h.ctx, s.Key, bad, nil)
	wantKind(t, "invalid UTF-8 text", err, fault.Invalid)
	_, err = h.svc.CreateSession(h.ctx, sessions.CreateSessionRequest{App: "app1", User: "u1", ID: "big", State: map[string]any{"k": strings.Repeat("x", 20<<10)}})
	wantKind(t, "oversized initial state", err, fault.ResourceExhausted)
	labels := map[string]string{}
	for i := range limits.MaxLabels + 1 {
		labels[fmt.Sprint("l", i)] = "v"
	}
	_, err = h.svc.CreateSession(h.ctx, sessions.CreateSessionRequest{App: "app1", User: "u1", ID: "labels", Labels: labels})
	wantKind(t, "too many labels", err, fault.ResourceExhausted)
	_, err = h.svc.AppendEvent(h.ctx, sessions.Key{App: "app1", User: "u1", ID: "nope"}, textEvent("e", "user", "m"), nil)
	wantKind(t, "append to an unknown session", err, fault.NotFound)
	// Nothing of the rejected inputs was stored.
	sess, events := h.get(t, s.Key, sessions.GetSessionRequest{})
	if len(events) != 0 || len(sess.State) != 0 {
		t.Fatalf("rejected input stored: events %v state %v", ids(events), sess.State)
	}
}

func nan() float64 {
	zero := 0.0
	return zero / zero
}
