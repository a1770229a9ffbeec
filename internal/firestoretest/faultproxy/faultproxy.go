// Package faultproxy is a TCP proxy for tests that puts the faults of a
// network between a program and a server it depends on (the Firestore
// emulator, say): latency, a blackhole, connections reset, and connections
// refused.
//
//	p := faultproxy.Start(t, "127.0.0.1:8686")
//	// point the program at p.Addr(), then:
//	p.Blackhole() // bytes stop flowing both ways; connections stay open
//	p.Heal()      // they flow again, what was held first
//
// A blackhole holds what is sent, as a network that drops packets does
// for TCP, which sends them again once the network is back; Reset then
// Heal stands for a network that lost its connections meanwhile (a NAT or
// load balancer that forgot them).
package faultproxy

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy forwards the TCP connections it accepts to a target address.
type Proxy struct {
	target string
	addr   string

	mu      sync.Mutex
	ln      net.Listener
	conns   map[*link]bool
	latency time.Duration
	// open is closed while bytes flow; a blackhole replaces it with an
	// open channel, which Heal closes.
	open     chan struct{}
	accepted int
	closed   bool
	wg       sync.WaitGroup
}

// link is one proxied connection: the client's and the target's ends.
type link struct{ client, server net.Conn }

// Start starts a proxy to target on a free loopback port; it stops when
// the test ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	open := make(chan struct{})
	close(open)
	p := &Proxy{target: target, addr: ln.Addr().String(), ln: ln, conns: map[*link]bool{}, open: open}
	p.wg.Add(1)
	go p.accept(ln)
	t.Cleanup(p.Close)
	return p
}

// Addr returns the address the proxy listens on (host:port).
func (p *Proxy) Addr() string { return p.addr }

// Accepted returns how many connections the proxy has accepted.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// SetLatency delays every chunk of bytes forwarded, each way, by d.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// Blackhole stops bytes flowing both ways, on open connections and on
// new ones (which are accepted, but reach nothing); what was sent is held
// until Heal.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default:
	}
}

// Reset resets every open connection (TCP RST to both ends).
func (p *Proxy) Reset() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[*link]bool{}
	p.mu.Unlock()
	for l := range conns {
		l.reset()
	}
}

// Refuse resets every open connection and stops listening, so that new
// connections are refused, as when the server is down.
func (p *Proxy) Refuse() {
	p.mu.Lock()
	ln := p.ln
	p.ln = nil
	p.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	p.Reset()
}

// Heal ends a blackhole and a refusal: bytes flow again (what a blackhole
// held first) and the proxy listens again on its address.
func (p *Proxy) Heal() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
	if p.ln != nil || p.closed {
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	p.ln = ln
	p.wg.Add(1)
	go p.accept(ln)
	return nil
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	ln := p.ln
	p.ln = nil
	select {
	case <-p.open:
	default:
		close(p.open)
	}
	p.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	p.Reset()
	p.wg.Wait()
}

func (p *Proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.accepted++
		p.mu.Unlock()
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve connects an accepted connection to the target and forwards both
// ways until either end closes.
func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	if !p.wait() {
		c.Close()
		return
	}
	s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		resetConn(c)
		return
	}
	l := &link{client: c, server: s}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.reset()
		return
	}
	p.conns[l] = true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { p.pipe(s, c); done <- struct{}{} }()
	go func() { p.pipe(c, s); done <- struct{}{} }()
	<-done
	c.Close()
	s.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, l)
	p.mu.Unlock()
}

// wait waits while bytes may not flow; false when the proxy closed.
func (p *Proxy) wait() bool {
	p.mu.Lock()
	open := p.open
	p.mu.Unlock()
	<-open
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed
}

// pipe copies from src to dst, chunk by chunk, each after the latency and
// while no blackhole holds it.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			d := p.latency
			p.mu.Unlock()
			if d > 0 {
				time.Sleep(d)
			}
			if !p.wait() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (l *link) reset() {
	resetConn(l.client)
	resetConn(l.server)
}

// resetConn closes c with a TCP RST instead of a FIN.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}
