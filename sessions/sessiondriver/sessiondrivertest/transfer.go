package sessiondrivertest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/suitetest"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// The primitives export and import use (package archive).

func testScan(t *testing.T, h *harness) {
	// Two apps; app1 has two users, one of whom has a session that expires.
	s1 := h.create(t, "app1", "u1", "s1", map[string]any{"k": "v1", "user:name": "Ann", "app:motd": "hi"})
	h.append(t, s1.Key, deltaEvent("e1", map[string]any{"k": "v2", "n": 1}))
	h.append(t, s1.Key, textEvent("e2", "user", "hello"))
	h.create(t, "app1", "u2", "s0", nil)
	if _, err := h.svc.CreateSession(h.ctx, sessions.CreateSessionRequest{App: "app1", User: "u1", ID: "s2", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"s3", "s4", "s5"} {
		h.create(t, "app1", "u1", id, nil)
	}
	h.create(t, "app3", "u9", "x", nil)
	if _, err := h.svc.UpdateState(h.ctx, sessiontype.StateRef{App: "app2"}, map[string]any{"app:only": true}); err != nil {
		t.Fatal(err)
	}

	for _, page := range []int{1, 2, 10} {
		apps := suitetest.Pages(t, page, func(after string, n int) ([]string, error) { return h.transfer().Apps(h.ctx, after, n) }, suitetest.Same)
		if diff := cmp.Diff([]string{"app1", "app2", "app3"}, apps); diff != "" {
			t.Fatalf("Apps by pages of %d (-want +got):\n%s", page, diff)
		}
	}

	// Every session of app1 visible now, in id order, by pages.
	now := h.clock.Now()
	scan := func(user string, now time.Time, page int) []*sessiontype.Session {
		t.Helper()
		return suitetest.Pages(t, page, func(after string, n int) ([]*sessiontype.Session, error) {
			return h.transfer().ScanSessions(h.ctx, sessiondriver.ScanSessionsParams{App: "app1", User: user, Now: now, AfterID: after, Limit: n})
		}, func(s *sessiontype.Session) string { return s.Key.ID })
	}
	names := func(ss []*sessiontype.Session) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.Key.Name())
		}
		return out
	}
	all := scan("", now, 2)
	want := []string{"apps/app1/users/u2/sessions/s0", "apps/app1/users/u1/sessions/s1", "apps/app1/users/u1/sessions/s2",
		"apps/app1/users/u1/sessions/s3", "apps/app1/users/u1/sessions/s4", "apps/app1/users/u1/sessions/s5"}
	if diff := cmp.Diff(want, names(all)); diff != "" {
		t.Fatalf("ScanSessions of app1 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[1:], names(scan("u1", now, 3))); diff != "" {
		t.Fatalf("ScanSessions of u1 (-want +got):\n%s", diff)
	}
	later := now.Add(2 * time.Minute)
	if diff := cmp.Diff([]string{want[1], want[3], want[4], want[5]}, names(scan("u1", later, 1))); diff != "" {
		t.Fatalf("ScanSessions of u1 once s2 expired (-want +got):\n%s", diff)
	}

	// A scanned session is the stored one, with its own state and its
	// initial state.
	got := all[1]
	full, _ := h.get(t, s1.Key, sessions.GetSessionRequest{})
	if diff := cmp.Diff(map[string]any{"k": "v2", "n": 1.0}, got.State); diff != "" {
		t.Fatalf("scanned session's own state (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"k": "v1"}, got.InitialState); diff != "" {
		t.Fatalf("scanned session's initial state (-want +got):\n%s", diff)
	}
	full.State = got.State // GetSession merges the scopes
	if diff := cmp.Diff(full, got); diff != "" || got.LastSequence != 2 {
		t.Fatalf("scanned session (-GetSession +ScanSessions):\n%s", diff)
	}

	// User scopes ever written, in user order.
	if _, err := h.svc.UpdateState(h.ctx, sessiontype.StateRef{App: "app1", User: "u0"}, map[string]any{"user:x": 1}); err != nil {
		t.Fatal(err)
	}
	states := suitetest.Pages(t, 1, func(after string, n int) ([]*sessiontype.SharedState, error) {
		return h.transfer().ScanUserStates(h.ctx, "app1", after, n)
	}, func(s *sessiontype.SharedState) string { return s.Ref.User })
	if len(states) != 2 || states[0].Ref != (sessiontype.StateRef{App: "app1", User: "u0"}) || states[1].Ref != (sessiontype.StateRef{App: "app1", User: "u1"}) {
		t.Fatalf("ScanUserStates = %+v", states)
	}
	stored, err := h.svc.GetState(h.ctx, sessiontype.StateRef{App: "app1", User: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(stored.State, states[1].State); diff != "" || !states[1].UpdateTime.Equal(stored.UpdateTime) {
		t.Fatalf("scanned user state %v at %v, stored %v at %v (-stored +scanned):\n%s", states[1].State, states[1].UpdateTime, stored.State, stored.UpdateTime, diff)
	}
}

// copySessions imports every session of app (with its events) and every
// shared scope from one store into another, as package archive does, and
// returns what the calls reported.
func copySessions(t *testing.T, h *harness, from, to transferStore, app string, now time.Time) (wrote, events int) {
	t.Helper()
	list, err := from.ScanSessions(h.ctx, sessiondriver.ScanSessionsParams{App: app, Now: now, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		w, err := to.ImportSession(h.ctx, s, now)
		if err != nil {
			t.Fatalf("ImportSession(%s): %v", s.Name(), err)
		}
		if w {
			wrote++
		}
		evs, err := from.ListEvents(h.ctx, s.Key, sessiondriver.EventQuery{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		n, err := to.ImportEvents(h.ctx, s.Key, evs, now)
		if err != nil {
			t.Fatalf("ImportEvents(%s): %v", s.Name(), err)
		}
		events += n
	}
	users, err := from.ScanUserStates(h.ctx, app, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	st, at, err := from.GetState(h.ctx, sessiontype.StateRef{App: app})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range append(users, &sessiontype.SharedState{Ref: sessiontype.StateRef{App: app}, State: st, UpdateTime: at}) {
		w, err := to.ImportState(h.ctx, s)
		if err != nil {
			t.Fatalf("ImportState(%s): %v", s.Ref.Name(), err)
		}
		if w {
			wrote++
		}
	}
	return wrote, events
}

func testImport(t *testing.T, h *harness) {
	s1 := h.create(t, "app1", "u1", "s1", map[string]any{"k": 1, "user:name": "Ann", "app:motd": "hi"})
	h.append(t, s1.Key, deltaEvent("e1", map[string]any{"k": 2, "user:tea": "green"}))
	h.append(t, s1.Key, textEvent("e2", "user", "the lighthouse keeper waves"))
	if _, err := h.svc.ForkSession(h.ctx, s1.Key, sessions.ForkSessionRequest{ID: "s2", EventID: "e1"}); err != nil {
		t.Fatal(err)
	}
	h.create(t, "app1", "u2", "t1", nil)
	now := h.clock.Now()

	target := h.fresh().(transferStore)
	tsvc := sessions.NewService(target, sessions.Config{Now: h.clock.Tick})
	wrote, events := copySessions(t, h, h.transfer(), target, "app1", now)
	// Three sessions, u1's and the app's scopes; two events of s1, one of
	// its fork.
	if wrote != 5 || events != 3 {
		t.Fatalf("first import wrote %d sessions and scopes and %d events, want 5 and 3", wrote, events)
	}

	// The target holds the same sessions, events and scopes, and finds the
	// events by search.
	scan := func(st transferStore) []*sessiontype.Session {
		t.Helper()
		list, err := st.ScanSessions(h.ctx, sessiondriver.ScanSessionsParams{App: "app1", Now: now, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return list
	}
	if diff := cmp.Diff(scan(h.transfer()), scan(target)); diff != "" {
		t.Fatalf("imported sessions (-source +target):\n%s", diff)
	}
	for _, key := range []sessiontype.Key{s1.Key, {App: "app1", User: "u1", ID: "s2"}} {
		want, wantEvents := h.get(t, key, sessions.GetSessionRequest{})
		got, gotEvents, err := tsvc.GetSession(h.ctx, key, sessions.GetSessionRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("imported %s, merged (-source +target):\n%s", key.Name(), diff)
		}
		if diff := cmp.Diff(wantEvents, gotEvents); diff != "" {
			t.Fatalf("imported events of %s (-source +target):\n%s", key.Name(), diff)
		}
	}
	hits, _, err := tsvc.SearchEvents(h.ctx, sessions.SearchEventsRequest{App: "app1", User: "u1", Query: "lighthouse"})
	if err != nil || len(hits) != 1 || hits[0].Event.ID != "e2" {
		t.Fatalf("search of the imported events = %+v, %v", hits, err)
	}

	// Importing again writes nothing.
	if wrote, events := copySessions(t, h, h.transfer(), target, "app1", now); wrote != 0 || events != 0 {
		t.Fatalf("second import wrote %d sessions and scopes and %d events, want none", wrote, events)
	}

	// An import stopped after some events is completed by the next.
	h.append(t, s1.Key, textEvent("e3", "agent", "and sails away"))
	h.append(t, s1.Key, textEvent("e4", "user", "bye"))
	moved, _ := h.get(t, s1.Key, sessions.GetSessionRequest{})
	resumed := h.fresh().(transferStore)
	scanned := scan(h.transfer())
	if _, err := resumed.ImportSession(h.ctx, scanned[0], now); err != nil {
		t.Fatal(err)
	}
	all, err := h.store.ListEvents(h.ctx, s1.Key, sessiondriver.EventQuery{Now: now})
	if err != nil || len(all) != 4 {
		t.Fatalf("source events: %d, %v", len(all), err)
	}
	if n, err := resumed.ImportEvents(h.ctx, s1.Key, all[:1], now); err != nil || n != 1 {
		t.Fatalf("ImportEvents of the first event = %d, %v", n, err)
	}
	if n, err := resumed.ImportEvents(h.ctx, s1.Key, all, now); err != nil || n != 3 {
		t.Fatalf("ImportEvents after a stop = %d, %v; want the 3 missing", n, err)
	}
	// The first target catches up with the source's later events.
	if wrote, events := copySessions(t, h, h.transfer(), target, "app1", now); wrote != 1 || events != 2 {
		t.Fatalf("import of the moved-on source wrote %d sessions and %d events, want 1 and 2", wrote, events)
	}
	got, _, err := tsvc.GetSession(h.ctx, s1.Key, sessions.GetSessionRequest{})
	if err != nil || got.LastSequence != 4 || !got.UpdateTime.Equal(moved.UpdateTime) {
		t.Fatalf("caught-up session = %+v, %v", got, err)
	}

	// What conflicts with the target is refused, naming it.
	_, err = target.ImportSession(h.ctx, &sessiontype.Session{Key: sessiontype.Key{App: "app1", User: "u9", ID: "s1"}, CreateTime: now, UpdateTime: now}, now)
	wantKind(t, "a session of another user under an imported id", err, fault.AlreadyExists)
	old := scanned[0]
	if _, err := tsvc.AppendEvent(h.ctx, s1.Key, textEvent("x1", "user", "written in the target"), nil); err != nil {
		t.Fatal(err)
	}
	_, err = target.ImportSession(h.ctx, old, now)
	wantKind(t, "a session that moved on in the target", err, fault.FailedPrecondition)
	clash := *all[0]
	clash.ID = "other"
	_, err = target.ImportEvents(h.ctx, s1.Key, []*sessiontype.Event{&clash}, now)
	wantKind(t, "another event at an imported sequence", err, fault.AlreadyExists)
	beyond := *all[0]
	beyond.ID, beyond.Sequence = "far", 99
	_, err = target.ImportEvents(h.ctx, s1.Key, []*sessiontype.Event{&beyond}, now)
	wantKind(t, "an event past the session's last sequence", err, fault.Invalid)
	_, err = target.ImportEvents(h.ctx, sessiontype.Key{App: "app1", User: "u1", ID: "nope"}, all[:1], now)
	wantKind(t, "events of a session not imported", err, fault.NotFound)
	if _, err := tsvc.UpdateState(h.ctx, sessiontype.StateRef{App: "app1", User: "u1"}, map[string]any{"user:later": true}); err != nil {
		t.Fatal(err)
	}
	st, at, err := h.store.GetState(h.ctx, sessiontype.StateRef{App: "app1", User: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = target.ImportState(h.ctx, &sessiontype.SharedState{Ref: sessiontype.StateRef{App: "app1", User: "u1"}, State: st, UpdateTime: at})
	wantKind(t, "a scope updated in the target after the archive", err, fault.FailedPrecondition)
}

func testDeleteUser(t *testing.T, h *harness) {
	ann, bo := sessiontype.StateRef{App: "app1", User: "ann"}, sessiontype.StateRef{App: "app1", User: "bo"}
	s1 := h.create(t, "app1", "ann", "s1", map[string]any{"k": 1, "user:name": "Ann", "app:motd": "hi"})
	h.append(t, s1.Key, textEvent("e1", "user", "the zyxwvut lighthouse"))
	if _, err := h.svc.CreateSession(h.ctx, sessions.CreateSessionRequest{App: "app1", User: "ann", ID: "s2", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	h.append(t, sessiontype.Key{App: "app1", User: "ann", ID: "s2"}, textEvent("e1", "user", "zyxwvut again"))
	b1 := h.create(t, "app1", "bo", "b1", map[string]any{"user:name": "Bo"})
	h.append(t, b1.Key, textEvent("f1", "user", "a zyxwvut of my own"))
	other := h.create(t, "app2", "ann", "x1", map[string]any{"user:name": "Ann elsewhere"})
	h.clock.Advance(2 * time.Minute) // s2 has expired, not swept yet
	before, beforeEvents := h.get(t, b1.Key, sessions.GetSessionRequest{})

	n, err := h.svc.DeleteUser(h.ctx, "app1", "ann")
	if err != nil || n != 2 {
		t.Fatalf("DeleteUser = %d, %v; want ann's 2 sessions, the expired one too", n, err)
	}
	_, _, err = h.svc.GetSession(h.ctx, s1.Key, sessions.GetSessionRequest{})
	wantKind(t, "GetSession of an erased user's session", err, fault.NotFound)
	past := h.clock.Now().Add(-time.Hour) // when s2 was visible
	for _, now := range []time.Time{past, h.clock.Now()} {
		if left, err := h.transfer().ScanSessions(h.ctx, sessiondriver.ScanSessionsParams{App: "app1", User: "ann", Now: now, Limit: 10}); err != nil || len(left) != 0 {
			t.Fatalf("ann's sessions after the erasure: %v, %v", left, err)
		}
	}
	st, at, err := h.store.GetState(h.ctx, ann)
	if err != nil || len(st) != 0 || !at.IsZero() {
		t.Fatalf("ann's state after the erasure: %v at %v, %v", st, at, err)
	}
	states, err := h.transfer().ScanUserStates(h.ctx, "app1", "", 10)
	if err != nil || len(states) != 1 || states[0].Ref != bo {
		t.Fatalf("user scopes after the erasure: %+v, %v", states, err)
	}
	if hits, _, err := h.svc.SearchEvents(h.ctx, sessions.SearchEventsRequest{App: "app1", User: "ann", Query: "zyxwvut"}); err != nil || len(hits) != 0 {
		t.Fatalf("search of the erased user: %+v, %v", hits, err)
	}
	// Others are untouched: bo, the app's state, ann in another app.
	after, afterEvents := h.get(t, b1.Key, sessions.GetSessionRequest{})
	if diff := cmp.Diff(before, after); diff != "" {
		t.Fatalf("bo's session (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(beforeEvents, afterEvents); diff != "" {
		t.Fatalf("bo's events (-before +after):\n%s", diff)
	}
	if hits, _, err := h.svc.SearchEvents(h.ctx, sessions.SearchEventsRequest{App: "app1", User: "bo", Query: "zyxwvut"}); err != nil || len(hits) != 1 {
		t.Fatalf("search of bo after ann's erasure: %+v, %v", hits, err)
	}
	if st, err := h.svc.GetState(h.ctx, sessiontype.StateRef{App: "app1"}); err != nil || st.State["app:motd"] != "hi" {
		t.Fatalf("the app's state after the erasure: %+v, %v", st, err)
	}
	if got, _ := h.get(t, other.Key, sessions.GetSessionRequest{}); got.State["user:name"] != "Ann elsewhere" {
		t.Fatalf("ann's session in another app: %+v", got)
	}

	// Erasing again finds nothing and is no error; a new session of the
	// user starts from nothing.
	if n, err := h.svc.DeleteUser(h.ctx, "app1", "ann"); err != nil || n != 0 {
		t.Fatalf("second DeleteUser = %d, %v", n, err)
	}
	again := h.create(t, "app1", "ann", "s1", nil)
	if _, events := h.get(t, again.Key, sessions.GetSessionRequest{}); len(events) != 0 || len(again.State) != 1 {
		t.Fatalf("a new session of the erased user: state %v, %d events", again.State, len(events))
	}
	_, err = h.svc.DeleteUser(h.ctx, "app1", "")
	wantKind(t, "DeleteUser without a user", err, fault.Invalid)
}
