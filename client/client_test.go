package client_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
)

// serve runs a real kioku whose handler is wrapped by wrap, which can reach
// the request's TCP connection through connOf.
func serve(t *testing.T, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	n := nodetest.Open(t, node.Config{})
	srv := httptest.NewUnstartedServer(wrap(n.Handler()))
	srv.Config.Protocols = n.HTTPServer().Protocols
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) }
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestAuthHeaderOnEveryCall(t *testing.T) {
	var seen, calls atomic.Int32
	url := serve(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			if r.Header.Get("Authorization") == "Bearer s3cret" && r.Header.Get("X-Tenant") == "t1" {
				seen.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	})
	c := client.New(url, client.WithAuthToken("s3cret"), client.WithHeader("X-Tenant", "t1"))
	ctx := t.Context()
	if _, err := c.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: client.UserName("a", "u"), SessionId: "s"}); err != nil {
		t.Fatal(err)
	}
	// A stream carries the headers too.
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	for range c.WatchSession(wctx, &kiokuv1.WatchSessionRequest{Name: client.SessionName("a", "u", "s")}) {
	}
	if seen.Load() != calls.Load() || calls.Load() != 2 {
		t.Fatalf("%d of %d calls carried the headers", seen.Load(), calls.Load())
	}
}

func TestIteratorsAndWatch(t *testing.T) {
	url := serve(t, func(h http.Handler) http.Handler { return h })
	c := client.New(url)
	ctx := t.Context()
	for i := range 7 {
		if _, err := c.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: client.UserName("a", "u"), SessionId: fmt.Sprint("s", i)}); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for s, err := range c.AllSessions(ctx, &kiokuv1.ListSessionsRequest{Parent: client.UserName("a", "u"), PageSize: 3}) {
		if err != nil {
			t.Fatal(err)
		}
		if s.GetName() == "" {
			t.Fatal("empty session")
		}
		n++
	}
	if n != 7 {
		t.Fatalf("AllSessions yielded %d, want 7", n)
	}
	// Stopping early stops fetching.
	for range c.AllSessions(ctx, &kiokuv1.ListSessionsRequest{Parent: client.UserName("a", "u"), PageSize: 3}) {
		break
	}
	// An error is yielded once.
	for _, err := range c.AllSessions(ctx, &kiokuv1.ListSessionsRequest{Parent: "bad"}) {
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("bad parent: %v", err)
		}
	}

	name := client.SessionName("a", "u", "s0")
	got := make(chan string, 10)
	go func() {
		for ev, err := range c.WatchSession(ctx, &kiokuv1.WatchSessionRequest{Name: name}) {
			if err != nil {
				got <- "error: " + err.Error()
				return
			}
			got <- ev.GetId()
		}
		close(got)
	}()
	time.Sleep(200 * time.Millisecond)
	c.AppendEvent(ctx, &kiokuv1.AppendEventRequest{Name: name, Event: &kiokuv1.Event{Id: "live"}})
	if id := <-got; id != "live" {
		t.Fatalf("watched %q", id)
	}
	c.DeleteSession(ctx, &kiokuv1.DeleteSessionRequest{Name: name})
	select {
	case v, ok := <-got:
		if ok {
			t.Fatalf("after deletion the watch yielded %q", v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not end with the session")
	}
}

func TestOperationError(t *testing.T) {
	op := &kiokuv1.Operation{Name: "apps/a/operations/o", Done: true, Result: &kiokuv1.Operation_Error{Error: &kiokuv1.Status{Code: int32(connect.CodeFailedPrecondition), Message: "no model"}}}
	err := client.OperationError(op)
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("OperationError = %v", err)
	}
	if _, err := client.GenerateResult(op); err == nil {
		t.Fatal("GenerateResult of a failed operation succeeded")
	}
	if client.OperationError(&kiokuv1.Operation{Done: true}) != nil {
		t.Fatal("error for a successful operation")
	}
}

func TestDelta(t *testing.T) {
	d := client.Delta(map[string]any{"user:drink": "tea", "n": 2, "gone": nil, "list": []any{"a", 1.5}})
	if got := d.AsMap(); got["user:drink"] != "tea" || got["n"] != 2.0 || got["gone"] != nil || len(got) != 4 {
		t.Fatalf("Delta = %v", got)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "client.Delta") {
			t.Fatalf("Delta of a channel: recovered %v, want a panic naming client.Delta", r)
		}
	}()
	client.Delta(map[string]any{"c": make(chan int)})
}
