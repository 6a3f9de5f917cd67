package server

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The stream API (package api/stream, gRPC) is served on the server's own
// port, beside HTTP/1.1:
//
//   - Plain HTTP: a connection that opens with HTTP/2's client preface (a
//     gRPC client: HTTP/2 without TLS, "h2c" with prior knowledge) is
//     handed to the gRPC server; every other connection to the HTTP server.
//     The split looks at the first bytes of a connection once, so an
//     HTTP/1.1 request costs nothing more (docs/streams.md has the
//     measurement).
//   - HTTPS: both speak HTTP/2 after the same TLS handshake, so the split is
//     per request: a request with content-type application/grpc goes to
//     the gRPC server's ServeHTTP, outside the HTTP server's read and write
//     timeouts, which bound requests, not streams.

// http2Preface is what an HTTP/2 client sends first (RFC 9113, 3.4).
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// splitListener accepts the connections of one listener and hands each to
// the HTTP server (httpLn) or the gRPC server (grpcLn) by its first bytes.
type splitListener struct {
	ln             net.Listener
	httpLn, grpcLn *connQueue
	// sniffTimeout bounds the wait for a connection's first bytes (the
	// HTTP server's ReadHeaderTimeout): a connection that sends nothing is
	// closed.
	sniffTimeout time.Duration
}

func newSplitListener(ln net.Listener, sniffTimeout time.Duration) *splitListener {
	s := &splitListener{ln: ln, httpLn: newConnQueue(ln.Addr()), grpcLn: newConnQueue(ln.Addr()), sniffTimeout: sniffTimeout}
	go s.run()
	return s
}

// run accepts until the listener is closed, then closes both queues.
func (s *splitListener) run() {
	defer s.httpLn.close()
	defer s.grpcLn.close()
	var delay time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// A temporary failure (too many open files): back off as
				// net/http does.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return
		}
		delay = 0
		go s.route(c)
	}
}

// route reads a connection's first bytes, as many as tell the preface
// from anything else, and queues it with them put back.
func (s *splitListener) route(c net.Conn) {
	var buf [len(http2Preface)]byte
	n := 0
	_ = c.SetReadDeadline(time.Now().Add(s.sniffTimeout))
	for n < len(buf) && bytes.HasPrefix([]byte(http2Preface), buf[:n]) {
		m, err := c.Read(buf[n:])
		n += m
		if err != nil {
			if n == 0 {
				_ = c.Close()
				return
			}
			break
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	pc := &prefixConn{Conn: c, prefix: append([]byte(nil), buf[:n]...)}
	if n == len(buf) && string(buf[:]) == http2Preface {
		s.grpcLn.put(pc)
	} else {
		s.httpLn.put(pc)
	}
}

// prefixConn is a connection whose first bytes were read already: Read
// returns them first.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// CloseWrite half-closes a TCP connection, as net/http does before it
// closes one after an error answer (so the client reads the answer, not a
// reset): the wrapper must not hide it.
func (c *prefixConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// connQueue is a net.Listener fed by splitListener.
type connQueue struct {
	addr   net.Addr
	conns  chan net.Conn
	done   chan struct{}
	closer sync.Once
}

func newConnQueue(addr net.Addr) *connQueue {
	return &connQueue{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

// put hands c to the server accepting from q (closing c if q is closed).
func (q *connQueue) put(c net.Conn) {
	select {
	case q.conns <- c:
	case <-q.done:
		_ = c.Close()
	}
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.conns:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

func (q *connQueue) close() { q.closer.Do(func() { close(q.done) }) }

// Close is the server's: closing the queue stops its Serve (the real
// listener is closed by Stop).
func (q *connQueue) Close() error {
	q.close()
	return nil
}

func (q *connQueue) Addr() net.Addr { return q.addr }

// isGRPC reports whether an HTTPS request is a gRPC call.
func isGRPC(r *http.Request) bool {
	return r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc")
}

// withStreams sends the gRPC calls of an HTTPS server to the stream API,
// outside the HTTP server's timeouts.
func (s *Server) withStreams(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isGRPC(r) {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Time{})
		_ = rc.SetWriteDeadline(time.Time{})
		s.grpc.ServeHTTP(w, r)
	})
}
