package aip_test

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
)

func TestPageTokensAreBoundToTheirQuery(t *testing.T) {
	q := aip.QueryDigest("apps/a/users/u", "labels.team = \"core\"")
	if q == aip.QueryDigest("apps/a/users/u", "labels.team = \"other\"") || q == aip.QueryDigest("apps/a/users/ulabels.team = \"core\"") {
		t.Error("QueryDigest does not tell queries apart (parts must not run together)")
	}
	list := []int{1, 2, 3, 4}
	page, token := aip.Page(list, 3, q, func(last int) aip.PageToken { return aip.PageToken{Seq: int64(last)} })
	if len(page) != 3 || token == "" {
		t.Fatalf("Page of 4 fetched for 3 = %v, %q; want 3 items and a token", page, token)
	}
	if _, token := aip.Page(list[:3], 3, q, nil); token != "" {
		t.Errorf("a last page has a next token %q", token)
	}
	got, err := aip.DecodePageToken(token, q)
	if err != nil || got.Seq != 3 {
		t.Errorf("DecodePageToken = %+v, %v; want the cursor of the page's last item", got, err)
	}
	if _, err := aip.DecodePageToken(token, aip.QueryDigest("apps/a/users/v")); !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), "other parameters") {
		t.Errorf("a token of another query: %v", err)
	}
	if _, err := aip.DecodePageToken("not*base64", q); !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), "malformed") {
		t.Errorf("a malformed token: %v", err)
	}
	if first, err := aip.DecodePageToken("", q); err != nil || first != (aip.PageToken{}) {
		t.Errorf("the empty token = %+v, %v; want the first page", first, err)
	}
}

// TestForgedPageTokensAreInvalid: a token is JSON a caller can read and
// edit; whatever is changed in it (a negative offset, sequence or time, a
// field kioku does not write, data after it, an oversized cursor) is
// INVALID_ARGUMENT naming page_token, never a cursor a store or a slice
// expression could trip on.
func TestForgedPageTokensAreInvalid(t *testing.T) {
	q := aip.QueryDigest("search", "a", "u")
	forge := func(body string) string { return base64.RawURLEncoding.EncodeToString([]byte(body)) }
	if got, err := aip.DecodePageToken(forge(`{"q":"`+q+`","o":10}`), q); err != nil || got.Offset != 10 {
		t.Fatalf("a genuine offset: %+v, %v", got, err)
	}
	for what, token := range map[string]string{
		"offset -1":     forge(`{"q":"` + q + `","o":-1}`),
		"sequence -1":   forge(`{"q":"` + q + `","s":-1}`),
		"time -1":       forge(`{"q":"` + q + `","t":-1,"i":"x"}`),
		"offset 1e99":   forge(`{"q":"` + q + `","o":1e99}`),
		"a string":      forge(`{"q":"` + q + `","o":"1"}`),
		"unknown field": forge(`{"q":"` + q + `","x":1}`),
		"trailing data": forge(`{"q":"` + q + `"}{}`),
		"not an object": forge(`[1]`),
		"a long id":     forge(`{"q":"` + q + `","i":"` + strings.Repeat("x", 3000) + `"}`),
		"too long":      strings.Repeat("A", 5000),
	} {
		_, err := aip.DecodePageToken(token, q)
		if !fault.Is(err, fault.Invalid) || fault.FieldOf(err) != "page_token" || !strings.Contains(err.Error(), "malformed") {
			t.Errorf("%s: %v; want INVALID_ARGUMENT, page_token malformed", what, err)
		}
	}
}

// TestPageLen: a page ends at its size, or early with the item that
// passes the byte budget.
func TestPageLen(t *testing.T) {
	id := func(n int) int { return n }
	for _, c := range []struct {
		list           []int
		size, maxBytes int
		want           int
	}{
		{[]int{1, 1, 1, 1}, 3, 10, 3}, // the size first
		{[]int{4, 4, 4, 4}, 3, 6, 2},  // the item that passes 6 ends it
		{[]int{4, 4, 4, 4}, 4, 8, 3},  // 8 is within the budget; the third passes it
		{[]int{9, 1}, 3, 5, 1},        // one item over the budget alone
		{[]int{2}, 3, 5, 3},           // a short list: the size, Page keeps it whole
		{nil, 3, 5, 3},
	} {
		if got := aip.PageLen(c.list, c.size, c.maxBytes, id); got != c.want {
			t.Errorf("PageLen(%v, %d, %d) = %d, want %d", c.list, c.size, c.maxBytes, got, c.want)
		}
	}
}

// TestTruncate: a cut never splits a character, so a message quoting
// a model's reply in Japanese stays valid UTF-8.
func TestTruncate(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "abc..."},
		{"日本語です", 4, "日..."}, // 3-byte characters: byte 4 is inside the second
		{"日本語です", 6, "日本..."},
		{"日本語です", 2, "..."},
	} {
		got := aip.Truncate(c.s, c.n)
		if got != c.want || !utf8.ValidString(got) {
			t.Errorf("Truncate(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

func TestIDsAndPageSizes(t *testing.T) {
	for _, c := range []struct {
		id, extra, msg string
	}{
		{"", aip.AppIDChars, "is required"},
		{strings.Repeat("a", 129), aip.AppIDChars, "the limit is 128"},
		{"-a", aip.AppIDChars, "must start with an ASCII letter or digit"},
		{"\uff41bc", aip.AppIDChars, "U+FF41, not ASCII"},
		{"a\uff42c", aip.AppIDChars, "U+FF42, not ASCII) at byte 1"},
		{"a b", aip.AppIDChars, "U+0020 (a space or control character)"},
		{"a\xffb", aip.AppIDChars, "a byte that is not valid UTF-8"},
		{"a/b", aip.AppIDChars, `the character '/'`},
		{"ann@example.com", aip.AppIDChars, `the character '@'`},
	} {
		if err := aip.ValidateID("app id", c.id, c.extra); !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), "app id") {
			t.Errorf("ValidateID(%.20q) = %v, want INVALID_ARGUMENT naming the field and %q", c.id, err, c.msg)
		}
	}
	if err := aip.ValidateID("user id", "ann@example.com", aip.UserIDChars); err != nil {
		t.Errorf("an email as a user id: %v", err)
	}
	for i := range 200 {
		if id := aip.NewID(); len(id) != 20 || aip.ValidateID("session id", id, aip.SessionIDChars) != nil {
			t.Fatalf("NewID() = %q (try %d)", id, i)
		}
	}

	// Sizes over the maximum are coerced to it (AIP-158).
	for n, want := range map[int32]int{0: aip.DefaultPageSize, 1: 1, 1000: 1000, 1001: 1000, 5000: 1000} {
		if got, err := aip.PageSize("page_size", n); err != nil || got != want {
			t.Errorf("PageSize(%d) = %d, %v; want %d", n, got, err, want)
		}
	}
	if got, err := aip.PageSizeWithin("page_size", 5000, 100, 100); err != nil || got != 100 {
		t.Errorf("PageSizeWithin(5000, 100, 100) = %d, %v; want 100", got, err)
	}
	for n, msg := range map[int32]string{-1: "must not be negative"} {
		if _, err := aip.PageSize("page_size", n); !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), msg) || !strings.Contains(err.Error(), "page_size") {
			t.Errorf("PageSize(%d) = %v, want INVALID_ARGUMENT naming page_size and %q", n, err, msg)
		}
	}
}

// FuzzResourceNames checks that name parsing never panics, rejects what it
// cannot use with Invalid, and that whatever it accepts names exactly the
// resource it parsed.
func FuzzResourceNames(f *testing.F) {
	for _, s := range []string{
		"apps/a/users/u/sessions/s",
		"apps/a/users/u/sessions/s/",
		"apps//users/u/sessions/s",
		"apps/a/users/ann@example.com/sessions/s-1",
		"apps/a/users/-/sessions/s",
		"apps/../users/u/sessions/s",
		"apps/a/users/u/sessions/s\xff",
		"apps/a/state",
		"apps/a/users/u/state",
		"apps/a/users/-",
		"apps/a",
		"apps/a/memories/m",
		"apps/a/operations/o",
		"apps/a/memoryBankConfig",
		"",
	} {
		f.Add(s)
	}
	invalid := func(t *testing.T, what, name string, err error) {
		if fault.KindOf(err) != fault.Invalid {
			t.Fatalf("%s(%q): %v is not Invalid", what, name, err)
		}
	}
	f.Fuzz(func(t *testing.T, name string) {
		if app, user, session, err := aip.ParseSession("name", name); err != nil {
			invalid(t, "ParseSession", name, err)
		} else if got := aip.SessionName(app, user, session); got != name {
			t.Fatalf("ParseSession(%q) names %q", name, got)
		}
		if app, user, err := aip.ParseUserOrAll("parent", name); err != nil {
			invalid(t, "ParseUserOrAll", name, err)
		} else if user != "" && aip.UserName(app, user) != name || user == "" && name != aip.AppName(app) && name != aip.UserName(app, aip.AllUsers) {
			t.Fatalf("ParseUserOrAll(%q) = %q, %q", name, app, user)
		}
		if app, user, err := aip.ParseState("name", name); err != nil {
			invalid(t, "ParseState", name, err)
		} else if user == "" && aip.AppStateName(app) != name || user != "" && aip.UserStateName(app, user) != name {
			t.Fatalf("ParseState(%q) = %q, %q", name, app, user)
		}
		if app, m, err := aip.ParseMemory("name", name); err != nil {
			invalid(t, "ParseMemory", name, err)
		} else if aip.MemoryName(app, m) != name {
			t.Fatalf("ParseMemory(%q) = %q, %q", name, app, m)
		}
		if app, op, err := aip.ParseOperation("name", name); err != nil {
			invalid(t, "ParseOperation", name, err)
		} else if aip.OperationName(app, op) != name {
			t.Fatalf("ParseOperation(%q) = %q, %q", name, app, op)
		}
		if app, err := aip.ParseMemoryBankConfig("name", name); err != nil {
			invalid(t, "ParseMemoryBankConfig", name, err)
		} else if aip.MemoryBankConfigName(app) != name {
			t.Fatalf("ParseMemoryBankConfig(%q) = %q", name, app)
		}
	})
}

func TestParseNamesTheFieldAndTheForm(t *testing.T) {
	for _, c := range []struct {
		parse func() error
		msg   string
	}{
		{func() error { _, _, _, err := aip.ParseSession("session_source.session", ""); return err }, "session_source.session is required (apps/{app}/users/{user}/sessions/{session})"},
		{func() error { _, _, _, err := aip.ParseSession("name", "apps/a/users/u"); return err }, `name "apps/a/users/u" is not of the form apps/{app}/users/{user}/sessions/{session}`},
		{func() error { _, _, _, err := aip.ParseSession("name", "apps/a/users/u/sessions/s!"); return err }, `session id "s!" has the character '!'`},
		{func() error { _, _, err := aip.ParseUserOrAll("parent", "apps/a/sessions"); return err }, "not of the form apps/{app}/users/{user} or apps/{app}"},
		{func() error { _, _, err := aip.ParseState("name", "apps/a/users/u"); return err }, "apps/{app}/state or apps/{app}/users/{user}/state"},
		{func() error { _, _, err := aip.ParseState("name", "apps/a/users/u!/state"); return err }, `user id "u!"`},
		{func() error { _, err := aip.ParseApp("parent", "apps/a.b/"); return err }, "not of the form apps/{app}"},
		{func() error { _, _, err := aip.ParseMemory("name", "apps/a/memories/m.1"); return err }, `memory id "m.1" has the character '.'`},
	} {
		if err := c.parse(); !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v, want INVALID_ARGUMENT with %q", err, c.msg)
		}
	}
}

func TestPatterns(t *testing.T) {
	p := aip.NewPattern("projects/{project}/locations/{location}/reasoningEngines/{engine}/sessions/{session}")
	name := p.Build("p1", "us-central1", "123", "s1")
	if name != "projects/p1/locations/us-central1/reasoningEngines/123/sessions/s1" {
		t.Fatalf("Build = %q", name)
	}
	if vars, ok := p.Match(name); !ok || strings.Join(vars, ",") != "p1,us-central1,123,s1" {
		t.Fatalf("Match(%q) = %v, %v", name, vars, ok)
	}
	for _, bad := range []string{"projects/p1/locations/us-central1/reasoningEngines/123/sessions/", "projects/p1/locations/l/reasoningEngines/123/sessions/s1/x", "projects/p1/regions/l/reasoningEngines/1/sessions/s"} {
		if _, ok := p.Match(bad); ok {
			t.Errorf("Match(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"apps//x", "apps/{a", "apps/x{a}", "apps/{}", ""} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewPattern(%q) did not panic", bad)
				}
			}()
			aip.NewPattern(bad)
		}()
	}
}

// TestClock: a configured clock and id source are kept; nil ones become
// time.Now and NewID.
func TestClock(t *testing.T) {
	fixed := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	now, newID := aip.Clock(func() time.Time { return fixed }, func() string { return "x" })
	if !now().Equal(fixed) || newID() != "x" {
		t.Errorf("Clock kept %v, %q; want %v, x", now(), newID(), fixed)
	}
	now, newID = aip.Clock(nil, nil)
	if d := time.Since(now()); d < 0 || d > time.Minute {
		t.Errorf("aip.Clock(nil) now = %v, not the time", now())
	}
	if id := newID(); len(id) != 20 || aip.ValidateID("id", id, aip.AppIDChars) != nil {
		t.Errorf("aip.Clock(nil) newID = %q, not an id of NewID's", id)
	}
}
