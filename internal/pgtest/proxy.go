package pgtest

import (
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards TCP connections to a PostgreSQL server until Stall: from
// then on it reads and drops what either side sends and delivers nothing,
// keeping every connection open, as a network partition behind a proxy or
// a NAT does (TCP itself stays up, so neither keepalives nor the server's
// statement_timeout notice). Stall(false) forwards again, on connections
// opened after it (the bytes dropped meanwhile leave the older ones out of
// step).
type Proxy struct {
	ln      net.Listener
	target  string
	stalled atomic.Bool
	mu      sync.Mutex
	conns   []net.Conn
}

// ThroughProxy starts a Proxy in front of dbURL's server and returns the
// URL that reaches the server through it. The proxy and its connections
// are closed when the test ends.
func ThroughProxy(t testing.TB, dbURL string) (string, *Proxy) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: u.Host}
	t.Cleanup(func() { ln.Close(); p.CloseAll() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
	u.Host = ln.Addr().String()
	return u.String(), p
}

// Stall stops (true) or resumes (false) the forwarding.
func (p *Proxy) Stall(on bool) { p.stalled.Store(on) }

// CloseAll closes every connection through the proxy (a test closes them
// before a backend whose statements are stalled, or its close waits for
// them).
func (p *Proxy) CloseAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *Proxy) forward(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, c, s)
	p.mu.Unlock()
	pipe := func(dst, src net.Conn) {
		defer dst.Close()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if err != nil {
				return
			}
			if p.stalled.Load() {
				continue
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
	}
	go pipe(s, c)
	pipe(c, s)
}
