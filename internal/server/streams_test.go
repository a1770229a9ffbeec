package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/internal/server"
	"github.com/kioku-ai/kioku/internal/server/auth"
)

// outcomes counts streams opened and refused, with a refusal's message.
type outcomes struct {
	mu              sync.Mutex
	opened, refused int
	messages        map[string]int
	other           []error
}

func (o *outcomes) add(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case err == nil:
		o.opened++
	case connect.CodeOf(err) == connect.CodeResourceExhausted || strings.Contains(err.Error(), "ResourceExhausted"):
		o.refused++
		if o.messages == nil {
			o.messages = map[string]int{}
		}
		msg := err.Error()
		if i := strings.Index(msg, "desc = "); i >= 0 {
			msg = msg[i+len("desc = "):]
		}
		o.messages[msg]++
	default:
		o.other = append(o.other, err)
	}
}

// want checks that opened streams opened and refused were refused, each
// with a message that has msg, and that nothing else went wrong.
func (o *outcomes) want(t *testing.T, what string, opened, refused int, msg string) {
	t.Helper()
	if o.opened != opened || o.refused != refused || len(o.other) > 0 {
		t.Errorf("%s: %d opened, %d refused (%v), other errors %v; want %d and %d", what, o.opened, o.refused, o.messages, o.other, opened, refused)
	}
	for m := range o.messages {
		if !strings.Contains(m, msg) {
			t.Errorf("%s: refused as %q; want %q", what, m, msg)
		}
	}
}

// TestHealthWatchStreamsAreCapped: 1,500 health Watch streams without a
// key, 15 on each of 100 connections, open up to the server's cap of
// 1,000; the others are RESOURCE_EXHAUSTED naming the cap. One connection
// holds at most 16, and at most 16 reflection streams too. /metrics reports the streams open, the caps and the
// refusals.
func TestHealthWatchStreamsAreCapped(t *testing.T) {
	ts := startServer(t, server.Config{Logger: slog.New(slog.DiscardHandler)})
	addr := strings.TrimPrefix(ts.URL, "http://")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	watch := func(conn *grpc.ClientConn, o *outcomes, wg *sync.WaitGroup) {
		defer wg.Done()
		stream, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = stream.Recv() // the first status, or the refusal
		}
		o.add(err)
	}
	dial := func() *grpc.ClientConn {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}

	// One connection.
	var one outcomes
	var wg sync.WaitGroup
	conn := dial()
	for range server.MaxHealthWatchesPerConn + 4 {
		wg.Add(1)
		go watch(conn, &one, &wg)
	}
	wg.Wait()
	one.want(t, "Watch streams on one connection", server.MaxHealthWatchesPerConn, 4, fmt.Sprintf("this connection has %d health Watch streams open", server.MaxHealthWatchesPerConn))
	conn.Close()

	// Reflection streams, also served without a key, are capped alike.
	var refl outcomes
	conn = dial()
	for range server.MaxHealthWatchesPerConn + 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
			if err == nil {
				err = stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
			}
			if err == nil {
				_, err = stream.Recv()
			}
			refl.add(err)
		}()
	}
	wg.Wait()
	refl.want(t, "reflection streams on one connection", server.MaxHealthWatchesPerConn, 4, fmt.Sprintf("this connection has %d reflection streams open", server.MaxHealthWatchesPerConn))
	conn.Close()

	// 1,500 from 100 connections (those of the connection above are
	// released, which may take a moment: they count towards the cap until
	// then).
	var many outcomes
	for range 100 {
		conn := dial()
		for range 15 {
			wg.Add(1)
			go watch(conn, &many, &wg)
		}
	}
	wg.Wait()
	if many.opened > server.MaxHealthWatches || many.opened < server.MaxHealthWatches-server.MaxHealthWatchesPerConn || many.opened+many.refused != 1500 || len(many.other) > 0 {
		t.Errorf("1,500 Watch streams: %d opened, %d refused (%v), other errors %v; want %d at most opened, the rest refused",
			many.opened, many.refused, many.messages, many.other, server.MaxHealthWatches)
	}
	for msg := range many.messages {
		if !strings.Contains(msg, fmt.Sprintf("the server has %d health Watch streams open, the most it serves", server.MaxHealthWatches)) {
			t.Errorf("refused as %q", msg)
		}
	}
	_, metrics := send(t, "GET", ts.URL+"/metrics", "", "", nil)
	for _, want := range []string{
		fmt.Sprintf(`kioku_streams_open{kind="health_watch"} %d`, many.opened),
		`kioku_streams_limit{kind="health_watch",per="server"} 1000`,
		`kioku_streams_limit{kind="health_watch",per="connection"} 16`,
		`kioku_streams_limit{kind="reflection",per="server"} 1000`,
		`kioku_rpc_refused_total{procedure="/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",reason="too_many_streams"} 4`,
		`kioku_rpc_refused_total{procedure="/grpc.health.v1.Health/Watch",reason="too_many_streams"}`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	t.Logf("one connection: %d opened, %d refused; 100 connections: %d opened, %d refused", one.opened, one.refused, many.opened, many.refused)
}

// TestWatchSessionStreamsAreCapped: 1,500 WatchSession streams with one
// app key, on sessions of 20 users, open up to the key's cap of 1,000;
// a user key's streams on its own sessions stop at the user's cap of 100.
// Each refusal is RESOURCE_EXHAUSTED naming the cap.
func TestWatchSessionStreamsAreCapped(t *testing.T) {
	appKey, appEntry := auth.NewKey("backend", "a", "")
	annKey, annEntry := auth.NewKey("ann", "a", "ann")
	keys := nodetest.Keys(t, appEntry, annEntry)
	_, url := serveNode(t, func(cfg *node.Config) { cfg.Keys = keys })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	app := client.New(url, client.WithHTTPClient(h2cClient()), client.WithAuthToken(appKey))
	session := func(u int) string { return fmt.Sprintf("apps/a/users/u%d/sessions/s-u%d", u, u) }
	users := append([]string{"ann"}, make([]string, 20)...)
	for i := range users[1:] {
		users[i+1] = fmt.Sprintf("u%d", i)
	}
	for _, u := range users {
		name := "apps/a/users/" + u + "/sessions/s-" + u
		if _, err := app.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: "apps/a/users/" + u, SessionId: "s-" + u}); err != nil {
			t.Fatal(err)
		}
		if _, err := app.AppendEvent(ctx, &kiokuv1.AppendEventRequest{Name: name, Event: &kiokuv1.Event{Author: "user"}}); err != nil {
			t.Fatal(err)
		}
	}
	// A stream is open once it delivers the session's event.
	watch := func(c kiokuv1connect.SessionServiceClient, name string, o *outcomes, wg *sync.WaitGroup) {
		defer wg.Done()
		stream, err := c.WatchSession(ctx, connect.NewRequest(&kiokuv1.WatchSessionRequest{Name: name, AfterSequence: new(int64(0))}))
		if err == nil && !stream.Receive() {
			err = stream.Err()
		}
		o.add(err)
	}
	withKey := func(key string) kiokuv1connect.SessionServiceClient {
		p := new(http.Protocols)
		p.SetUnencryptedHTTP2(true)
		hc := &http.Client{Transport: &http.Transport{Protocols: p, MaxConnsPerHost: 0}}
		return kiokuv1connect.NewSessionServiceClient(hc, url, connect.WithInterceptors(bearer(key)))
	}

	var byKey outcomes
	var wg sync.WaitGroup
	c := withKey(appKey)
	for i := range 1500 {
		wg.Add(1)
		go watch(c, session(i%20), &byKey, &wg)
	}
	wg.Wait()
	byKey.want(t, "1,500 streams of one key", server.DefaultMaxWatchesPerKey, 500, "this API key has 1000 WatchSession streams open, the most one key may have")

	var byUser outcomes
	ann := withKey(annKey)
	for range server.DefaultMaxWatchesPerUser + 10 {
		wg.Add(1)
		go watch(ann, "apps/a/users/ann/sessions/s-ann", &byUser, &wg)
	}
	wg.Wait()
	byUser.want(t, "110 streams of one user", server.DefaultMaxWatchesPerUser, 10, "user ann of app a has 100 WatchSession streams open, the most one user may have")
	t.Logf("one key: %d opened, %d refused; one user: %d opened, %d refused", byKey.opened, byKey.refused, byUser.opened, byUser.refused)
	_, metrics := send(t, "GET", url+"/metrics", "", "", nil)
	for _, want := range []string{
		`kioku_streams_open{kind="watch_session"} 1100`,
		`kioku_streams_limit{kind="watch_session",per="key"} 1000`,
		`kioku_streams_limit{kind="watch_session",per="user"} 100`,
		`kioku_rpc_refused_total{procedure="/kioku.v1.SessionService/WatchSession",reason="too_many_streams"} 510`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
}

// bearer sends a key with every call.
func bearer(key string) connect.Interceptor {
	return &bearerInterceptor{key}
}

type bearerInterceptor struct{ key string }

func (b *bearerInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Authorization", "Bearer "+b.key)
		return next(ctx, req)
	}
}

func (b *bearerInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", "Bearer "+b.key)
		return conn
	}
}

func (b *bearerInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
