package sessions_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/sessions"
)

// The domain rules the stores rely on, checked without a store (the
// conformance suite checks them again through every backend).

func TestScopesAndDeltas(t *testing.T) {
	for key, want := range map[string]sessions.Scope{
		"mood": sessions.ScopeSession, "user:drink": sessions.ScopeUser, "app:model": sessions.ScopeApp,
		"temp:draft": sessions.ScopeTemp, "User:x": sessions.ScopeSession, "userx": sessions.ScopeSession,
		"app": sessions.ScopeSession, "": sessions.ScopeSession,
	} {
		if got := sessions.ScopeOf(key); got != want {
			t.Errorf("ScopeOf(%q) = %v, want %v", key, got, want)
		}
	}

	delta := map[string]any{"mood": "calm", "user:drink": "tea", "app:v": 2.0, "temp:x": 1.0, "gone": nil}
	d := sessions.SplitDelta(delta)
	if !maps.Equal(d.Session, map[string]any{"mood": "calm", "gone": nil}) || !maps.Equal(d.User, map[string]any{"user:drink": "tea"}) || !maps.Equal(d.App, map[string]any{"app:v": 2.0}) {
		t.Errorf("SplitDelta = %+v", d)
	}
	if d.Empty() || !sessions.SplitDelta(map[string]any{"temp:only": 1.0}).Empty() {
		t.Error("Empty: a delta of only temp: keys changes no scope, any other does")
	}
	stripped := sessions.StripTemp(delta)
	if _, ok := stripped["temp:x"]; ok || len(stripped) != 4 {
		t.Errorf("StripTemp = %v", stripped)
	}
	if _, ok := delta["temp:x"]; !ok {
		t.Error("StripTemp changed its argument")
	}
}

func TestApplyDeltaReplacesWholeAndDeletesOnNull(t *testing.T) {
	old := map[string]any{"prefs": map[string]any{"tea": true, "milk": false}, "n": 1.0, "keep": "k"}
	got := sessions.ApplyDelta(old, map[string]any{"prefs": map[string]any{"coffee": true}, "n": nil, "new": "v"})
	want := map[string]any{"prefs": map[string]any{"coffee": true}, "keep": "k", "new": "v"}
	if len(got) != len(want) || got["keep"] != "k" || got["new"] != "v" || len(got["prefs"].(map[string]any)) != 1 {
		t.Errorf("ApplyDelta = %v, want %v (values replaced whole, null deletes)", got, want)
	}
	if _, ok := old["new"]; ok || old["n"] != 1.0 {
		t.Error("ApplyDelta changed the old state")
	}

	_, _, err := sessions.UpdatedState(nil, map[string]any{"big": strings.Repeat("x", 100)}, "user", 64)
	if !fault.Is(err, fault.ResourceExhausted) || !strings.Contains(err.Error(), "user state") || !strings.Contains(err.Error(), "64") {
		t.Errorf("UpdatedState over the limit: %v, want RESOURCE_EXHAUSTED naming the scope and the limit", err)
	}
	st, enc, err := sessions.UpdatedState(map[string]any{"a": 1.0}, map[string]any{"a": nil}, "session", 64)
	if err != nil || len(st) != 0 || string(enc) != "{}" {
		t.Errorf("UpdatedState deleting the last key = %v, %s, %v", st, enc, err)
	}
	back, err := sessions.DecodeState(enc)
	if err != nil || back == nil || len(back) != 0 {
		t.Errorf("DecodeState(%s) = %v, %v; want an empty, non-nil map", enc, back, err)
	}

	merged := sessions.Merge(map[string]any{"s": 1.0}, map[string]any{"user:u": 2.0}, map[string]any{"app:a": 3.0})
	if len(merged) != 3 {
		t.Errorf("Merge = %v", merged)
	}
}

func TestPageTokensAreBoundToTheirQuery(t *testing.T) {
	q := sessions.QueryDigest("apps/a/users/u", "labels.team = \"core\"")
	if q == sessions.QueryDigest("apps/a/users/u", "labels.team = \"other\"") || q == sessions.QueryDigest("apps/a/users/ulabels.team = \"core\"") {
		t.Error("QueryDigest does not tell queries apart (parts must not run together)")
	}
	list := []int{1, 2, 3, 4}
	page, token := sessions.Page(list, 3, q, func(last int) sessions.PageToken { return sessions.PageToken{Seq: int64(last)} })
	if len(page) != 3 || token == "" {
		t.Fatalf("Page of 4 fetched for 3 = %v, %q; want 3 items and a token", page, token)
	}
	if _, token := sessions.Page(list[:3], 3, q, nil); token != "" {
		t.Errorf("a last page has a next token %q", token)
	}
	got, err := sessions.DecodePageToken(token, q)
	if err != nil || got.Seq != 3 {
		t.Errorf("DecodePageToken = %+v, %v; want the cursor of the page's last item", got, err)
	}
	if _, err := sessions.DecodePageToken(token, sessions.QueryDigest("apps/a/users/v")); !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), "other parameters") {
		t.Errorf("a token of another query: %v", err)
	}
	if _, err := sessions.DecodePageToken("not*base64", q); !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), "malformed") {
		t.Errorf("a malformed token: %v", err)
	}
	if first, err := sessions.DecodePageToken("", q); err != nil || first != (sessions.PageToken{}) {
		t.Errorf("the empty token = %+v, %v; want the first page", first, err)
	}
}

func TestParseFilter(t *testing.T) {
	got, err := sessions.ParseFilter(` display_name = "weekly \"sync\"" and labels.team=core `)
	want := []sessions.Condition{{Field: "display_name", Value: `weekly "sync"`}, {Field: "labels.team", Value: "core"}}
	if err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("ParseFilter = %v, %v; want %v", got, err, want)
	}
	if got, err := sessions.ParseFilter("  "); err != nil || got != nil {
		t.Errorf("an empty filter = %v, %v", got, err)
	}
	for filter, msg := range map[string]string{
		`display_name`:                     "'=' after display_name",
		`display_name = "open`:             "unterminated",
		`a = "1" OR b = "2"`:               "expected AND",
		`= "x"`:                            "a field name",
		`a =`:                              "a value for a",
		strings.Repeat("a", 5000) + ` = b`: "limit is 4096",
	} {
		if _, err := sessions.ParseFilter(filter); !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseFilter(%.40q) = %v, want INVALID_ARGUMENT with %q", filter, err, msg)
		}
	}
}

func TestIDsAndPageSizes(t *testing.T) {
	for _, c := range []struct {
		id, extra, msg string
	}{
		{"", sessions.AppIDChars, "is required"},
		{strings.Repeat("a", 129), sessions.AppIDChars, "the limit is 128"},
		{"-a", sessions.AppIDChars, "must start with a letter or digit"},
		{"a/b", sessions.AppIDChars, `the character '/'`},
		{"ann@example.com", sessions.AppIDChars, `the character '@'`},
	} {
		if err := sessions.ValidateID("app id", c.id, c.extra); !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), "app id") {
			t.Errorf("ValidateID(%.20q) = %v, want INVALID_ARGUMENT naming the field and %q", c.id, err, c.msg)
		}
	}
	if err := sessions.ValidateID("user id", "ann@example.com", sessions.UserIDChars); err != nil {
		t.Errorf("an email as a user id: %v", err)
	}
	for i := range 200 {
		if id := sessions.NewID(); len(id) != 20 || sessions.ValidateID("session id", id, sessions.SessionIDChars) != nil {
			t.Fatalf("NewID() = %q (try %d)", id, i)
		}
	}

	for n, want := range map[int32]int{0: sessions.DefaultPageSize, 1: 1, 1000: 1000} {
		if got, err := sessions.PageSize("page_size", n); err != nil || got != want {
			t.Errorf("PageSize(%d) = %d, %v; want %d", n, got, err, want)
		}
	}
	for n, msg := range map[int32]string{-1: "must not be negative", 1001: "the limit is 1000"} {
		if _, err := sessions.PageSize("page_size", n); !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), msg) || !strings.Contains(err.Error(), "page_size") {
			t.Errorf("PageSize(%d) = %v, want INVALID_ARGUMENT naming page_size and %q", n, err, msg)
		}
	}
}
