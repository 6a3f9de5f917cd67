package postgres

import (
	"context"
	"net"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// dialer makes the connections to PostgreSQL, the pool's and the
// dedicated ones (the listener's, the notifier's) alike, with TCP
// keepalives and a user timeout, so that a server or a network that goes
// away is noticed by the kernel too, not only by the statements' answer
// deadline (deadline.go):
//   - keepalives: a first probe after 10 s idle, then every 5 s, 3 unanswered
//     ones close the connection (about 25 s: pgconn's default waits 5
//     minutes before the first probe);
//   - TCP_USER_TIMEOUT (Linux): data sent and unacknowledged for twice
//     the answer deadline, at least 10 s, closes the connection, where the
//     kernel would retransmit for some 15 minutes.
//
// Neither notices a partition behind a proxy that keeps the connection up
// and forwards nothing (the proxy acknowledges): the answer deadline and
// the listener's ping (notify.go) cover that one.
func dialer(answer time.Duration) pgconn.DialFunc {
	userTimeout := max(2*answer, 10*time.Second)
	d := &net.Dialer{
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 10 * time.Second, Interval: 5 * time.Second, Count: 3},
		Control: func(network, _ string, c syscall.RawConn) error {
			if network != "tcp" && network != "tcp4" && network != "tcp6" {
				return nil // a Unix socket: no TCP options
			}
			// Best effort: a kernel that refuses the option still gets a
			// connection, with the keepalives and the answer deadline.
			return c.Control(func(fd uintptr) { _ = setUserTimeout(fd, userTimeout) })
		},
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}
}
