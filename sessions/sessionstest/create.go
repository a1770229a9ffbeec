package sessionstest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/sessions"
)

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
