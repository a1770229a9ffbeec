package sessionstest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kioku-ai/kioku/sessions"
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
	if _, err := h.svc.UpdateState(h.ctx, sessions.StateRef{App: "app2"}, map[string]any{"app:only": true}); err != nil {
		t.Fatal(err)
	}

	for _, page := range []int{1, 2, 10} {
		var apps []string
		after := ""
		for {
			got, err := h.store.Apps(h.ctx, after, page)
			if err != nil {
				t.Fatalf("Apps(%q, %d): %v", after, page, err)
			}
			apps = append(apps, got...)
			if len(got) < page {
				break
			}
			after = got[len(got)-1]
		}
		if diff := cmp.Diff([]string{"app1", "app2", "app3"}, apps); diff != "" {
			t.Fatalf("Apps by pages of %d (-want +got):\n%s", page, diff)
		}
	}

	// Every session of app1 visible now, in id order, by pages.
	now := h.clock.Now()
	scan := func(user string, now time.Time, page int) []*sessions.Session {
		t.Helper()
		var out []*sessions.Session
		q := sessions.ScanQuery{App: "app1", User: user, Now: now, Limit: page}
		for {
			got, err := h.store.ScanSessions(h.ctx, q)
			if err != nil {
				t.Fatalf("ScanSessions(%+v): %v", q, err)
			}
			out = append(out, got...)
			if len(got) < page {
				return out
			}
			q.AfterID = got[len(got)-1].ID
		}
	}
	names := func(ss []*sessions.Session) []string {
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
	if _, err := h.svc.UpdateState(h.ctx, sessions.StateRef{App: "app1", User: "u0"}, map[string]any{"user:x": 1}); err != nil {
		t.Fatal(err)
	}
	var states []*sessions.SharedState
	after := ""
	for {
		page, err := h.store.ScanUserStates(h.ctx, "app1", after, 1)
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, page...)
		if len(page) < 1 {
			break
		}
		after = page[len(page)-1].Ref.User
	}
	if len(states) != 2 || states[0].Ref != (sessions.StateRef{App: "app1", User: "u0"}) || states[1].Ref != (sessions.StateRef{App: "app1", User: "u1"}) {
		t.Fatalf("ScanUserStates = %+v", states)
	}
	stored, err := h.svc.GetState(h.ctx, sessions.StateRef{App: "app1", User: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(stored.State, states[1].State); diff != "" || !states[1].UpdateTime.Equal(stored.UpdateTime) {
		t.Fatalf("scanned user state %v at %v, stored %v at %v (-stored +scanned):\n%s", states[1].State, states[1].UpdateTime, stored.State, stored.UpdateTime, diff)
	}
}
