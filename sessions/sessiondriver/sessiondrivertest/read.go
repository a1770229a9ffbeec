package sessiondrivertest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

func testGetRecentAndAfter(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	base := h.appendSpaced(t, s.Key, 10, time.Second)
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
	big := func(i int) *sessiontype.Event {
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

func testListEventsPaging(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	base := h.appendSpaced(t, s.Key, 25, time.Minute)
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
	h.append(t, sessiontype.Key{App: "app1", User: "u1", ID: "s1"}, textEvent("e1", "user", "m"))
	h.append(t, sessiontype.Key{App: "app1", User: "u1", ID: "s3"}, textEvent("e1", "user", "m"))
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
	h.append(t, sessiontype.Key{App: "app1", User: "u2", ID: "s00"}, textEvent("e", "user", "m"))
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

// The search cases: ranking, filters, paging, deletion and expiry, and
// isolation between users and apps.

func (h *harness) search(t *testing.T, r sessions.SearchEventsRequest) ([]sessiontype.SearchHit, string) {
	t.Helper()
	hits, next, err := h.svc.SearchEvents(h.ctx, r)
	if err != nil {
		t.Fatalf("SearchEvents(%+v): %v", r, err)
	}
	return hits, next
}

// hitIDs returns "session/event" for each hit.
func hitIDs(hits []sessiontype.SearchHit) []string {
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
	h.append(t, s2.Key, &sessiontype.Event{ID: "call", Author: "agent", Content: &sessiontype.Content{Parts: []sessiontype.Part{{FunctionCall: &sessiontype.FunctionCall{Name: "lookup"}}}}})

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
	add := func(key sessiontype.Key, id, author string, d int) {
		e := textEvent(id, author, "we talked about the garden")
		e.Timestamp = day(d)
		h.append(t, key, e)
	}
	add(s1.Key, "a", "user", 1)
	add(s1.Key, "b", "agent", 2)
	add(s2.Key, "c", "user", 3)
	add(s2.Key, "d", "agent", 4)
	sorted := func(hits []sessiontype.SearchHit) []string {
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
	var paged []sessiontype.SearchHit
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
