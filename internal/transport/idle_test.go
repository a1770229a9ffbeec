package transport_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/internal/transport"
)

// closedWithin reads from conn until the server closes it and returns how
// long that took; it fails the test if the server keeps it past limit.
func closedWithin(t *testing.T, what string, conn net.Conn, start time.Time, limit time.Duration) time.Duration {
	t.Helper()
	conn.SetReadDeadline(start.Add(limit))
	_, err := io.Copy(io.Discard, conn)
	took := time.Since(start)
	if err != nil { // a deadline: the server kept the connection
		t.Errorf("%s: still open after %v (%v)", what, took.Round(time.Millisecond), err)
	}
	return took
}

// TestIdleConnectionsAreClosed: with an idle timeout of one second, a
// connection that sends only HTTP/2's preface, one that sends nothing,
// and an HTTP/1.1 connection idle after its request are closed within
// seconds; a connection with a stream open is not.
func TestIdleConnectionsAreClosed(t *testing.T) {
	ts := startServer(t, transport.Config{IdleTimeout: time.Second, Logger: quietLog()})
	addr := strings.TrimPrefix(ts.URL, "http://")
	dial := func() (net.Conn, time.Time) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn, time.Now()
	}

	conn, start := dial()
	io.WriteString(conn, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	conn.Write([]byte{0, 0, 0, 4, 0, 0, 0, 0, 0}) // an empty SETTINGS frame
	t.Logf("preface only: closed after %v", closedWithin(t, "preface only", conn, start, 15*time.Second).Round(time.Millisecond))

	conn, start = dial()
	t.Logf("nothing sent: closed after %v", closedWithin(t, "nothing sent", conn, start, 15*time.Second).Round(time.Millisecond))

	conn, _ = dial()
	io.WriteString(conn, "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("GET /metrics: %v, %v", res, err)
	}
	io.Copy(io.Discard, res.Body)
	t.Logf("HTTP/1.1 idle after a request: closed after %v", closedWithin(t, "HTTP/1.1 idle", conn, time.Now(), 15*time.Second).Round(time.Millisecond))

	// A stream keeps its connection: a health Watch outlives the timeout.
	req, _ := http.NewRequestWithContext(t.Context(), "POST", ts.URL+"/grpc.health.v1.Health/Watch", strings.NewReader("\x00\x00\x00\x00\x02{}"))
	req.Header.Set("Content-Type", "application/connect+json")
	watch, err := h2cClient().Do(req)
	if err != nil || watch.StatusCode != 200 {
		t.Fatalf("health Watch: %v, %v", watch, err)
	}
	defer watch.Body.Close()
	got := make(chan error, 1)
	go func() {
		buf := make([]byte, 64<<10)
		for {
			if _, err := watch.Body.Read(buf); err != nil {
				got <- err
				return
			}
		}
	}()
	select {
	case err := <-got:
		t.Errorf("the Watch stream ended after less than 3s, with an idle timeout of 1s: %v", err)
	case <-time.After(3 * time.Second):
	}
}
