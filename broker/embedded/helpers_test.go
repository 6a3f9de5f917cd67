package embedded

import (
	"context"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/internal/testutil"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// testLogger routes logs to t.Log.
func testLogger(t testing.TB) *slog.Logger {
	if _, bench := t.(*testing.B); bench {
		return slog.New(slog.DiscardHandler)
	}
	return testutil.Logger(t)
}

// env is one backend under test with its clock, directory and filesystem,
// reopenable to simulate a restart.
type env struct {
	t     testing.TB
	clock *clocktest.FakeClock
	dir   string
	fs    vfs.FS
	be    *Backend       // the backend under test
	b     *broker.Broker // the front over it, as every API drives it
}

func setup(t testing.TB) *env {
	t.Helper()
	e := &env{t: t, clock: clocktest.NewFakeClock(t0), dir: t.TempDir()}
	e.open()
	t.Cleanup(func() { _ = e.be.Close() })
	return e
}

func (e *env) open() {
	e.t.Helper()
	opts := storage.Options{Clock: e.clock, Logger: testLogger(e.t)}
	b, err := Open(Config{Dir: e.dir, FS: e.fs, Options: opts})
	if err != nil {
		e.t.Fatalf("open: %v", err)
	}
	e.be, e.b = b, front(e.t, b, broker.Config{Logger: opts.Logger, Observer: opts.Observer})
}

// front returns the front over b.
func front(t testing.TB, b *Backend, cfg broker.Config) *broker.Broker {
	t.Helper()
	f, err := broker.New(b, cfg)
	if err != nil {
		t.Fatalf("broker.New: %v", err)
	}
	return f
}

// restart closes and reopens the backend on the same directory.
func (e *env) restart() {
	e.t.Helper()
	if err := e.be.Close(); err != nil {
		e.t.Fatalf("close: %v", err)
	}
	e.open()
}

func (e *env) createQueue(name string, attrs map[string]string) model.Queue {
	e.t.Helper()
	q, err := e.b.CreateQueue(context.Background(), name, attrs, nil)
	if err != nil {
		e.t.Fatalf("create %s: %v", name, err)
	}
	return q
}

func (e *env) send(queue string, bodies ...string) []model.SendResult {
	e.t.Helper()
	entries := make([]model.SendEntry, len(bodies))
	for i, body := range bodies {
		entries[i] = model.SendEntry{ID: "e" + itoa(i), Body: body}
	}
	res, err := e.b.Send(context.Background(), queue, entries)
	if err != nil {
		e.t.Fatalf("send: %v", err)
	}
	for _, r := range res {
		if r.Err != nil {
			e.t.Fatalf("send entry: %v", r.Err)
		}
	}
	return res
}

func (e *env) receive(queue string, max int, vis time.Duration) []model.Delivery {
	e.t.Helper()
	zero := time.Duration(0)
	ds, err := e.b.Receive(context.Background(), model.ReceiveRequest{Queue: queue, MaxMessages: max, Visibility: &vis, WaitTime: &zero})
	if err != nil {
		e.t.Fatalf("receive: %v", err)
	}
	return ds
}

func (e *env) stats(queue string) model.QueueStats {
	e.t.Helper()
	info, err := e.b.GetQueue(context.Background(), queue)
	if err != nil {
		e.t.Fatalf("get queue: %v", err)
	}
	return info.Stats
}

// wantStats checks the three counts of a queue (not OldestSentAt nor
// OldestVisibleSince).
func (e *env) wantStats(queue string, want model.QueueStats) {
	e.t.Helper()
	got := e.stats(queue)
	got.OldestSentAt, got.OldestVisibleSince = want.OldestSentAt, want.OldestVisibleSince
	if got != want {
		e.t.Fatalf("stats of %s = %+v, want %+v", queue, got, want)
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, what, cond)
}

func testingProcs() int { return runtime.GOMAXPROCS(0) }
