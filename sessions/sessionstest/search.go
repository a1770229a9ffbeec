package sessionstest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/sessions"
)

// The search cases: ranking, filters, paging, deletion and expiry, and
// isolation between users and apps.

func (h *harness) search(t *testing.T, r sessions.SearchEventsRequest) ([]sessions.SearchHit, string) {
	t.Helper()
	hits, next, err := h.svc.SearchEvents(h.ctx, r)
	if err != nil {
		t.Fatalf("SearchEvents(%+v): %v", r, err)
	}
	return hits, next
}

// hitIDs returns "session/event" for each hit.
func hitIDs(hits []sessions.SearchHit) []string {
	out := []string{}
	for _, h := range hits {
		out = append(out, h.Session.ID+"/"+h.Event.ID)
	}
	return out
}

func testSearchRanking(t *testing.T, h *harness) {
	s1 := h.create(t, "app1", "u1", "s1", nil)
	s2 := h.create(t, "app1", "u1", "s2", nil)
	h.append(t, s1.Key, textEvent("tea", "user", "I drink tea every morning."))
	h.append(t, s1.Key, textEvent("green", "agent", "Green tea from Uji is my favourite tea."))
	h.append(t, s1.Key, textEvent("coffee", "user", "Coffee keeps me awake at work."))
	h.append(t, s2.Key, textEvent("paint", "user", "Last weekend I painted a sunset over the lake."))
	h.append(t, s2.Key, textEvent("tokyo", "user", "来月東京に行きます"))
	h.append(t, s2.Key, textEvent("none", "agent", "That sounds lovely."))
	h.append(t, s2.Key, &sessions.Event{ID: "call", Author: "agent", Content: &sessions.Content{Parts: []sessions.Part{{FunctionCall: &sessions.FunctionCall{Name: "lookup"}}}}})

	// Both words beat one; the stored event comes back whole, with its
	// session and sequence.
	hits, next := h.search(t, sessions.SearchEventsRequest{App: "app1", User: "u1", Query: "green tea"})
	if diff := cmp.Diff([]string{"s1/green", "s1/tea"}, hitIDs(hits)); diff != "" || next != "" {
		t.Fatalf("green tea (-want +got):\n%s (next %q)", diff, next)
	}
	if hits[0].Score <= hits[1].Score || hits[1].Score <= 0 {
		t.Fatalf("scores %v, %v: want descending and positive", hits[0].Score, hits[1].Score)
	}
	_, stored := h.get(t, s1.Key, sessions.GetSessionRequest{})
	if diff := cmp.Diff(stored[1], hits[0].Event); diff != "" || hits[0].Session != s1.Key {
		t.Fatalf("hit event differs from the stored one (-stored +hit):\n%s; session %v", diff, hits[0].Session)
	}
	// A rare word outweighs a common one.
	hits, _ = h.search(t, sessions.SearchEventsRequest{App: "app1", User: "u1", Query: "tea at work"})
	if got := hitIDs(hits); len(got) != 3 || got[0] != "s1/coffee" {
		t.Fatalf("tea at work = %v; want the coffee event (work is rarer) first of 3", got)
	}
	// Stems meet across forms, across sessions; CJK text is found by bigrams.
	hits, _ = h.search(t, sessions.SearchEventsRequest{App: "app1", User: "u1", Query: "painting"})
	if diff := cmp.Diff([]string{"s2/paint"}, hitIDs(hits)); diff != "" {
		t.Fatalf("painting (-want +got):\n%s", diff)
	}
	hits, _ = h.search(t, sessions.SearchEventsRequest{App: "app1", User: "u1", Query: "東京"})
	if diff := cmp.Diff([]string{"s2/tokyo"}, hitIDs(hits)); diff != "" {
		t.Fatalf("東京 (-want +got):\n%s", diff)
	}
	// No match is an empty result; tool calls are not text.
	for _, q := range []string{"volcano", "lookup"} {
		if hits, next := h.search(t, sessions.SearchEventsRequest{App: "app1", User: "u1", Query: q}); len(hits) != 0 || next != "" {
			t.Fatalf("%s found %v", q, hitIDs(hits))
		}
	}
	// A retried append is indexed once.
	h.append(t, s1.Key, textEvent("coffee", "user", "Coffee keeps me awake at work."))
	hits, _ = h.search(t, sessions.SearchEventsRequest{App: "app1", User: "u1", Query: "coffee"})
	if diff := cmp.Diff([]string{"s1/coffee"}, hitIDs(hits)); diff != "" {
		t.Fatalf("after a retried append (-want +got):\n%s", diff)
	}
}

func testSearchFilters(t *testing.T, h *harness) {
	s1 := h.create(t, "app1", "u1", "s1", nil)
	s2 := h.create(t, "app1", "u1", "s2", nil)
	day := func(d int) time.Time { return time.Date(2026, 1, d, 12, 0, 0, 0, time.UTC) }
	add := func(key sessions.Key, id, author string, d int) {
		e := textEvent(id, author, "we talked about the garden")
		e.Timestamp = day(d)
		h.append(t, key, e)
	}
	add(s1.Key, "a", "user", 1)
	add(s1.Key, "b", "agent", 2)
	add(s2.Key, "c", "user", 3)
	add(s2.Key, "d", "agent", 4)
	sorted := func(hits []sessions.SearchHit) []string {
		ids := hitIDs(hits)
		slices.Sort(ids)
		return ids
	}
	for _, tc := range []struct {
		r    sessions.SearchEventsRequest
		want []string
	}{
		{sessions.SearchEventsRequest{}, []string{"s1/a", "s1/b", "s2/c", "s2/d"}},
		{sessions.SearchEventsRequest{Session: "s2"}, []string{"s2/c", "s2/d"}},
		{sessions.SearchEventsRequest{Author: "user"}, []string{"s1/a", "s2/c"}},
		{sessions.SearchEventsRequest{Session: "s1", Author: "agent"}, []string{"s1/b"}},
		{sessions.SearchEventsRequest{From: day(2), To: day(4)}, []string{"s1/b", "s2/c"}},
		{sessions.SearchEventsRequest{From: day(3), Author: "agent"}, []string{"s2/d"}},
		{sessions.SearchEventsRequest{Author: "nobody"}, []string{}},
	} {
		r := tc.r
		r.App, r.User, r.Query = "app1", "u1", "garden"
		hits, _ := h.search(t, r)
		if diff := cmp.Diff(tc.want, sorted(hits)); diff != "" {
			t.Errorf("filter %+v (-want +got):\n%s", tc.r, diff)
		}
	}
	// Equal scores: the newer event first.
	hits, _ := h.search(t, sessions.SearchEventsRequest{App: "app1", User: "u1", Query: "garden"})
	if diff := cmp.Diff([]string{"s2/d", "s2/c", "s1/b", "s1/a"}, hitIDs(hits)); diff != "" {
		t.Fatalf("ties (-want +got):\n%s", diff)
	}
	// A session of another user, or none, is NotFound.
	_, _, err := h.svc.SearchEvents(h.ctx, sessions.SearchEventsRequest{App: "app1", User: "u2", Session: "s1", Query: "garden"})
	wantKind(t, "search in another user's session", err, fault.NotFound)
	_, _, err = h.svc.SearchEvents(h.ctx, sessions.SearchEventsRequest{App: "app1", User: "u1", Session: "nope", Query: "garden"})
	wantKind(t, "search in a missing session", err, fault.NotFound)
	// A page size over the maximum is coerced to it (AIP-158).
	if _, _, err := h.svc.SearchEvents(h.ctx, sessions.SearchEventsRequest{App: "app1", User: "u1", Query: "garden", PageSize: sessions.MaxSearchPageSize + 1}); err != nil {
		t.Errorf("SearchEvents with page_size %d: %v", sessions.MaxSearchPageSize+1, err)
	}
	for _, r := range []sessions.SearchEventsRequest{
		{App: "app1", User: "u1"},
		{App: "app1", User: "u1", Query: "the and of"},
		{App: "app1", User: "u1", Query: string(make([]byte, sessions.MaxSearchQueryBytes+1))},
		{App: "app1", User: "u1", Query: "garden", PageSize: -1},
		{App: "app1", User: "bad/user", Query: "garden"},
		{App: "app1", User: "u1", Query: "garden", PageToken: "junk"},
	} {
		_, _, err := h.svc.SearchEvents(h.ctx, r)
		wantKind(t, fmt.Sprintf("SearchEvents(%.60q)", fmt.Sprint(r)), err, fault.Invalid)
	}
}

func testSearchPaging(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	for i := range 25 {
		// Longer texts score lower: every page is in score order.
		text := "the river" + string(slices.Repeat([]byte(" stone"), i))
		h.append(t, s.Key, textEvent(fmt.Sprintf("e%02d", i), "user", text))
	}
	h.append(t, s.Key, textEvent("other", "user", "a mountain"))
	all, next := h.search(t, sessions.SearchEventsRequest{App: "app1", User: "u1", Query: "river", PageSize: 50})
	if len(all) != 25 || next != "" {
		t.Fatalf("one page of 50: %d hits, next %q", len(all), next)
	}
	for i, hit := range all {
		if want := fmt.Sprintf("e%02d", i); hit.Event.ID != want {
			t.Fatalf("hit %d is %s, want %s (shorter texts first)", i, hit.Event.ID, want)
		}
	}
	var paged []sessions.SearchHit
	token := ""
	for range 4 {
		hits, next := h.search(t, sessions.SearchEventsRequest{App: "app1", User: "u1", Query: "river", PageSize: 10, PageToken: token})
		paged = append(paged, hits...)
		if token = next; token == "" {
			break
		}
	}
	if token != "" || len(paged) != 25 {
		t.Fatalf("paging by 10 gave %d hits, last token %q", len(paged), token)
	}
	if diff := cmp.Diff(hitIDs(all), hitIDs(paged)); diff != "" {
		t.Fatalf("pages differ from one page (-one +paged):\n%s", diff)
	}
	_, next = h.search(t, sessions.SearchEventsRequest{App: "app1", User: "u1", Query: "river", PageSize: 10})
	_, _, err := h.svc.SearchEvents(h.ctx, sessions.SearchEventsRequest{App: "app1", User: "u1", Query: "stone", PageSize: 10, PageToken: next})
	wantKind(t, "page token of another query", err, fault.Invalid)

	// Pages end early at the read budget (256 KiB here), with the hit that
	// passes it: eight events of 60 KiB come in pages of 5 and 3.
	large := h.create(t, "app1", "u2", "large", nil)
	for i := range 8 {
		h.append(t, large.Key, textEvent(fmt.Sprint("big", i), "user", "the lake"+strings.Repeat(" stone", 10_000)))
	}
	var sizes []int
	seen := map[string]bool{}
	token = ""
	for range 8 {
		hits, next := h.search(t, sessions.SearchEventsRequest{App: "app1", User: "u2", Query: "lake", PageSize: 100, PageToken: token})
		sizes = append(sizes, len(hits))
		for _, id := range hitIDs(hits) {
			seen[id] = true
		}
		if token = next; token == "" {
			break
		}
	}
	if !slices.Equal(sizes, []int{5, 3}) || len(seen) != 8 {
		t.Errorf("8 hits of 60 KiB came in pages of %v (%d distinct); want pages of 5 and 3 (a 256 KiB budget)", sizes, len(seen))
	}
}

func testSearchDeletionAndExpiry(t *testing.T, h *harness) {
	gone := h.create(t, "app1", "u1", "gone", nil)
	h.append(t, gone.Key, textEvent("e1", "user", "my passport number is secret"))
	ttl, err := h.svc.CreateSession(h.ctx, sessions.CreateSessionRequest{App: "app1", User: "u1", ID: "ttl", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	h.append(t, ttl.Key, textEvent("e1", "user", "the passport photo was awful"))
	keep := h.create(t, "app1", "u1", "keep", nil)
	h.append(t, keep.Key, textEvent("e1", "user", "renew the passport in May"))
	fork, err := h.svc.ForkSession(h.ctx, keep.Key, sessions.ForkSessionRequest{ID: "fork"})
	if err != nil {
		t.Fatal(err)
	}
	search := func() []string {
		hits, _ := h.search(t, sessions.SearchEventsRequest{App: "app1", User: "u1", Query: "passport"})
		ids := hitIDs(hits)
		slices.Sort(ids)
		return ids
	}
	if diff := cmp.Diff([]string{"fork/e1", "gone/e1", "keep/e1", "ttl/e1"}, search()); diff != "" {
		t.Fatalf("before deleting (-want +got):\n%s", diff)
	}
	if err := h.svc.DeleteSession(h.ctx, gone.Key); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(2 * time.Hour) // ttl expires; not swept yet
	if diff := cmp.Diff([]string{"fork/e1", "keep/e1"}, search()); diff != "" {
		t.Fatalf("after a deletion and an expiry (-want +got):\n%s", diff)
	}
	if _, err := h.svc.SweepExpired(h.ctx); err != nil {
		t.Fatal(err)
	}
	// A new session under a deleted or expired id starts with nothing.
	again := h.create(t, "app1", "u1", "gone", nil)
	h.create(t, "app1", "u2", "ttl", nil)
	h.append(t, again.Key, textEvent("e9", "user", "nothing to see"))
	if diff := cmp.Diff([]string{"fork/e1", "keep/e1"}, search()); diff != "" {
		t.Fatalf("after the sweep and reuse of the ids (-want +got):\n%s", diff)
	}
	if err := h.svc.DeleteSession(h.ctx, fork.Key); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"keep/e1"}, search()); diff != "" {
		t.Fatalf("after deleting the fork (-want +got):\n%s", diff)
	}
}

func testSearchIsolation(t *testing.T, h *harness) {
	mine := h.create(t, "app1", "u1", "s1", nil)
	h.append(t, mine.Key, textEvent("e1", "user", "my cat is called Miso"))
	other := h.create(t, "app1", "u2", "s2", nil)
	h.append(t, other.Key, textEvent("e1", "user", "my cat is called Tofu"))
	elsewhere := h.create(t, "app2", "u1", "s1", nil)
	h.append(t, elsewhere.Key, textEvent("e1", "user", "my cat is called Natto"))
	for _, tc := range []struct {
		app, user string
		want      []string
	}{
		{"app1", "u1", []string{"s1/e1"}},
		{"app1", "u2", []string{"s2/e1"}},
		{"app2", "u1", []string{"s1/e1"}},
		{"app2", "u2", []string{}},
	} {
		hits, _ := h.search(t, sessions.SearchEventsRequest{App: tc.app, User: tc.user, Query: "cat"})
		if diff := cmp.Diff(tc.want, hitIDs(hits)); diff != "" {
			t.Fatalf("%s/%s (-want +got):\n%s", tc.app, tc.user, diff)
		}
		for _, hit := range hits {
			if hit.Session.App != tc.app || hit.Session.User != tc.user {
				t.Fatalf("%s/%s got a hit of %v", tc.app, tc.user, hit.Session)
			}
		}
	}
	for _, q := range []string{"tofu", "natto"} {
		if hits, _ := h.search(t, sessions.SearchEventsRequest{App: "app1", User: "u1", Query: q}); len(hits) != 0 {
			t.Fatalf("u1 of app1 found %s: %v", q, hitIDs(hits))
		}
	}
}
