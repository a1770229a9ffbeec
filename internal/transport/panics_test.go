package transport_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/internal/transport"
)

// TestForgedPageTokenIsInvalidArgument: SearchEvents with a genuine page
// token whose offset is changed to -1 (which once panicked, slicing the
// hits at -1) is INVALID_ARGUMENT over Connect and REST, as is any other
// edit of a token.
func TestForgedPageTokenIsInvalidArgument(t *testing.T) {
	_, url := serveNode(t, nil)
	ctx := t.Context()
	c := client.New(url, client.WithHTTPClient(h2cClient()))
	if _, err := c.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: "apps/a/users/ann", SessionId: "s1"}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := c.AppendEvent(ctx, &kiokuv1.AppendEventRequest{Name: "apps/a/users/ann/sessions/s1", Event: &kiokuv1.Event{
			Author: "user", Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: fmt.Sprintf("green tea number %d", i)}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := c.SearchEvents(ctx, &kiokuv1.SearchEventsRequest{Parent: "apps/a/users/ann", Query: "tea", PageSize: 1})
	if err != nil || first.GetNextPageToken() == "" {
		t.Fatalf("the first page: %v, %v", first, err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(first.GetNextPageToken())
	if err != nil {
		t.Fatal(err)
	}
	var tok map[string]any
	if err := json.Unmarshal(raw, &tok); err != nil || tok["o"] == nil {
		t.Fatalf("the token is %s (%v); this test edits its offset, o", raw, err)
	}
	forge := func(edit func(map[string]any)) string {
		m := map[string]any{}
		for k, v := range tok {
			m[k] = v
		}
		edit(m)
		b, _ := json.Marshal(m)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	for what, token := range map[string]string{
		"offset -1":     forge(func(m map[string]any) { m["o"] = -1 }),
		"offset -2^31":  forge(func(m map[string]any) { m["o"] = -1 << 31 }),
		"a field added": forge(func(m map[string]any) { m["z"] = 1 }),
	} {
		_, err := c.SearchEvents(ctx, &kiokuv1.SearchEventsRequest{Parent: "apps/a/users/ann", Query: "tea", PageSize: 1, PageToken: token})
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "page_token is malformed") {
			t.Errorf("Connect, %s: %v; want INVALID_ARGUMENT, page_token is malformed", what, err)
		}
		status, out := send(t, "POST", url+"/v1/apps/a/users/ann/events:search", "application/json", `{"query": "tea", "pageSize": 1, "pageToken": "`+token+`"}`, nil)
		if status != 400 || !strings.Contains(out, "page_token is malformed") {
			t.Errorf("REST, %s: %d %s; want 400, page_token is malformed", what, status, out)
		}
	}
	if next, err := c.SearchEvents(ctx, &kiokuv1.SearchEventsRequest{Parent: "apps/a/users/ann", Query: "tea", PageSize: 1, PageToken: first.GetNextPageToken()}); err != nil || len(next.GetResults()) != 1 {
		t.Errorf("the genuine token: %v, %v", next, err)
	}
}

// panicking is a session service whose GetSession panics.
type panicking struct {
	kiokuv1connect.UnimplementedSessionServiceHandler
}

func (panicking) GetSession(context.Context, *connect.Request[kiokuv1.GetSessionRequest]) (*connect.Response[kiokuv1.Session], error) {
	var m map[string]int
	m["boom"]++ // a nil map: a bug
	return nil, nil
}

// TestPanicsAreInternalAndTheirLogIsSampled: a handler that panics answers
// INTERNAL on every protocol and the server goes on serving; 200 calls
// that panic log the panic with its stack a few dozen times at most, the
// line after a pause saying how many were left out.
func TestPanicsAreInternalAndTheirLogIsSampled(t *testing.T) {
	var logs nodetest.LogBuffer
	ts := startServer(t, transport.Config{Sessions: panicking{}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	c := client.New(ts.URL, client.WithHTTPClient(h2cClient()))
	for i := range 200 {
		_, err := c.GetSession(t.Context(), &kiokuv1.GetSessionRequest{Name: "apps/a/users/u/sessions/s"})
		if connect.CodeOf(err) != connect.CodeInternal {
			t.Fatalf("call %d: %v; want INTERNAL", i, err)
		}
	}
	// A moment later the log takes a line again, which counts those left
	// out.
	time.Sleep(300 * time.Millisecond)
	if status, out := send(t, "GET", ts.URL+"/v1/apps/a/users/u/sessions/s", "", "", nil); status != 500 || !strings.Contains(out, "internal error") {
		t.Errorf("over REST: %d %s; want 500 INTERNAL", status, out)
	}
	if status, out := send(t, "POST", ts.URL+"/grpc.health.v1.Health/Check", "application/json", "{}", nil); status != 200 {
		t.Errorf("health after the panics: %d %s", status, out)
	}
	text := logs.String()
	n := strings.Count(text, `msg="panic in handler"`)
	if n == 0 || n > 60 || !strings.Contains(text, "not_logged_before=") || !strings.Contains(text, "assignment to entry in nil map") || !strings.Contains(text, "stack=") {
		t.Errorf("201 panics were logged %d times:\n%.3000s\nwant between 1 and 60 lines with the panic and its stack, and a count of those left out", n, text)
	}
}
