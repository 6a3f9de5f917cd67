package postgres_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/broker/storage"
)

// roundTrips counts what the pool's connections send: each statement, each
// batch once (a batch is one round trip), and each prepare (pgx prepares a
// statement on a connection's first use of it, one round trip, then reuses
// it from the connection's statement cache). It records the statements'
// first words, to say which they were when a test fails.
type roundTrips struct {
	n  atomic.Int64
	mu sync.Mutex
	on bool
	// sql are the statements counted while on; prepares the prepares.
	sql      []string
	prepares int64
}

func (r *roundTrips) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	return ctx
}

func (r *roundTrips) TracePrepareEnd(ctx context.Context, _ *pgx.Conn, d pgx.TracePrepareEndData) {
	if !d.AlreadyPrepared && ctx.Value(counted{}) != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.on {
			r.n.Add(1)
			r.prepares++
			r.sql = append(r.sql, "prepare")
		}
	}
}

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if ctx.Value(inBatch{}) == nil && ctx.Value(counted{}) != nil {
		r.count(d.SQL)
	}
	return ctx
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

type inBatch struct{}

// counted marks the context of the calls whose statements are counted (not
// the background duties').
type counted struct{}

func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	if ctx.Value(counted{}) != nil {
		r.count("batch")
	}
	return context.WithValue(ctx, inBatch{}, true)
}

func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (r *roundTrips) count(sql string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.on {
		r.n.Add(1)
		if len(sql) > 60 {
			sql = sql[:60]
		}
		r.sql = append(r.sql, sql)
	}
}

// during counts the round trips of f, prepares included.
func (r *roundTrips) during(f func()) (int64, []string) {
	r.mu.Lock()
	r.on, r.sql, r.prepares = true, nil, 0
	r.n.Store(0)
	r.mu.Unlock()
	f()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = false
	return r.n.Load(), r.sql
}

// quiet runs f without counting.
func (r *roundTrips) quiet(f func()) {
	r.mu.Lock()
	r.on = false
	r.mu.Unlock()
	f()
	r.mu.Lock()
	r.on = true
	r.mu.Unlock()
}

// steady counts the round trips of f once its statements are prepared on
// the connection it gets: it runs f until a run prepared nothing (at most
// 5 runs; the pool usually hands the same idle connection back to a
// sequential caller). It fails the test if every run prepared something.
func (r *roundTrips) steady(t *testing.T, what string, f func()) (int64, []string) {
	t.Helper()
	for range 5 {
		n, sql := r.during(f)
		r.mu.Lock()
		p := r.prepares
		r.mu.Unlock()
		if p == 0 {
			return n, sql
		}
		t.Logf("%s: %d round trips, %d of them prepares (first use on a connection): %q", what, n, p, sql)
	}
	t.Fatalf("%s: every run prepared statements", what)
	return 0, nil
}

// TestReceiveRoundTrips counts the round trips to PostgreSQL of a receive
// that finds a message on a standard queue without a retry or redrive
// policy (the steady state of a busy queue), with and without an
// in-flight cap, of a send (its queue's row cached by the sends before) and
// a delete, and of a receive and a delete on a
// queue with a retry policy and on one with a redrive policy. Each is
// counted on a connection that has prepared its statements already (the
// steady state; the first use of a statement on a connection adds its
// prepare).
func TestReceiveRoundTrips(t *testing.T) {
	t.Parallel()
	url := requirePostgres(t)
	schema := schemaFor(t)
	tr := &roundTrips{}
	cfg := testConfig(url, schema)
	cfg.QueryTracer = tr
	be, err := postgres.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	f := front(t, be, storage.Options{})
	ctx := context.WithValue(context.Background(), counted{}, true)
	for _, q := range []struct {
		name  string
		attrs map[string]string
	}{
		{"q", nil},
		{"dlq", nil},
		{"retry", map[string]string{model.AttrRetryPolicy: `{"baseSeconds":1}`}},
		{"redrive", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":"5"}`}},
	} {
		if _, err := f.CreateQueue(ctx, q.name, q.attrs, nil); err != nil {
			t.Fatalf("create %s: %v", q.name, err)
		}
	}
	vis, wait := time.Minute, time.Duration(0)
	for _, tc := range []struct {
		name  string
		queue string
		cap   int64
		max   int64 // the most round trips a receive may take
	}{
		{"no cap", "q", 0, 2},
		{"in-flight cap", "q", 1000, 2},
		{"retry policy", "retry", 0, 2},
		{"redrive policy", "redrive", 0, 2},
	} {
		send := func() {
			if _, err := f.Send(ctx, tc.queue, []model.SendEntry{{Body: "x"}}); err != nil {
				t.Fatal(err)
			}
		}
		send() // caches the queue's row
		n, sql := tr.steady(t, "send", send)
		t.Logf("send (%s): %d round trips: %q", tc.name, n, sql)
		if n > 1 {
			t.Errorf("send (%s): %d round trips, want 1", tc.name, n)
		}
		receive := func() []model.Delivery {
			ds, err := be.Receive(ctx, model.ReceiveRequest{Queue: tc.queue, MaxMessages: 1, Visibility: &vis, WaitTime: &wait, InFlightCap: tc.cap})
			if err != nil || len(ds) != 1 {
				t.Fatalf("%s: receive: %d messages, %v", tc.name, len(ds), err)
			}
			return ds
		}
		n, sql = tr.steady(t, "receive", func() {
			// Every run but the last leaves its message in flight; the
			// in-flight cap is far away.
			tr.quiet(send)
			receive()
		})
		t.Logf("receive (%s): %d round trips: %q", tc.name, n, sql)
		if n > tc.max {
			t.Errorf("receive (%s): %d round trips, want <= %d", tc.name, n, tc.max)
		}
		n, sql = tr.steady(t, "delete", func() {
			var ds []model.Delivery
			tr.quiet(func() { send(); ds = receive() })
			if _, err := f.Delete(ctx, tc.queue, []model.DeleteEntry{{Receipt: ds[0].Receipt}}); err != nil {
				t.Fatal(err)
			}
		})
		t.Logf("delete (%s): %d round trips: %q", tc.name, n, sql)
		if n > 1 {
			t.Errorf("delete (%s): %d round trips, want 1", tc.name, n)
		}
	}
}
