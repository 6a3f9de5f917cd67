package server

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultMaxConnections is Config.MaxConnections' default: the process's
// open-file limit (RLIMIT_NOFILE, which Go raises to the hard limit at
// start) less a reserve for the store's files, the PostgreSQL pool and the
// logs: a fifth of the limit, at least 256. With no limit to read it is
// 10,000. Never below 64.
func DefaultMaxConnections() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == 0 {
		return 10000
	}
	return MaxConnectionsFor(lim.Cur)
}

// MaxConnectionsFor is DefaultMaxConnections under an open-file limit of
// nofile (systemd's LimitNOFILE=, ulimit -n): nofile less a fifth of it,
// at least 256, and 64 to 1,000,000.
func MaxConnectionsFor(nofile uint64) int {
	cur := int64(min(nofile, 1<<30))
	return int(max(64, min(1000000, cur-max(256, cur/5))))
}

// limitListener caps the connections open at once: a connection accepted
// past the cap is closed at once (the client sees its connection reset or
// closed and retries), counted, and logged at most every refusalLogEvery,
// so that a flood can neither exhaust the process's file descriptors (which
// the store needs) nor fill the log.
type limitListener struct {
	net.Listener
	max     int64
	open    atomic.Int64
	refused atomic.Int64
	log     *slog.Logger

	mu        sync.Mutex
	loggedAt  time.Time
	sinceLast int64
}

const refusalLogEvery = 10 * time.Second

func newLimitListener(ln net.Listener, max int, log *slog.Logger) *limitListener {
	return &limitListener{Listener: ln, max: int64(max), log: log}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &limitedConn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		_ = c.Close()
		l.refused.Add(1)
		l.logRefusal()
	}
}

// logRefusal logs the refusals, at most one line every refusalLogEvery.
func (l *limitListener) logRefusal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sinceLast++
	if now := time.Now(); now.Sub(l.loggedAt) >= refusalLogEvery {
		l.log.Warn("connections refused: the broker holds as many as --max-connections allows; raise it (and the open-file limit) or find the client that opens so many",
			"max_connections", l.max, "refused", l.sinceLast) // since the previous such line
		l.loggedAt, l.sinceLast = now, 0
	}
}

// limitedConn gives its place back when closed (once, however often Close
// is called).
type limitedConn struct {
	net.Conn
	l      *limitListener
	closed atomic.Bool
}

func (c *limitedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.l.open.Add(-1)
	}
	return c.Conn.Close()
}

// CloseWrite half-closes the connection when the one it wraps can (a TCP
// connection): net/http half-closes before it closes after an error
// answer, so that the client reads the answer (prefixConn passes it on
// the same way).
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
