package sessiondrivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/resource"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

func testCreateWithCallerID(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	if s.Key != (sessiontype.Key{App: "app1", User: "u1", ID: "s1"}) {
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
	got, _ := h.get(t, sessiontype.Key{App: "app1", User: "u1", ID: "dup"}, sessions.GetSessionRequest{})
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
		if err := resource.ValidateID("session id", s.ID, resource.SessionIDChars); err != nil {
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
	for _, k := range []sessiontype.Key{
		{App: "", User: "u", ID: "s"},
		{App: "a/b", User: "u", ID: "s"},
		{App: "a", User: "", ID: "s"},
		{App: "a", User: "u", ID: "bad id"},
		{App: "a", User: "u", ID: ".."},
		{App: "a", User: "u", ID: "__x__"},
		{App: "a", User: "u", ID: strings.Repeat("x", resource.MaxIDBytes+1)},
		{App: "a", User: "u\xff", ID: "s"},
	} {
		_, err := h.svc.CreateSession(h.ctx, sessions.CreateSessionRequest{App: k.App, User: k.User, ID: k.ID})
		wantKind(t, fmt.Sprintf("CreateSession(%q)", k), err, fault.Invalid)
		_, _, err = h.svc.GetSession(h.ctx, k, sessions.GetSessionRequest{})
		wantKind(t, fmt.Sprintf("GetSession(%q)", k), err, fault.Invalid)
	}
	_, err := h.svc.AppendEvent(h.ctx, sessiontype.Key{App: "a", User: "u", ID: "s"}, &sessiontype.Event{ID: "no spaces"}, nil)
	wantKind(t, "event id with a space", err, fault.Invalid)
}

func testIsolation(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	h.append(t, s.Key, textEvent("e1", "user", "secret"))
	for _, k := range []sessiontype.Key{
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
	user := sessiontype.StateRef{App: "app1", User: "u1"}
	app := sessiontype.StateRef{App: "app1"}
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
			err := h.svc.Watch(ctx, s.Key, after, func(e *sessiontype.Event) error {
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
	err := h.svc.Watch(h.ctx, s.Key, nil, func(*sessiontype.Event) error { return nil })
	wantKind(t, "watch of a missing session", err, fault.NotFound)
}

var errStop = errors.New("enough")
