package transport_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/proto"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/internal/transport"
	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/resource"
)

// gzipBomb returns a gzip body that inflates to members times 16 MiB of
// zeros: one compressed member of 16 MiB repeated (gzip allows concatenated
// members), so that it is cheap to build.
func gzipBomb(t *testing.T, members int) []byte {
	t.Helper()
	var one bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&one, gzip.BestCompression)
	zw.Write(make([]byte, 16<<20))
	zw.Close()
	return bytes.Repeat(one.Bytes(), members)
}

// countingReader counts the bytes a client's transport took from a body.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestGzipBombs: a body of 16.5 MB that inflates to 16 GiB is answered
// UNAUTHENTICATED without a key, before the server reads or inflates it;
// with a key, the inflation stops at the message limit with
// RESOURCE_EXHAUSTED, over Connect, gRPC and REST alike.
func TestGzipBombs(t *testing.T) {
	key, keys := appKey(t, "a")
	ts := startServer(t, transport.Config{Keys: keys, Logger: quietLog()})
	bomb := gzipBomb(t, 1024)
	t.Logf("bomb: %d bytes inflating to %d GiB", len(bomb), 1024*16/1024)

	post := func(url, ctype, key string, headers map[string]string, body []byte) (*http.Response, []byte, time.Duration, int64) {
		cr := &countingReader{r: bytes.NewReader(body)}
		req, _ := http.NewRequest("POST", url, cr)
		req.ContentLength = int64(len(body))
		req.Header.Set("Content-Type", ctype)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		start := time.Now()
		res, err := h2cClient().Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v", url, err)
		}
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		return res, out, time.Since(start), cr.n.Load()
	}
	append := ts.URL + kiokuv1connect.SessionServiceAppendEventProcedure

	// Without a key: refused from the headers.
	res, out, took, sent := post(append, "application/proto", "", map[string]string{"Content-Encoding": "gzip"}, bomb)
	t.Logf("no key: %s in %v, %d of %d bytes taken from the body", res.Status, took, sent, len(bomb))
	if res.StatusCode != http.StatusUnauthorized || !strings.Contains(string(out), `"code":"unauthenticated"`) || took > 5*time.Second {
		t.Errorf("a bomb without a key: %s %s in %v; want 401 unauthenticated at once", res.Status, out, took)
	}

	// With a key: inflated only up to the limit.
	for _, c := range []struct {
		name, url, ctype string
		headers          map[string]string
		body             []byte
	}{
		{"connect", append, "application/proto", map[string]string{"Content-Encoding": "gzip"}, bomb[:len(bomb)/2]},
		{"grpc", append, "application/grpc", map[string]string{"Grpc-Encoding": "gzip"}, grpcFrame(bomb[:len(bomb)/2], true)},
		{"rest", ts.URL + "/v1/apps/a/users/u/sessions/s:appendEvent", "application/json", map[string]string{"Content-Encoding": "gzip"}, bomb[:len(bomb)/2]},
	} {
		res, out, took, _ := post(c.url, c.ctype, key, c.headers, c.body)
		msg := string(out) + res.Header.Get("Grpc-Message") + res.Trailer.Get("Grpc-Message")
		t.Logf("%s with a key: %s in %v", c.name, res.Status, took)
		if !strings.Contains(msg, "the request inflates to more than 16777216 bytes") || took > 10*time.Second {
			t.Errorf("%s: a bomb with a key: %s %q in %v; want RESOURCE_EXHAUSTED at the limit", c.name, res.Status, msg, took)
		}
	}
	got := scrape(t, ts.URL)
	if got[`kioku_rpc_refused_total{procedure="/kioku.v1.SessionService/AppendEvent",reason="no_key"}`] != 1 || got[`kioku_rpc_refused_total{procedure="*",reason="inflates_too_large"}`] != 3 {
		t.Errorf("refusals counted: %v", got)
	}
}

// grpcFrame wraps a message in gRPC's length-prefixed envelope.
func grpcFrame(msg []byte, compressed bool) []byte {
	frame := make([]byte, 5, 5+len(msg))
	if compressed {
		frame[0] = 1
	}
	binary.BigEndian.PutUint32(frame[1:], uint32(len(msg)))
	return append(frame, msg...)
}

// TestTricklingBodyIsCutOff: a body sent a byte at a time is cut off at the
// body timeout with DEADLINE_EXCEEDED, and its connection closed.
func TestTricklingBodyIsCutOff(t *testing.T) {
	ts := startServer(t, transport.Config{BodyTimeout: 500 * time.Millisecond, Logger: quietLog()})
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	io.WriteString(conn, "POST "+kiokuv1connect.SessionServiceGetSessionProcedure+" HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				if _, err := io.WriteString(conn, " "); err != nil {
					return
				}
			}
		}
	}()
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no response to a trickling body: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	took := time.Since(start)
	t.Logf("trickling body: %s after %v", res.Status, took)
	if !strings.Contains(string(body), `"code":"deadline_exceeded"`) || !strings.Contains(string(body), "did not arrive within 500ms") {
		t.Errorf("trickling body: %s %s; want deadline_exceeded naming the timeout", res.Status, body)
	}
	// The server closes the connection: a read ends.
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Error("the connection stayed open")
	}
	got := scrape(t, ts.URL)
	if got[`kioku_rpc_refused_total{procedure="/kioku.v1.SessionService/GetSession",reason="body_timeout"}`] != 1 {
		t.Errorf("the cut-off body was not counted: %v", got)
	}
}

// bigSessions answers GetSession with a session of about 14 MB.
type bigSessions struct {
	kiokuv1connect.UnimplementedSessionServiceHandler
}

func (bigSessions) GetSession(context.Context, *connect.Request[kiokuv1.GetSessionRequest]) (*connect.Response[kiokuv1.Session], error) {
	s := &kiokuv1.Session{Name: "apps/a/users/u/sessions/s"}
	for range 28 {
		s.Events = append(s.Events, &kiokuv1.Event{Author: "user", Content: &kiokuv1.Content{Parts: []*kiokuv1.Part{{Text: strings.Repeat("x", 500<<10)}}}})
	}
	return connect.NewResponse(s), nil
}

// TestUnreadResponseIsDropped: a client that asks for a large response and
// never reads it loses its connection after the write timeout, so the
// response does not stay in the server's memory.
func TestUnreadResponseIsDropped(t *testing.T) {
	closed := make(chan struct{}, 1)
	s := transport.New(transport.Config{Sessions: bigSessions{}, WriteTimeout: 300 * time.Millisecond, Logger: quietLog()})
	hs := s.HTTPServer()
	hs.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateClosed {
			closed <- struct{}{}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })

	// A client with a small receive buffer that reads nothing.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req, _ := proto.Marshal(&kiokuv1.GetSessionRequest{Name: "apps/a/users/u/sessions/s"})
	io.WriteString(conn, "POST "+kiokuv1connect.SessionServiceGetSessionProcedure+" HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/proto\r\nContent-Length: "+strconv.Itoa(len(req))+"\r\n\r\n")
	conn.Write(req)
	start := time.Now()
	select {
	case <-closed:
		t.Logf("the server dropped the unread response's connection after %v", time.Since(start))
	case <-time.After(20 * time.Second):
		t.Fatal("the server still holds the unread response after 20s")
	}
}

// TestStreamsHaveAMaximumLifetime: a WatchSession open past the maximum
// stream lifetime ends DEADLINE_EXCEEDED, saying how to resume.
func TestStreamsHaveAMaximumLifetime(t *testing.T) {
	ts := sessionServerWith(t, transport.Config{MaxStreamDuration: 300 * time.Millisecond})
	c := kiokuv1connect.NewSessionServiceClient(http.DefaultClient, ts.URL)
	if _, err := c.CreateSession(t.Context(), connect.NewRequest(&kiokuv1.CreateSessionRequest{Parent: "apps/a/users/u", SessionId: "s"})); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	stream, err := c.WatchSession(t.Context(), connect.NewRequest(&kiokuv1.WatchSessionRequest{Name: "apps/a/users/u/sessions/s"}))
	if err == nil {
		for stream.Receive() {
		}
		err = stream.Err()
	}
	if connect.CodeOf(err) != connect.CodeDeadlineExceeded || !strings.Contains(err.Error(), "maximum stream lifetime of 300ms") || time.Since(start) > 10*time.Second {
		t.Fatalf("a stream past its lifetime: %v after %v", err, time.Since(start))
	}
}

// TestOversizedBodyIsNotReadToTheEnd: a body far over the message limit is
// refused RESOURCE_EXHAUSTED once the limit (and the framing's room) is
// passed, not read to its end to measure it.
func TestOversizedBodyIsNotReadToTheEnd(t *testing.T) {
	ts := startServer(t, transport.Config{MaxRequestBytes: 1 << 20, Logger: quietLog()})
	body := &countingReader{r: io.LimitReader(zeros{}, 64<<20)}
	req, _ := http.NewRequest("POST", ts.URL+kiokuv1connect.SessionServiceGetSessionProcedure, body)
	req.Header.Set("Content-Type", "application/json")
	res, err := h2cClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(res.Body)
	res.Body.Close()
	t.Logf("64 MiB body over a 1 MiB limit: %s after %d bytes were taken from it", res.Status, body.n.Load())
	if !strings.Contains(string(out), `"code":"resource_exhausted"`) || !strings.Contains(string(out), "the request body is over 1114112 bytes") || body.n.Load() >= 32<<20 {
		t.Errorf("an oversized body: %s %s after %d bytes", res.Status, out, body.n.Load())
	}
	if got := scrape(t, ts.URL); got[`kioku_rpc_refused_total{procedure="/kioku.v1.SessionService/GetSession",reason="body_too_large"}`] != 1 {
		t.Errorf("not counted: %v", got)
	}
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// responseMeter is an HTTP client that records the largest response body
// it received.
type responseMeter struct {
	largest atomic.Int64
}

func (m *responseMeter) Do(req *http.Request) (*http.Response, error) {
	res, err := h2cClient().Do(req)
	if err == nil {
		res.Body = &meteredBody{ReadCloser: res.Body, m: m}
	}
	return res, err
}

type meteredBody struct {
	io.ReadCloser
	m *responseMeter
	n int64
}

func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	if b.n > b.m.largest.Load() {
		b.m.largest.Store(b.n)
	}
	return n, err
}

// TestLargeSessionIsPaged: a 20 MB session never makes a response over the
// 16 MiB message limit: GetSession of all its events fails pointing to
// ListEvents, ListEvents pages stay under the limit and together return
// every event (the ADK adapter pages the same way: client/adk's
// TestGetPagesALargeSession).
func TestLargeSessionIsPaged(t *testing.T) {
	_, url := serveNode(t, func(c *node.Config) { c.Logger = quietLog() })
	meter := &responseMeter{}
	c := client.New(url, client.WithHTTPClient(meter))
	ctx := t.Context()
	name := resource.SessionName("a", "u", "long")
	if _, err := c.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: resource.UserName("a", "u"), SessionId: "long"}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// Events of 500 KiB stored (375 KiB of data, base64 in the stored
	// JSON). The data is an attachment, not text, so that appending costs
	// no search indexing; random, so that responses are as large on the
	// wire.
	const events, stored = 40, 500 << 10
	for range events {
		noise := make([]byte, stored*3/4)
		rand.Read(noise)
		if _, err := c.AppendEvent(ctx, &kiokuv1.AppendEventRequest{Name: name, Event: &kiokuv1.Event{
			Author: "user", Content: &kiokuv1.Content{Parts: []*kiokuv1.Part{{InlineData: &kiokuv1.Blob{MimeType: "application/octet-stream", Data: noise}}}},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("appended %d MB in %v", events*stored>>20, time.Since(start))
	start = time.Now()
	meter.largest.Store(0)

	_, err := c.GetSession(ctx, &kiokuv1.GetSessionRequest{Name: name})
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "ListEvents") {
		t.Fatalf("GetSession of a 20 MB session: %v; want FAILED_PRECONDITION pointing to ListEvents", err)
	}
	if s, err := c.GetSession(ctx, &kiokuv1.GetSessionRequest{Name: name, NumRecentEvents: 10}); err != nil || len(s.GetEvents()) != 10 {
		t.Fatalf("the 10 most recent events: %v", err)
	}
	pages, seen := 0, 0
	for page, err := range pagesOf(ctx, c, name) {
		if err != nil {
			t.Fatal(err)
		}
		pages++
		seen += len(page)
	}
	if seen != events {
		t.Fatalf("ListEvents returned %d events in %d pages, want %d", seen, pages, events)
	}
	t.Logf("largest response: %d bytes; ListEvents took %d pages; the reads took %v", meter.largest.Load(), pages, time.Since(start))
	if l := meter.largest.Load(); l >= 16<<20 || l < 5<<20 {
		t.Errorf("largest response %d bytes; want under the 16 MiB limit (and pages of several MB)", l)
	}
}

// pagesOf iterates over the pages of a session's events.
func pagesOf(ctx context.Context, c *client.Client, name string) iter.Seq2[[]*kiokuv1.Event, error] {
	return func(yield func([]*kiokuv1.Event, error) bool) {
		token := ""
		for {
			res, err := c.ListEvents(ctx, &kiokuv1.ListEventsRequest{Parent: name, PageSize: 1000, PageToken: token})
			if !yield(res.GetEvents(), err) || err != nil {
				return
			}
			if token = res.GetNextPageToken(); token == "" {
				return
			}
		}
	}
}

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
	ts := startServer(t, transport.Config{Logger: slog.New(slog.DiscardHandler)})
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
	for range transport.MaxHealthWatchesPerConn + 4 {
		wg.Add(1)
		go watch(conn, &one, &wg)
	}
	wg.Wait()
	one.want(t, "Watch streams on one connection", transport.MaxHealthWatchesPerConn, 4, fmt.Sprintf("this connection has %d health Watch streams open", transport.MaxHealthWatchesPerConn))
	conn.Close()

	// Reflection streams, also served without a key, are capped alike.
	var refl outcomes
	conn = dial()
	for range transport.MaxHealthWatchesPerConn + 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
			if err != nil {
				refl.add(err)
				return
			}
			// Send answers io.EOF when the server has already ended the
			// stream (refused it); Recv then gives its status.
			if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil && !errors.Is(err, io.EOF) {
				refl.add(err)
				return
			}
			_, err = stream.Recv()
			refl.add(err)
		}()
	}
	wg.Wait()
	refl.want(t, "reflection streams on one connection", transport.MaxHealthWatchesPerConn, 4, fmt.Sprintf("this connection has %d reflection streams open", transport.MaxHealthWatchesPerConn))
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
	if many.opened > transport.MaxHealthWatches || many.opened < transport.MaxHealthWatches-transport.MaxHealthWatchesPerConn || many.opened+many.refused != 1500 || len(many.other) > 0 {
		t.Errorf("1,500 Watch streams: %d opened, %d refused (%v), other errors %v; want %d at most opened, the rest refused",
			many.opened, many.refused, many.messages, many.other, transport.MaxHealthWatches)
	}
	for msg := range many.messages {
		if !strings.Contains(msg, fmt.Sprintf("the server has %d health Watch streams open, the most it serves", transport.MaxHealthWatches)) {
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
	byKey.want(t, "1,500 streams of one key", transport.DefaultMaxWatchesPerKey, 500, "this API key has 1000 WatchSession streams open, the most one key may have")

	var byUser outcomes
	ann := withKey(annKey)
	for range transport.DefaultMaxWatchesPerUser + 10 {
		wg.Add(1)
		go watch(ann, "apps/a/users/ann/sessions/s-ann", &byUser, &wg)
	}
	wg.Wait()
	byUser.want(t, "110 streams of one user", transport.DefaultMaxWatchesPerUser, 10, "user ann of app a has 100 WatchSession streams open, the most one user may have")
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

// TestWatchStreamsServerCap: streams of many users, each far within its
// key's and user's caps (as an app with open sign-up gives anyone new
// identities), stop at the server's cap, RESOURCE_EXHAUSTED naming it.
func TestWatchStreamsServerCap(t *testing.T) {
	var entries []auth.Key
	var keys []string
	for i := range 4 {
		k, e := auth.NewKey(fmt.Sprintf("u%d", i), "a", fmt.Sprintf("u%d", i))
		keys, entries = append(keys, k), append(entries, e)
	}
	appKey, appEntry := auth.NewKey("backend", "a", "")
	_, url := serveNode(t, func(cfg *node.Config) {
		cfg.Keys = nodetest.Keys(t, append(entries, appEntry)...)
		cfg.MaxWatches = 6
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	app := client.New(url, client.WithHTTPClient(h2cClient()), client.WithAuthToken(appKey))
	for i := range keys {
		u := fmt.Sprintf("u%d", i)
		if _, err := app.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: "apps/a/users/" + u, SessionId: "s-" + u}); err != nil {
			t.Fatal(err)
		}
		if _, err := app.AppendEvent(ctx, &kiokuv1.AppendEventRequest{Name: "apps/a/users/" + u + "/sessions/s-" + u, Event: &kiokuv1.Event{Author: "user"}}); err != nil {
			t.Fatal(err)
		}
	}
	var o outcomes
	var wg sync.WaitGroup
	for i, key := range keys {
		c := kiokuv1connect.NewSessionServiceClient(h2cClient(), url, connect.WithInterceptors(bearer(key)))
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				stream, err := c.WatchSession(ctx, connect.NewRequest(&kiokuv1.WatchSessionRequest{Name: fmt.Sprintf("apps/a/users/u%d/sessions/s-u%d", i, i), AfterSequence: new(int64(0))}))
				if err == nil && !stream.Receive() {
					err = stream.Err()
				}
				o.add(err)
			}()
		}
	}
	wg.Wait()
	o.want(t, "3 streams each of 4 users", 6, 6, "the server has 6 WatchSession streams open, the most it serves")
	_, metrics := send(t, "GET", url+"/metrics", "", "", nil)
	if want := `kioku_streams_limit{kind="watch_session",per="server"} 6`; !strings.Contains(metrics, want) {
		t.Errorf("/metrics has no %s", want)
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
