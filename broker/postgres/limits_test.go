package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/internal/testutil"
)

// hammer has receivers on both brokers, at once, each short-poll queue
// polls times for up to 10 messages; it returns every delivery.
func hammer(t *testing.T, brokers []*broker.Broker, queue string, receivers, polls int) []model.Delivery {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var out []model.Delivery
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range receivers {
		be := brokers[i%len(brokers)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for range polls {
				ds, err := be.Receive(ctx, model.ReceiveRequest{Queue: queue, MaxMessages: 10, WaitTime: new(time.Duration)})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				out = append(out, ds...)
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// sendMany sends n messages to queue through b.
func sendMany(t *testing.T, b *broker.Broker, queue string, n int) {
	t.Helper()
	for i := 0; i < n; i += 10 {
		var entries []model.SendEntry
		for j := i; j < min(i+10, n); j++ {
			entries = append(entries, model.SendEntry{ID: fmt.Sprint(j), Body: fmt.Sprint("m", j)})
		}
		if _, err := b.Send(context.Background(), queue, entries); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRateLimitAcrossBrokers: receives racing on two brokers over one
// schema hand out exactly one burst of a queue's MaxReceivesPerSecond
// (10) at one instant, and exactly one second's worth more at each second
// of the fake clock: the claims are serialized by the queue's limits row.
func TestRateLimitAcrossBrokers(t *testing.T) {
	t.Parallel()
	a, b, clock := openPair(t, schemaFor(t), nil)
	ctx := context.Background()
	if _, err := a.CreateQueue(ctx, "q", map[string]string{model.AttrMaxReceivesPerSecond: "10"}, nil); err != nil {
		t.Fatal(err)
	}
	sendMany(t, b, "q", 100)
	seen := map[string]bool{}
	for round := range 4 {
		if round > 0 {
			clock.Advance(time.Second)
		}
		ds := hammer(t, []*broker.Broker{a, b}, "q", 6, 4)
		if len(ds) != 10 {
			t.Fatalf("second %d: %d messages handed out across two brokers, want 10", round, len(ds))
		}
		for _, d := range ds {
			if seen[d.ID] {
				t.Fatalf("message %s handed out twice", d.ID)
			}
			seen[d.ID] = true
		}
	}
	// Half a second on: five.
	clock.Advance(500 * time.Millisecond)
	if ds := hammer(t, []*broker.Broker{a, b}, "q", 4, 3); len(ds) != 5 {
		t.Fatalf("half a second: %d messages, want 5", len(ds))
	}
}

// TestMaxInFlightAcrossBrokers: receives racing on two brokers never lease
// more than a queue's MaxInFlight; a receive waiting at the cap on one
// broker is woken by a delete on the other (the fake clock never moves and
// polling is off: only the notification can wake it).
func TestMaxInFlightAcrossBrokers(t *testing.T) {
	t.Parallel()
	a, b, clock := openPair(t, schemaFor(t), func(c *postgres.Config) { c.PollInterval = model.MaxWaitTime })
	ctx := context.Background()
	if _, err := a.CreateQueue(ctx, "q", map[string]string{model.AttrMaxInFlight: "7"}, nil); err != nil {
		t.Fatal(err)
	}
	sendMany(t, a, "q", 60)
	ds := hammer(t, []*broker.Broker{a, b}, "q", 6, 3)
	if len(ds) != 7 {
		t.Fatalf("%d messages leased across two brokers under MaxInFlight 7", len(ds))
	}
	q, err := b.GetQueue(ctx, "q")
	if err != nil || q.Stats.InFlight != 7 {
		t.Fatalf("in flight %d (%v), want 7", q.Stats.InFlight, err)
	}

	wait := model.MaxWaitTime
	var got atomic.Int64
	done := make(chan error, 1)
	timers := clock.Timers()
	go func() {
		ds, err := b.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 10, WaitTime: &wait})
		got.Store(int64(len(ds)))
		done <- err
	}()
	// Deletes before the receive waits would only make it claim at once
	// (it gets the room they made either way): poll, with a deadline, for
	// the timer it arms on the clock when it waits.
	for deadline := time.Now().Add(5 * time.Second); clock.Timers() <= timers && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	var entries []model.DeleteEntry
	for i, d := range ds[:3] {
		entries = append(entries, model.DeleteEntry{ID: fmt.Sprint(i), Receipt: d.Receipt})
	}
	if errs, err := a.Delete(ctx, "q", entries); err != nil || errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatal(err, errs)
	}
	select {
	case err := <-done:
		if err != nil || got.Load() != 3 {
			t.Fatalf("the receive waiting on b got %d messages (%v), want the 3 a's deletes made room for", got.Load(), err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the receive waiting at the cap on b was not woken by the deletes on a")
	}
}

// TestMigration13OldQueues: a queue created before migration 13 reads no
// limits (they are absent from its stored config) and has no limits row;
// after the upgrade it takes them, and its claims make the row.
func TestMigration13OldQueues(t *testing.T) {
	t.Parallel()
	url, schema, conn := schemaAtVersion(t, 12)
	ctx := context.Background()
	tbl := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	at := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	insertOldQueue(t, conn, schema, at)
	cfg := testConfig(url, schema)
	cfg.Clock = clocktest.NewFakeClock(at.Add(time.Minute))
	be, err := postgres.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	f := front(t, be, cfg.Options)
	q, err := f.GetQueue(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if q.Config.Limited() {
		t.Fatalf("an old queue has limits: MaxInFlight %d, rate %v", q.Config.MaxInFlight, q.Config.ReceiveRate)
	}
	sendMany(t, f, "q", 5)
	if ds := hammer(t, []*broker.Broker{f}, "q", 1, 1); len(ds) != 5 {
		t.Fatalf("an old queue without limits: %d messages, want 5", len(ds))
	}
	rows := func() int {
		t.Helper()
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+tbl("queue_limits")).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := rows(); n != 0 {
		t.Fatalf("%d limits rows after claims without limits, want 0", n)
	}
	if err := f.SetQueueAttributes(ctx, "q", map[string]string{model.AttrMaxReceivesPerSecond: "1"}); err != nil {
		t.Fatal(err)
	}
	sendMany(t, f, "q", 5)
	if ds := hammer(t, []*broker.Broker{f}, "q", 1, 2); len(ds) != 1 {
		t.Fatalf("the old queue at 1 a second: %d messages, want 1", len(ds))
	}
	if n := rows(); n != 1 {
		t.Fatalf("%d limits rows after a limited claim, want 1", n)
	}
}

// TestLimitsRowKeptByPurgeReclaimedWithQueue: a queue's limits row (its
// rate's instant) survives a purge, which keeps the queue, and goes with
// the queue's other rows once a deleted queue is reclaimed.
func TestLimitsRowKeptByPurgeReclaimedWithQueue(t *testing.T) {
	t.Parallel()
	schema := schemaFor(t)
	a, _, clock := openPair(t, schema, nil)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, requirePostgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	rows := func() int {
		t.Helper()
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, "queue_limits"}.Sanitize()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := a.CreateQueue(ctx, "q", map[string]string{model.AttrMaxReceivesPerSecond: "1"}, nil); err != nil {
		t.Fatal(err)
	}
	sendMany(t, a, "q", 3)
	if ds := hammer(t, []*broker.Broker{a}, "q", 1, 2); len(ds) != 1 || rows() != 1 {
		t.Fatalf("%d messages, %d limits rows; want 1 and 1", len(ds), rows())
	}
	if err := a.PurgeQueue(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	sendMany(t, a, "q", 3)
	if ds := hammer(t, []*broker.Broker{a}, "q", 1, 2); len(ds) != 0 || rows() != 1 {
		t.Fatalf("after a purge within the second: %d messages, %d limits rows; want 0 (the rate's instant kept) and 1", len(ds), rows())
	}
	if err := a.DeleteQueue(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Minute)
	for i := 0; rows() != 0; i++ {
		if i == 100 {
			t.Fatal("the deleted queue's limits row was never reclaimed")
		}
		if err := raw(a).SweepOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// deleteHold holds every delete statement (isDelete) of a pool whose keys
// hold decides, until release is closed.
type deleteHold struct {
	mu      sync.Mutex
	hold    func(keys []int64) bool
	release chan struct{}
	held    atomic.Int64
}

func (h *deleteHold) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if !isDelete(d.SQL) || len(d.Args) < 3 {
		return ctx
	}
	keys, _ := d.Args[2].([]int64)
	h.mu.Lock()
	hold, release := h.hold != nil && h.hold(keys), h.release
	h.mu.Unlock()
	if hold {
		h.held.Add(1)
		<-release
	}
	return ctx
}

func (h *deleteHold) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// set makes the statements that hold accepts (nil: none) from now on wait
// until the channel it returns is closed.
func (h *deleteHold) set(hold func(keys []int64) bool) (release chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hold, h.release = hold, make(chan struct{})
	return h.release
}

// TestMaxInFlightCancelledDeleteWakes: a delete whose caller's context ends
// while the combined statement that holds its receipt runs (for it and
// another caller) still deletes its message, and that wakes the receive
// waiting at the queue's MaxInFlight, though the caller has left.
func TestMaxInFlightCancelledDeleteWakes(t *testing.T) {
	t.Parallel()
	url := requirePostgres(t)
	hold := &deleteHold{}
	cfg := testConfig(url, schemaFor(t))
	cfg.QueryTracer = hold
	clock := clocktest.NewFakeClock(time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC))
	cfg.Clock, cfg.PollInterval = clock, model.MaxWaitTime // only a wake-up ends the wait
	be, err := postgres.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	f := front(t, be, storage.Options{})
	ctx := context.Background()
	if _, err := f.CreateQueue(ctx, "q", map[string]string{model.AttrMaxInFlight: "3"}, nil); err != nil {
		t.Fatal(err)
	}
	sendMany(t, f, "q", 6)
	zero := time.Duration(0)
	receive := func(n int) []model.Delivery {
		t.Helper()
		ds, err := f.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: n, WaitTime: &zero})
		if err != nil || len(ds) != n {
			t.Fatalf("receive of %d: %d messages, %v", n, len(ds), err)
		}
		return ds
	}
	ds := receive(3) // the cap
	del := func(ctx context.Context, receipt string) <-chan error {
		out := make(chan error, 1)
		go func() {
			res, err := f.Delete(ctx, "q", []model.DeleteEntry{{Receipt: receipt}})
			if err == nil {
				err = res[0]
			}
			out <- err
		}()
		return out
	}
	// Two deletes run (held), so the next two wait and are combined.
	first := hold.set(func([]int64) bool { return true })
	d1, d2 := del(ctx, ds[0].Receipt), del(ctx, ds[1].Receipt)
	testutil.Eventually(t, 10*time.Second, "two deletes held", func() bool { return hold.held.Load() == 2 })
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d3 := del(cctx, ds[2].Receipt)
	d4 := del(ctx, ds[0].Receipt) // deletes nothing: d1 deleted that message first
	testutil.Eventually(t, 10*time.Second, "two deletes waiting", func() bool { return be.DeletesWaiting() == 2 })
	// Let the first two go; hold the combined one (two receipts).
	combined := hold.set(func(keys []int64) bool { return len(keys) == 2 })
	close(first)
	for _, d := range []<-chan error{d1, d2} {
		if err := <-d; err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 10*time.Second, "the combined delete held", func() bool { return hold.held.Load() == 3 })
	receive(2) // at the cap again: ds[2] and two more in flight, one message ready
	type result struct {
		ds  []model.Delivery
		err error
	}
	ch := make(chan result, 1)
	timers := clock.Timers()
	go func() {
		wait := model.MaxWaitTime
		ds, err := f.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 10, WaitTime: &wait})
		ch <- result{ds, err}
	}()
	testutil.Eventually(t, 10*time.Second, "the receive waiting at the cap", func() bool { return clock.Timers() > timers })
	cancel()
	if err := <-d3; err == nil {
		t.Fatal("the cancelled delete succeeded; want its context's error")
	}
	hold.set(nil)
	close(combined)
	if err := <-d4; err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-ch:
		if r.err != nil || len(r.ds) != 1 {
			t.Fatalf("the waiting receive got %d messages (%v), want the 1 the cancelled delete made room for", len(r.ds), r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the receive waiting at the cap was not woken by the cancelled caller's delete")
	}
}

// TestRateLimitClaimInstantAfterLockWait: a limited claim's instant (the
// rate's now, the lease's start, the message's last receive time) is read
// once it holds its queue's limits row, not when its transaction began: a
// claim that waited for the row would otherwise plan the rate as of before
// the wait and give a lease shortened by it. The row is held here by a
// transaction of the test's own, on the database's clock (no test clock).
func TestRateLimitClaimInstantAfterLockWait(t *testing.T) {
	t.Parallel()
	for _, fifo := range []bool{false, true} {
		t.Run(fmt.Sprint("fifo=", fifo), func(t *testing.T) {
			t.Parallel()
			url := requirePostgres(t)
			schema := schemaFor(t)
			be, err := postgres.Open(context.Background(), testConfig(url, schema))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = be.Close() })
			f := front(t, be, storage.Options{})
			ctx := context.Background()
			name, attrs := "q", map[string]string{model.AttrMaxReceivesPerSecond: "1000"}
			var group string
			if fifo {
				name, group = "q.fifo", "g"
				attrs[model.AttrFifoQueue], attrs[model.AttrContentBasedDeduplication] = "true", "true"
			}
			if _, err := f.CreateQueue(ctx, name, attrs, nil); err != nil {
				t.Fatal(err)
			}
			zero := time.Duration(0)
			receive := func() []model.Delivery {
				ds, err := f.Receive(ctx, model.ReceiveRequest{Queue: name, MaxMessages: 1, WaitTime: &zero})
				if err != nil {
					t.Error(err)
				}
				return ds
			}
			if _, err := f.Send(ctx, name, []model.SendEntry{{Body: "m1", GroupID: group}}); err != nil {
				t.Fatal(err)
			}
			if ds := receive(); len(ds) != 1 { // makes the limits row
				t.Fatalf("the first receive got %d messages", len(ds))
			}
			if _, err := f.Send(ctx, name, []model.SendEntry{{Body: "m2", GroupID: group + "2"}}); err != nil {
				t.Fatal(err)
			}
			var conns [2]*pgx.Conn // the test's transaction, and a look at the claim
			for i := range conns {
				if conns[i], err = pgx.Connect(ctx, url); err != nil {
					t.Fatal(err)
				}
				c := conns[i]
				t.Cleanup(func() { _ = c.Close(context.Background()) })
			}
			tx, err := conns[0].Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx) //nolint:errcheck // committed below
			var locked int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM `+pgx.Identifier{schema, "queue_limits"}.Sanitize()+`
				WHERE queue_id = (SELECT id FROM `+pgx.Identifier{schema, "queues"}.Sanitize()+` WHERE name = $1) FOR UPDATE) r`, name).Scan(&locked); err != nil || locked != 1 {
				t.Fatalf("lock the limits row: %d rows, %v", locked, err)
			}
			got := make(chan []model.Delivery, 1)
			go func() { got <- receive() }()
			pid := conns[0].PgConn().PID()
			testutil.Eventually(t, 10*time.Second, "the claim waiting for the limits row", func() bool {
				var n int
				err := conns[1].QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))`, int(pid)).Scan(&n)
				return err == nil && n > 0
			})
			var released time.Time
			if err := tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&released); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			ds := <-got
			if len(ds) != 1 {
				t.Fatalf("the claim that waited got %d messages", len(ds))
			}
			if at := ds[0].LastReceiveAt; at.Before(released) {
				t.Fatalf("the claim that waited for the limits row until %v took its lease at %v, %v before",
					released.Format(time.RFC3339Nano), at.Format(time.RFC3339Nano), released.Sub(at))
			}
		})
	}
}
