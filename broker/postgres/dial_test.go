package postgres

import (
	"context"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/internal/pgtest"
	"github.com/sluicemq/sluice/internal/testutil"
)

// TestConnectionsHaveKeepalivesAndUserTimeout: the pool's connections are
// made by dialer: keepalives on, and on Linux a TCP user timeout of twice
// the answer deadline (at least 10 s).
func TestConnectionsHaveKeepalivesAndUserTimeout(t *testing.T) {
	t.Parallel()
	dbURL, schema := pgtest.Schema(t)
	cfg := DefaultConfig()
	cfg.URL, cfg.Schema, cfg.AnswerTimeout = dbURL, schema, 8*time.Second
	b, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	c, err := b.pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	raw, ok := c.Conn().PgConn().Conn().(syscall.Conn)
	if !ok {
		t.Skipf("the connection is a %T, not a socket (a Unix socket URL?)", c.Conn().PgConn().Conn())
	}
	rc, err := raw.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var keepalive, userTimeout int
	var kerr, uerr error
	_ = rc.Control(func(fd uintptr) {
		keepalive, kerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
		if runtime.GOOS == "linux" {
			userTimeout, uerr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout)
		}
	})
	if kerr != nil || keepalive == 0 {
		t.Errorf("SO_KEEPALIVE %d (%v), want on", keepalive, kerr)
	}
	if runtime.GOOS == "linux" && (uerr != nil || userTimeout != 16000) {
		t.Errorf("TCP_USER_TIMEOUT %d ms (%v), want 16000 (twice the answer deadline)", userTimeout, uerr)
	}
}

// TestListenerRecoversFromPartition: a partition TCP does not see (a proxy
// keeps the connections and forwards nothing) drops a notification meant
// for broker A's listener. The listener notices (its ping gets no answer),
// reconnects when the network is back, and wakes A's waiting receive,
// which then gets the message sent meanwhile on broker B. Polling is set
// far past the wait, so only the listener can wake it: before the ping,
// the listener sat deaf on its dead connection for good and the receive
// came back empty. The clock is a fake one that stands still, so neither
// a poll nor the wait's end can end the receive: only a wake-up can.
func TestListenerRecoversFromPartition(t *testing.T) {
	t.Parallel()
	dbURL, schema := pgtest.Schema(t)
	proxied, proxy := pgtest.ThroughProxy(t, dbURL)
	clock := clocktest.NewFakeClock(time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC))
	open := func(url string) (*Backend, *broker.Broker) {
		cfg := DefaultConfig()
		cfg.URL, cfg.Schema, cfg.AnswerTimeout, cfg.Clock = url, schema, time.Second, clock
		cfg.listenCheck = 200 * time.Millisecond
		b, err := Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		f, err := broker.New(b, broker.Config{})
		if err != nil {
			t.Fatal(err)
		}
		return b, f
	}
	ba, a := open(proxied)
	t.Cleanup(proxy.CloseAll) // first: the close would wait for stalled statements
	_, bb := open(dbURL)
	ctx := context.Background()
	if _, err := bb.CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	wait := 20 * time.Second
	got := make(chan []model.Delivery, 1)
	errc := make(chan error, 1)
	go func() {
		ds, err := a.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 1, WaitTime: &wait})
		got <- ds
		errc <- err
	}()
	// The receive has claimed nothing and waits (A's waiter is in place).
	testutil.Eventually(t, 20*time.Second, "A's receive waiting", func() bool { return ba.waiters.sleeping() > 0 })
	proxy.Stall(true)
	if _, err := bb.Send(ctx, "q", []model.SendEntry{{ID: "a", Body: "sent during the partition"}}); err != nil {
		t.Fatal(err)
	}
	lost := ba.listenLost.Load()
	testutil.Eventually(t, 30*time.Second, "A's listener noticing the partition", func() bool { return ba.listenLost.Load() > lost })
	proxy.Stall(false)
	select {
	case ds := <-got:
		if err := <-errc; err != nil || len(ds) != 1 {
			t.Fatalf("A's receive after the partition: %d message(s), %v; want the one sent meanwhile", len(ds), err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("A's receive was not woken within 2 minutes of the partition's end: the listener stayed deaf")
	}
}

// sleeping is how many waiters wait with their timer armed (past their
// look).
func (ws *waiters) sleeping() int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	n := 0
	for _, m := range ws.byQueue {
		for w := range m {
			if !w.wakeAt.IsZero() {
				n++
			}
		}
	}
	return n
}
