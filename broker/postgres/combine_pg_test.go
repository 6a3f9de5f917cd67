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

	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/broker/storage"
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

// isDelete matches a Delete's first statement.
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
	f := front(t, be, storage.Options{})
	ctx := context.Background()
	if _, err := f.CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	const n = 12
	for i := range n {
		if _, err := f.Send(ctx, "q", []model.SendEntry{{Body: fmt.Sprint(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	vis, wait := time.Minute, time.Duration(0)
	receipts := map[string]string{}
	for len(receipts) < n {
		ds, err := f.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 10, Visibility: &vis, WaitTime: &wait})
		if err != nil || len(ds) == 0 {
			t.Fatalf("receive: %d messages, %v", len(ds), err)
		}
		for _, d := range ds {
			receipts[d.Body] = d.Receipt
		}
	}
	// Message "0" is released and leased again: its first receipt is stale.
	stale := receipts["0"]
	if errs, err := f.ChangeVisibility(ctx, "q", []model.VisibilityEntry{{Receipt: stale, Timeout: 0}}); err != nil || errs[0] != nil {
		t.Fatalf("release: %v %v", err, errs)
	}
	ds, err := f.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 1, Visibility: &vis, WaitTime: &wait})
	if err != nil || len(ds) != 1 || ds[0].Body != "0" {
		t.Fatalf("receive again: %v %v", ds, err)
	}
	receipts["0"] = stale // deleted below: must leave the message

	gate.close()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	del := func(r string) {
		defer wg.Done()
		res, err := f.Delete(ctx, "q", []model.DeleteEntry{{Receipt: r}})
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
