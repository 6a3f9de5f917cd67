package postgres_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/internal/testutil"
)

// What an application's open transaction holds after a SendTx must not
// hold the brokers' receives of the queue, on a limited queue least of all:
// its claims take turns on the queue's limits row, so one claim waiting for
// the application would hold every other one.

// openSendTx begins a transaction on a connection of its own and sends
// entries to queue in it (SendTx), leaving it open; the transaction is
// rolled back when the test ends. It returns the transaction and the
// connection's backend process id.
func openSendTx(t *testing.T, schema string, clock model.Clock, queue string, entries ...model.SendEntry) (pgx.Tx, uint32) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, requirePostgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := postgres.SendTx(ctx, tx, postgres.TxConfig{Schema: schema, Clock: clock}, queue, entries); err != nil {
		t.Fatal(err)
	}
	return tx, conn.PgConn().PID()
}

// within runs f on a goroutine of its own and fails the test when it has
// not returned after limit (real time); release then ends what f waits for
// (the open transaction), so that the goroutine ends with the test.
func within(t *testing.T, limit time.Duration, what string, release func(), f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(limit):
		release()
		<-done
		t.Fatalf("%s: still waiting after %v, while an application's transaction held a SendTx open", what, limit)
	}
}

// TestSendTxLeavesReceivesAlone: while an application's transaction holds
// a SendTx's writes, receives, deletes and sends of the same queue through
// the brokers go on, on a queue with limits as on one without: the SendTx
// counts its messages on a counter row of its own, which no broker
// statement picks (before, it took one of the 16 that every claim, delete
// and send pick at random, and a claim that picked it waited for the
// application's commit while holding the queue's limits row, so every
// receive of the queue on every broker waited).
func TestSendTxLeavesReceivesAlone(t *testing.T) {
	t.Parallel()
	for _, limited := range []bool{false, true} {
		t.Run(fmt.Sprint("limited=", limited), func(t *testing.T) {
			t.Parallel()
			schema := schemaFor(t)
			a, b, clock := openPair(t, schema, nil)
			ctx := context.Background()
			attrs := map[string]string{}
			if limited {
				attrs[model.AttrMaxInFlight] = "10000"
			}
			if _, err := a.CreateQueue(ctx, "q", attrs, nil); err != nil {
				t.Fatal(err)
			}
			const rounds = 64 // 1 - (15/16)^(3*64): a random row would meet the SendTx's row for sure
			sendMany(t, a, "q", rounds)
			tx, _ := openSendTx(t, schema, clock, "q", model.SendEntry{ID: "0", Body: "in the application's transaction"})
			var done atomic.Int64
			within(t, 20*time.Second, "receives, deletes and sends", func() { _ = tx.Rollback(ctx) }, func() {
				zero := time.Duration(0)
				for i := range rounds {
					f := []*broker.Broker{a, b}[i%2]
					ds, err := f.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 1, WaitTime: &zero})
					if err != nil || len(ds) != 1 {
						t.Errorf("receive %d: %d messages, %v", i, len(ds), err)
						return
					}
					if res, err := f.Delete(ctx, "q", []model.DeleteEntry{{Receipt: ds[0].Receipt}}); err != nil || res[0] != nil {
						t.Errorf("delete %d: %v %v", i, err, res)
						return
					}
					if _, err := f.Send(ctx, "q", []model.SendEntry{{Body: fmt.Sprint("again ", i)}}); err != nil {
						t.Errorf("send %d: %v", i, err)
						return
					}
					done.Add(1)
				}
			})
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			q, err := a.GetQueue(ctx, "q")
			if err != nil || q.Stats.Visible != rounds+1 || q.Stats.InFlight != 0 {
				t.Fatalf("after %d rounds and the commit: %+v (%v); want %d visible, none in flight", done.Load(), q.Stats, err, rounds+1)
			}
		})
	}
}

// TestSendTxLeavesLimitedFifoReceives: on a limited FIFO queue a claim
// that finds every receivable group locked, here by an application's open
// SendTx to group a, waits for that group without holding the queue's
// limits row: a receive on the other broker still gets group b's message.
func TestSendTxLeavesLimitedFifoReceives(t *testing.T) {
	t.Parallel()
	schema := schemaFor(t)
	a, b, clock := openPair(t, schema, nil)
	ctx := context.Background()
	if _, err := a.CreateQueue(ctx, "q.fifo", map[string]string{model.AttrFifoQueue: "true",
		model.AttrContentBasedDeduplication: "true", model.AttrMaxInFlight: "100"}, nil); err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct{ group, body string }{{"a", "a1"}, {"b", "b1"}, {"b", "b2"}} {
		if _, err := a.Send(ctx, "q.fifo", []model.SendEntry{{Body: m.body, GroupID: m.group}}); err != nil {
			t.Fatal(err)
		}
	}
	tx, pid := openSendTx(t, schema, clock, "q.fifo", model.SendEntry{Body: "a2", GroupID: "a"})
	zero := time.Duration(0)
	recv := func(f *broker.Broker) ([]model.Delivery, error) {
		return f.Receive(ctx, model.ReceiveRequest{Queue: "q.fifo", MaxMessages: 1, WaitTime: &zero})
	}
	var b1 []model.Delivery
	within(t, 10*time.Second, "the receive of b1", func() { _ = tx.Rollback(ctx) }, func() {
		var err error
		if b1, err = recv(a); err != nil || len(b1) != 1 || b1[0].Body != "b1" {
			t.Errorf("the first receive: %v %v; want b1 (group a is locked by the transaction)", bodiesOf(b1), err)
		}
	})
	if t.Failed() {
		return
	}
	// Now only group a is receivable, and locked: a receive waits for it.
	type result struct {
		ds  []model.Delivery
		err error
	}
	waiting := make(chan result, 1)
	go func() {
		ds, err := recv(a)
		waiting <- result{ds, err}
	}()
	conn, err := pgx.Connect(ctx, requirePostgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	testutil.Eventually(t, 10*time.Second, "a claim waiting for the transaction's group", func() bool {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))`, int(pid)).Scan(&n)
		return err == nil && n > 0
	})
	if res, err := b.Delete(ctx, "q.fifo", []model.DeleteEntry{{Receipt: b1[0].Receipt}}); err != nil || res[0] != nil {
		t.Fatal(err, res)
	}
	within(t, 10*time.Second, "a receive on the other broker while a claim waits for group a", func() { _ = tx.Rollback(ctx) }, func() {
		if ds, err := recv(b); err != nil || len(ds) != 1 || ds[0].Body != "b2" {
			t.Errorf("the receive on the other broker: %v %v; want b2", bodiesOf(ds), err)
		}
	})
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-waiting:
		if r.err != nil || len(r.ds) != 1 || r.ds[0].Body != "a1" {
			t.Fatalf("the receive that waited for group a: %v %v; want a1", bodiesOf(r.ds), r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the receive that waited for group a did not return after the rollback")
	}
}

// bodiesOf lists the bodies of ds.
func bodiesOf(ds []model.Delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Body)
	}
	return out
}
