package aip_test

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/resource"
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

func TestNewIDAndPageSizes(t *testing.T) {
	for i := range 200 {
		if id := aip.NewID(); len(id) != 20 || resource.ValidateID("session id", id, resource.SessionIDChars) != nil {
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
	if id := newID(); len(id) != 20 || resource.ValidateID("id", id, resource.AppIDChars) != nil {
		t.Errorf("aip.Clock(nil) newID = %q, not an id of NewID's", id)
	}
}
