package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/internal/pgtest"
	"github.com/sluicemq/sluice/server"
)

// stallProxy forwards TCP to target until stall: from then on it reads
// and drops what it is sent and answers nothing, keeping every connection
// open (a network partition behind a proxy, where TCP itself stays up).
type stallProxy struct {
	ln      net.Listener
	target  string
	stalled atomic.Bool
	mu      sync.Mutex
	conns   []net.Conn
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.closeAll() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
	return p
}

// closeAll closes every connection through the proxy.
func (p *stallProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

func (p *stallProxy) forward(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, c, s)
	p.mu.Unlock()
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if err != nil {
				return
			}
			if !p.stalled.Load() {
				if _, err := dst.Write(buf[:n]); err != nil {
					return
				}
			}
		}
	}
	go pipe(s, c)
	pipe(c, s)
}

// TestReadyzAnswersWhenTheStoreDoesNot: with the PostgreSQL store behind a
// proxy that stops answering (connections open, nothing forwarded),
// /readyz still answers 503 within its 2 s and says why, and a second probe
// while the first check is stuck answers at once.
func TestReadyzAnswersWhenTheStoreDoesNot(t *testing.T) {
	t.Parallel()
	dbURL, schema := pgtest.Schema(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newStallProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	backend, err := postgres.Open(context.Background(), postgres.Config{URL: u.String(), Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = backend.Close() })
	t.Cleanup(proxy.closeAll) // before the backend's close, which would wait for the stalled statements
	front, err := broker.New(backend, broker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	srv, err := server.New(cfg, front)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Stop(ctx)
	})
	probe := func() (int, string, time.Duration) {
		start := time.Now()
		resp, err := http.Get("http://" + srv.Addr().String() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), time.Since(start)
	}
	if code, body, _ := probe(); code != 200 {
		t.Fatalf("/readyz before the stall: %d %q", code, body)
	}
	proxy.stalled.Store(true)
	code, body, took := probe()
	t.Logf("/readyz with the store silent: %d %q in %v", code, strings.TrimSpace(body), took.Round(time.Millisecond))
	if code != 503 || !strings.Contains(body, "did not answer within 2 s") || took > 10*time.Second {
		t.Fatalf("/readyz with the store silent: %d %q after %v, want 503 saying the store did not answer", code, body, took)
	}
	if code, body, _ := probe(); code != 503 || !strings.Contains(body, "did not answer") {
		t.Fatalf("a second /readyz: %d %q", code, body)
	}
}
