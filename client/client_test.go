package client_test

import (
	"context"
	"errors"
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
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/resource"
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
	if _, err := c.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: resource.UserName("a", "u"), SessionId: "s"}); err != nil {
		t.Fatal(err)
	}
	// A stream carries the headers too.
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	for range c.WatchSession(wctx, &kiokuv1.WatchSessionRequest{Name: resource.SessionName("a", "u", "s")}) {
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
		if _, err := c.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: resource.UserName("a", "u"), SessionId: fmt.Sprint("s", i)}); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for s, err := range c.AllSessions(ctx, &kiokuv1.ListSessionsRequest{Parent: resource.UserName("a", "u"), PageSize: 3}) {
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
	for range c.AllSessions(ctx, &kiokuv1.ListSessionsRequest{Parent: resource.UserName("a", "u"), PageSize: 3}) {
		break
	}
	// An error is yielded once.
	for _, err := range c.AllSessions(ctx, &kiokuv1.ListSessionsRequest{Parent: "bad"}) {
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("bad parent: %v", err)
		}
	}

	name := resource.SessionName("a", "u", "s0")
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

type connKey struct{}

func connOf(r *http.Request) net.Conn { return r.Context().Value(connKey{}).(net.Conn) }

// isProcedure reports whether r calls the procedure (Connect and gRPC
// both POST to its path).
func isProcedure(r *http.Request, procedure string) bool { return r.URL.Path == procedure }

// appendTea creates the session a/u/s through c and appends to it a
// user's event, "I prefer tea.", returning the session's name, the event
// sent and AppendEvent's answer.
func appendTea(t *testing.T, c *client.Client) (string, *kiokuv1.Event, *kiokuv1.AppendEventResponse, error) {
	t.Helper()
	name := resource.SessionName("a", "u", "s")
	if _, err := c.CreateSession(t.Context(), &kiokuv1.CreateSessionRequest{Parent: resource.UserName("a", "u"), SessionId: "s"}); err != nil {
		t.Fatal(err)
	}
	ev := &kiokuv1.Event{Author: "user", Content: client.Text("user", "I prefer tea.")}
	res, err := c.AppendEvent(t.Context(), &kiokuv1.AppendEventRequest{Name: name, Event: ev})
	return name, ev, res, err
}

// TestAppendRetriedAfterLostResponse: the server stores the first append
// and the connection breaks before the response; the client retries with
// the id it gave the event, and the session holds the event once.
func TestAppendRetriedAfterLostResponse(t *testing.T) {
	for _, proto := range []struct {
		name string
		opts []client.Option
	}{{"connect", nil}, {"grpc", []client.Option{client.WithGRPC()}}} {
		t.Run(proto.name, func(t *testing.T) {
			var attempts atomic.Int32
			url := serve(t, func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if !isProcedure(r, kiokuv1connect.SessionServiceAppendEventProcedure) {
						h.ServeHTTP(w, r)
						return
					}
					if attempts.Add(1) > 1 {
						h.ServeHTTP(w, r)
						return
					}
					// Store it, then drop the connection instead of answering.
					h.ServeHTTP(httptest.NewRecorder(), r)
					connOf(r).Close()
				})
			})
			c := client.New(url, proto.opts...)
			ctx := t.Context()
			name, ev, res, err := appendTea(t, c)
			if err != nil {
				t.Fatalf("AppendEvent: %v", err)
			}
			if ev.GetId() == "" || res.GetEvent().GetId() != ev.GetId() {
				t.Fatalf("event id %q, stored %q: want the id the client gave", ev.GetId(), res.GetEvent().GetId())
			}
			if attempts.Load() != 2 {
				t.Fatalf("%d append attempts reached the server, want 2 (one lost response, one retry)", attempts.Load())
			}
			var stored []string
			for e, err := range c.AllEvents(ctx, &kiokuv1.ListEventsRequest{Parent: name}) {
				if err != nil {
					t.Fatal(err)
				}
				stored = append(stored, e.GetId())
			}
			if len(stored) != 1 || stored[0] != ev.GetId() || res.GetEvent().GetSequence() != 1 {
				t.Fatalf("stored events %v (sequence %d), want just %s at 1", stored, res.GetEvent().GetSequence(), ev.GetId())
			}
		})
	}
}

// unavailable answers the first n calls of procedure with UNAVAILABLE and
// counts the calls of it.
func unavailable(procedure string, n int32, calls *atomic.Int32, headers *atomic.Int32) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !isProcedure(r, procedure) {
				h.ServeHTTP(w, r)
				return
			}
			if len(r.Header.Values("Authorization")) == 1 {
				headers.Add(1)
			}
			if calls.Add(1) <= n {
				connect.NewErrorWriter().Write(w, r, connect.NewError(connect.CodeUnavailable, errors.New("restarting")))
				return
			}
			h.ServeHTTP(w, r)
		})
	}
}

func TestRetryUnavailable(t *testing.T) {
	fast := client.WithRetry(client.RetryPolicy{InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	ctx := t.Context()

	// A read is retried until it succeeds, its headers sent once per attempt.
	var calls, headers atomic.Int32
	url := serve(t, unavailable(kiokuv1connect.SessionServiceGetStateProcedure, 2, &calls, &headers))
	c := client.New(url, fast, client.WithAuthToken("k"))
	if _, err := c.GetState(ctx, &kiokuv1.GetStateRequest{Name: resource.AppStateName("a")}); err != nil {
		t.Fatalf("GetState after two UNAVAILABLE: %v", err)
	}
	if calls.Load() != 3 || headers.Load() != 3 {
		t.Fatalf("%d attempts, %d with one Authorization header; want 3 and 3", calls.Load(), headers.Load())
	}

	// The attempts are bounded.
	calls.Store(0)
	c = client.New(url, client.WithRetry(client.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Millisecond}))
	if _, err := c.GetState(ctx, &kiokuv1.GetStateRequest{Name: resource.AppStateName("a")}); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("GetState with 2 attempts against 2 failures: %v, want UNAVAILABLE", err)
	}
	if calls.Load() != 2 {
		t.Fatalf("%d attempts, want 2", calls.Load())
	}

	// A call that may not be repeated fails with the first error.
	calls.Store(0)
	url = serve(t, unavailable(kiokuv1connect.SessionServiceCreateSessionProcedure, 1, &calls, &headers))
	c = client.New(url, fast)
	if _, err := c.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: resource.UserName("a", "u")}); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("CreateSession: %v, want UNAVAILABLE", err)
	}
	if calls.Load() != 1 {
		t.Fatalf("CreateSession was made %d times, want 1", calls.Load())
	}

	// The context ends the waiting.
	calls.Store(0)
	url = serve(t, unavailable(kiokuv1connect.SessionServiceGetStateProcedure, 1000, &calls, &headers))
	c = client.New(url, client.WithRetry(client.RetryPolicy{MaxAttempts: 1000, InitialBackoff: time.Hour}))
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := c.GetState(short, &kiokuv1.GetStateRequest{Name: resource.AppStateName("a")}); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("GetState: %v, want the last UNAVAILABLE", err)
	}
	if calls.Load() != 1 {
		t.Fatalf("%d attempts within a deadline shorter than the backoff, want 1", calls.Load())
	}
}

// TestRetryRefused: a server that is not listening yet refuses the
// connection; any call, even one that may not be repeated, is made again
// since the server never saw it.
func TestRetryRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	n := nodetest.Open(t, node.Config{})
	started := make(chan error, 1)
	go func() {
		time.Sleep(150 * time.Millisecond)
		ln, err := net.Listen("tcp", addr)
		started <- err
		if err == nil {
			srv := n.HTTPServer()
			go srv.Serve(ln)
			t.Cleanup(func() { srv.Close() })
		}
	}()
	c := client.New("http://"+addr, client.WithRetry(client.RetryPolicy{MaxAttempts: 20, InitialBackoff: 50 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}))
	s, err := c.CreateSession(t.Context(), &kiokuv1.CreateSessionRequest{Parent: resource.UserName("a", "u")})
	if err := <-started; err != nil {
		t.Fatalf("the port was taken meanwhile: %v", err)
	}
	if err != nil || !strings.HasPrefix(s.GetName(), "apps/a/users/u/sessions/") {
		t.Fatalf("CreateSession while the server starts: %v, %v", s, err)
	}
}

// TestRetryStoredAppend: the server stores an append and answers a code of
// unknown outcome (as kioku does when its store did not confirm a write);
// the client sends it again with the same event id for UNAVAILABLE and
// ABORTED, and the session holds the event once. INTERNAL is not retried.
func TestRetryStoredAppend(t *testing.T) {
	for _, c := range []struct {
		code     connect.Code
		attempts int32
	}{{connect.CodeUnavailable, 2}, {connect.CodeAborted, 2}, {connect.CodeInternal, 1}} {
		t.Run(c.code.String(), func(t *testing.T) {
			var attempts atomic.Int32
			url := serve(t, func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if !isProcedure(r, kiokuv1connect.SessionServiceAppendEventProcedure) || attempts.Add(1) > 1 {
						h.ServeHTTP(w, r)
						return
					}
					h.ServeHTTP(httptest.NewRecorder(), r) // stored
					connect.NewErrorWriter().Write(w, r, connect.NewError(c.code, errors.New("the write was not confirmed")))
				})
			})
			cl := client.New(url, client.WithRetry(client.RetryPolicy{InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}))
			ctx := t.Context()
			name, ev, res, err := appendTea(t, cl)
			if attempts.Load() != c.attempts {
				t.Fatalf("%d attempts, want %d", attempts.Load(), c.attempts)
			}
			if c.attempts == 1 {
				if connect.CodeOf(err) != c.code {
					t.Fatalf("AppendEvent: %v, want %v unretried", err, c.code)
				}
			} else if err != nil || res.GetEvent().GetId() != ev.GetId() || res.GetEvent().GetSequence() != 1 {
				t.Fatalf("AppendEvent: %v, %v; want the stored event %s at 1", res, err, ev.GetId())
			}
			list, err := cl.ListEvents(ctx, &kiokuv1.ListEventsRequest{Parent: name})
			if err != nil || len(list.GetEvents()) != 1 || list.GetEvents()[0].GetId() != ev.GetId() {
				t.Fatalf("stored events %v, %v; want just %s", list.GetEvents(), err, ev.GetId())
			}
		})
	}
}
