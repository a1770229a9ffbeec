package transport_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/internal/transport"
)

// TestMalformedRequestsAreTheCallersFault: requests that are wrong on the
// wire get the caller's codes, not INTERNAL or UNKNOWN: a zero
// Connect-Timeout-Ms is DEADLINE_EXCEEDED (and logged as such, not as an
// error), malformed gRPC frames and a JSON lone surrogate are
// INVALID_ARGUMENT saying what is wrong.
func TestMalformedRequestsAreTheCallersFault(t *testing.T) {
	var logs nodetest.LogBuffer
	ts := sessionServerWith(t, transport.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	call := func(ctype string, headers map[string]string, body []byte) (status, message string) {
		t.Helper()
		req, _ := http.NewRequest("POST", ts.URL+kiokuv1connect.SessionServiceGetSessionProcedure, bytes.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		res, err := h2cClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if strings.HasPrefix(ctype, "application/grpc-web") {
			msg, _ := url.PathUnescape(res.Header.Get("Grpc-Message"))
			return res.Header.Get("Grpc-Status"), msg
		}
		if strings.HasPrefix(ctype, "application/grpc") {
			msg, _ := url.PathUnescape(res.Trailer.Get("Grpc-Message"))
			return res.Trailer.Get("Grpc-Status"), msg
		}
		return res.Status, string(out)
	}
	grpc := map[string]string{"Te": "trailers"}
	name := []byte(`{"name": "apps/a/users/u/sessions/s"}`)
	for _, c := range []struct {
		what, ctype     string
		headers         map[string]string
		body            []byte
		status, message string
	}{
		{"Connect-Timeout-Ms: 0", "application/json", map[string]string{"Connect-Timeout-Ms": "0", "Connect-Protocol-Version": "1"}, name, "504 Gateway Timeout", `"code":"deadline_exceeded"`},
		{"a frame cut short", "application/grpc", grpc, []byte{0, 0, 0, 0, 10, 1, 2}, "3", "the body ends 8 bytes short of the message its last frame announced"},
		{"a prefix cut short", "application/grpc", grpc, []byte{0, 0, 0}, "3", "the body ends inside a message frame's 5-byte prefix"},
		{"frame flags", "application/grpc", grpc, []byte{6, 0, 0, 0, 1, 1}, "3", "a message frame has the flags 0x6"},
		{"compressed without an encoding", "application/grpc", grpc, []byte{1, 0, 0, 0, 3, 1, 2, 3}, "3", "marked compressed, but the request names no compression"},
		{"gRPC-Web", "application/grpc-web+proto", nil, []byte{0, 0, 0, 0, 9}, "3", "the body ends 9 bytes short"},
		{"a lone surrogate", "application/json", nil, []byte(`{"name": "apps/a/users/u/sessions/\ud800x"}`), "400 Bad Request", `the JSON escapes \\ud800 at byte 34, half of a UTF-16 surrogate pair`},
		{"a lone low surrogate after an escaped backslash", "application/json", nil, []byte(`{"name": "\\ud800", "x": "\udc00"}`), "400 Bad Request", `the JSON escapes \\udc00 at byte 26`},
	} {
		if status, msg := call(c.ctype, c.headers, c.body); status != c.status || !strings.Contains(msg, c.message) {
			t.Errorf("%s: %s %q; want %s with %q", c.what, status, msg, c.status, c.message)
		}
	}
	// A valid surrogate pair is a character: the request decodes, and the
	// handler finds the character out of place in a session id.
	if status, msg := call("application/json", nil, []byte(`{"name": "apps/a/users/u/sessions/s\ud83d\ude00"}`)); status != "400 Bad Request" || strings.Contains(msg, "surrogate") || !strings.Contains(msg, "session id") {
		t.Errorf("a surrogate pair: %s %s; want the session id refused", status, msg)
	}
	if strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "code=deadline_exceeded") {
		t.Errorf("the calls were logged as:\n%s\nwant no error line, and the timeout as deadline_exceeded", logs.String())
	}
}
