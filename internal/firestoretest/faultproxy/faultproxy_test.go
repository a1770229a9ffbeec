package faultproxy_test

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/internal/firestoretest/faultproxy"
)

// echo serves a TCP echo server on a loopback port.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				io.Copy(c, c)
				c.Close()
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line and reads it back, within limit.
func roundTrip(c net.Conn, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	c.SetDeadline(start.Add(limit))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return 0, err
	}
	buf := make([]byte, 5)
	_, err := io.ReadFull(c, buf)
	return time.Since(start), err
}

func TestFaults(t *testing.T) {
	p := faultproxy.Start(t, echo(t))
	c := dialWorking(t, p, "through the proxy")

	p.SetLatency(50 * time.Millisecond)
	if took, err := roundTrip(c, time.Second); err != nil || took < 100*time.Millisecond {
		t.Fatalf("with 50ms each way: %v after %v, want at least 100ms", err, took)
	}
	p.SetLatency(0)

	// A blackhole holds the bytes; Heal delivers them.
	p.Blackhole()
	if _, err := roundTrip(c, 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("in a blackhole: %v, want a timeout", err)
	}
	p.Heal()
	c.SetDeadline(time.Now().Add(time.Second))
	buf := make([]byte, 5)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping\n" {
		t.Fatalf("after the blackhole: %q, %v; want the held ping", buf, err)
	}

	// Reset breaks open connections; new ones work.
	p.Reset()
	if _, err := roundTrip(c, time.Second); err == nil {
		t.Fatal("a reset connection still carries bytes")
	}
	c2 := dialWorking(t, p, "a new connection after a reset")

	// Refuse resets them and refuses new ones until Heal.
	p.Refuse()
	if _, err := net.Dial("tcp", p.Addr()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial while refusing: %v, want connection refused", err)
	}
	if _, err := roundTrip(c2, time.Second); err == nil {
		t.Fatal("a connection open at the refusal still carries bytes")
	}
	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}
	dialWorking(t, p, "after Heal")
	if p.Accepted() != 3 {
		t.Errorf("%d connections accepted, want 3", p.Accepted())
	}
}

// dialWorking opens a connection through the proxy, closed when the test
// ends, and checks that a round trip passes (what names when, in the
// failure).
func dialWorking(t *testing.T, p *faultproxy.Proxy, what string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatalf("dial %s: %v", what, err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := roundTrip(c, time.Second); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return c
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
