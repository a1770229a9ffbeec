package aip

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"

	"github.com/kioku-ai/kioku/fault"
)

// Page sizes of every List method (AIP-158).
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// PageSize returns the page size to use for a request's page_size: the
// default for 0, the maximum for anything larger (AIP-158 coerces rather
// than refuses), or an error naming the field when it is negative.
func PageSize(field string, n int32) (int, error) {
	return PageSizeWithin(field, n, DefaultPageSize, MaxPageSize)
}

// PageSizeWithin is PageSize with a method's own default and maximum.
func PageSizeWithin(field string, n int32, def, max int) (int, error) {
	switch {
	case n < 0:
		return 0, fault.InvalidField(field, "%s must not be negative", field)
	case n == 0:
		return def, nil
	case int(n) > max:
		return max, nil
	}
	return int(n), nil
}

// PageToken is the decoded form of a next_page_token: an opaque cursor
// plus a digest of the query it belongs to, so a token used with other
// parameters is rejected instead of returning a wrong page.
type PageToken struct {
	Query  string `json:"q"`
	Time   int64  `json:"t,omitempty"`
	ID     string `json:"i,omitempty"`
	Seq    int64  `json:"s,omitempty"`
	Offset int    `json:"o,omitempty"`
}

// QueryDigest returns a short digest of the parts of a query a page token
// is bound to.
func QueryDigest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:9])
}

// EncodePageToken encodes a cursor (see DecodePageToken).
func EncodePageToken(t PageToken) string {
	b, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Bounds of a decoded page token: no cursor kioku makes comes near them.
const (
	maxPageTokenBytes = 4096
	maxCursorIDBytes  = 2048
)

// DecodePageToken decodes a token and checks it belongs to the query (a
// QueryDigest); the empty token is the first page. A token is validated,
// not authenticated: it is plain JSON a caller can read and forge, so
// every field is checked (no unknown field, no negative offset, sequence
// or time, an id of bounded length) and anything odd is INVALID_ARGUMENT.
// A forged cursor within those bounds can only move within the results of
// the query it is bound to, whose parameters the caller's key was checked
// against; signing tokens (an HMAC) would need a key shared by every
// server of one database, for no access it would withhold.
func DecodePageToken(token, query string) (PageToken, error) {
	var t PageToken
	if token == "" {
		return t, nil
	}
	malformed := fault.InvalidField("page_token", "page_token is malformed; pass the next_page_token of the previous call unchanged")
	if len(token) > maxPageTokenBytes {
		return PageToken{}, malformed
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return PageToken{}, malformed
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if dec.Decode(&t) != nil || dec.More() {
		return PageToken{}, malformed
	}
	if t.Time < 0 || t.Seq < 0 || t.Offset < 0 || len(t.ID) > maxCursorIDBytes {
		return PageToken{}, malformed
	}
	if t.Query != query {
		return PageToken{}, fault.InvalidField("page_token", "page_token belongs to a call with other parameters; keep every parameter but page_token the same while paging")
	}
	return t, nil
}

// Page trims a list fetched with one item more than a page (Limit size+1)
// to the page, and returns the next page's token: empty when nothing was
// left over, else the cursor of the page's last item, bound to query.
func Page[T any](list []T, size int, query string, cursor func(last T) PageToken) ([]T, string) {
	if len(list) <= size {
		return list, ""
	}
	list = list[:size]
	return list, NextPageToken(list[size-1], query, cursor)
}

// PageLen returns how many of list make a page of at most size items
// whose bytes stay within maxBytes: the page ends early with the item
// that brings the total past maxBytes (that item included, so a page
// always holds one). Page(list, PageLen(...), ...) then trims the list
// and makes the next token when anything is left.
func PageLen[T any](list []T, size, maxBytes int, bytes func(T) int) int {
	total := 0
	for i, x := range list[:min(len(list), size)] {
		if total += bytes(x); total > maxBytes {
			return i + 1
		}
	}
	return size
}

// NextPageToken returns the token of the page after the one ending with
// last, bound to query.
func NextPageToken[T any](last T, query string, cursor func(last T) PageToken) string {
	t := cursor(last)
	t.Query = query
	return EncodePageToken(t)
}
