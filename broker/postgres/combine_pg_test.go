package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/internal/testutil"
)

// stmtGate holds every statement that match accepts at its start while
// closed, and counts them.
type stmtGate struct {
	match  func(sql string) bool
	mu     sync.Mutex
	closed chan struct{} // nil: open
	n      atomic.Int64
}

// isInsert matches a send's insert, isDelete a Delete's first statement.
func isInsert(sql string) bool { return strings.HasPrefix(sql, "WITH v (delay") }
func isDelete(sql string) bool { return strings.Contains(sql, "array_agg(lease ORDER BY id, lease)") }

func (g *stmtGate) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if g.match(d.SQL) {
		g.n.Add(1)
		g.mu.Lock()
		c := g.closed
		g.mu.Unlock()
		if c != nil {
			<-c
		}
	}
	return ctx
}

func (g *stmtGate) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (g *stmtGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = make(chan struct{})
}

func (g *stmtGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.closed)
	g.closed = nil
}

// TestConcurrentSendsCombine: sends to one queue that come while two
// inserts of that queue run are stored by one insert when those end; every
// message is stored once with its own body. When the queue's settings
// change (on another broker) before the held inserts reach PostgreSQL, the
// combined insert finds its cached row stale and every send in it is stored
// under the new settings.
func TestConcurrentSendsCombine(t *testing.T) {
	t.Parallel()
	url := requirePostgres(t)
	schema := schemaFor(t)
	gate := &stmtGate{match: isInsert}
	cfg := testConfig(url, schema)
	cfg.QueryTracer = gate
	be, err := postgres.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	f := front(t, be, broker.Options{})
	other, err := postgres.Open(context.Background(), testConfig(url, schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	o := front(t, other, broker.Options{})
	ctx := context.Background()

	for round, change := range []bool{false, true} {
		name := fmt.Sprintf("q%d", round)
		if _, err := f.CreateQueue(ctx, name, nil, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Send(ctx, name, []broker.SendEntry{{Body: "warm"}}); err != nil { // caches the row
			t.Fatal(err)
		}
		const waiting = 10
		gate.close()
		before := gate.n.Load()
		var wg sync.WaitGroup
		errs := make(chan error, waiting+2)
		send := func(body string) {
			defer wg.Done()
			res, err := f.Send(ctx, name, []broker.SendEntry{{ID: "a", Body: body}, {ID: "b", Body: body + "/2"}})
			if err == nil && (res[0].Err != nil || res[1].Err != nil) {
				err = fmt.Errorf("%v %v", res[0].Err, res[1].Err)
			}
			errs <- err
		}
		wg.Add(waiting + 2)
		go send("held-0")
		go send("held-1")
		testutil.Eventually(t, 10*time.Second, "two inserts held", func() bool { return gate.n.Load() == before+2 })
		for i := range waiting {
			go send(fmt.Sprintf("m-%d", i))
		}
		testutil.Eventually(t, 10*time.Second, "sends waiting", func() bool { return be.SendsWaiting() == waiting })
		if change {
			if err := o.SetQueueAttributes(ctx, name, map[string]string{"DelaySeconds": "600"}); err != nil {
				t.Fatal(err)
			}
		}
		gate.open()
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		inserts := gate.n.Load() - before
		// Unchanged: the two held inserts and one for the ten sends that
		// waited. Changed: each of those three finds the row stale and its
		// sends start again from a fresh read (every one its own insert,
		// or fewer when they combine again).
		if !change && inserts != 3 {
			t.Errorf("%d inserts for %d sends, want 3", inserts, waiting+2)
		}
		info, err := f.GetQueue(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		total := int64(2 * (waiting + 2))
		if change {
			if info.Stats.Visible != 1 || info.Stats.Delayed != total {
				t.Fatalf("visible %d, delayed %d; want 1 and %d (the sends after the change delayed)", info.Stats.Visible, info.Stats.Delayed, total)
			}
			continue
		}
		if info.Stats.Visible != total+1 {
			t.Fatalf("visible %d, want %d", info.Stats.Visible, total+1)
		}
		vis, wait := time.Minute, time.Duration(0)
		bodies := map[string]int{}
		for {
			ds, err := be.Receive(ctx, broker.ReceiveRequest{Queue: name, MaxMessages: 10, Visibility: &vis, WaitTime: &wait})
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) == 0 {
				break
			}
			for _, d := range ds {
				bodies[d.Message.Body]++
			}
		}
		if len(bodies) != int(total+1) {
			t.Fatalf("received %d distinct bodies, want %d", len(bodies), total+1)
		}
		for i := range waiting {
			for _, b := range []string{fmt.Sprintf("m-%d", i), fmt.Sprintf("m-%d/2", i)} {
				if bodies[b] != 1 {
					t.Fatalf("body %q received %d times", b, bodies[b])
				}
			}
		}
	}
}

// TestConcurrentDeletesCombine: deletes on one queue that come while two
// deletes of that queue run are done by one statement when those end; each
// receipt deletes only its own lease (a receipt of an older lease of a
// message leased again leaves it), and the counters follow.
func TestConcurrentDeletesCombine(t *testing.T) {
	t.Parallel()
	url := requirePostgres(t)
	gate := &stmtGate{match: isDelete}
	cfg := testConfig(url, schemaFor(t))
	cfg.QueryTracer = gate
	be, err := postgres.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	f := front(t, be, broker.Options{})
	ctx := context.Background()
	if _, err := f.CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	const n = 12
	for i := range n {
		if _, err := f.Send(ctx, "q", []broker.SendEntry{{Body: fmt.Sprint(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	vis, wait := time.Minute, time.Duration(0)
	receipts := map[string]string{}
	for len(receipts) < n {
		ds, err := f.Receive(ctx, broker.ReceiveRequest{Queue: "q", MaxMessages: 10, Visibility: &vis, WaitTime: &wait})
		if err != nil || len(ds) == 0 {
			t.Fatalf("receive: %d messages, %v", len(ds), err)
		}
		for _, d := range ds {
			receipts[d.Body] = d.Receipt
		}
	}
	// Message "0" is released and leased again: its first receipt is stale.
	stale := receipts["0"]
	if errs, err := f.ChangeVisibility(ctx, "q", []broker.VisibilityEntry{{Receipt: stale, Timeout: 0}}); err != nil || errs[0] != nil {
		t.Fatalf("release: %v %v", err, errs)
	}
	ds, err := f.Receive(ctx, broker.ReceiveRequest{Queue: "q", MaxMessages: 1, Visibility: &vis, WaitTime: &wait})
	if err != nil || len(ds) != 1 || ds[0].Body != "0" {
		t.Fatalf("receive again: %v %v", ds, err)
	}
	receipts["0"] = stale // deleted below: must leave the message

	gate.close()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	del := func(r string) {
		defer wg.Done()
		res, err := f.Delete(ctx, "q", []broker.DeleteEntry{{Receipt: r}})
		if err == nil {
			err = res[0]
		}
		errs <- err
	}
	wg.Add(n)
	go del(receipts["1"])
	go del(receipts["2"])
	testutil.Eventually(t, 10*time.Second, "two deletes held", func() bool { return gate.n.Load() == 2 })
	for i := range n {
		if i != 1 && i != 2 {
			go del(receipts[fmt.Sprint(i)])
		}
	}
	testutil.Eventually(t, 10*time.Second, "deletes waiting", func() bool { return be.DeletesWaiting() == n-2 })
	gate.open()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := gate.n.Load(); got != 3 {
		t.Errorf("%d delete statements for %d deletes, want 3", got, n)
	}
	info, err := f.GetQueue(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if info.Stats.Visible != 0 || info.Stats.InFlight != 1 {
		t.Fatalf("visible %d, in flight %d; want 0 and 1 (message 0, leased again)", info.Stats.Visible, info.Stats.InFlight)
	}
}
