package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/internal/pgtest"
)

// openPair opens two brokers on one schema and one fake clock.
func openPair(t *testing.T, schema string, tune func(*postgres.Config)) (a, b *broker.Broker, clock *clocktest.FakeClock) {
	t.Helper()
	url := requirePostgres(t)
	clock = clocktest.NewFakeClock(time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC))
	open := func() *broker.Broker {
		cfg := testConfig(url, schema)
		cfg.Clock = clock
		if tune != nil {
			tune(&cfg)
		}
		be, err := postgres.Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = be.Close() })
		return front(t, be, cfg.Options)
	}
	return open(), open(), clock
}

// TestLongSchemaNameWakesOtherBroker: a schema name of the longest allowed
// length (63 bytes) still gives a working LISTEN/NOTIFY channel, so a long
// poll on one broker wakes on a send through another without polling.
func TestLongSchemaNameWakesOtherBroker(t *testing.T) {
	url := requirePostgres(t)
	// The test process's token in the name: two test runs at once never
	// share the schema (pgtest.SweepSchemas drops a killed run's).
	prefix := "t_" + pgtest.Owner(t, url) + "_long_"
	schema := prefix + strings.Repeat("x", 63-len(prefix))
	drop := func() { pgtest.DropSchema(t, url, schema) }
	drop()
	t.Cleanup(drop)
	a, b, _ := openPair(t, schema, func(c *postgres.Config) { c.PollInterval = model.MaxWaitTime })
	ctx := context.Background()
	if _, err := a.CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	wait := 20 * time.Second
	got := make(chan []model.Delivery, 1)
	errs := make(chan error, 1)
	go func() {
		ds, err := b.Receive(ctx, model.ReceiveRequest{Queue: "q", WaitTime: &wait})
		if err != nil {
			errs <- err
			return
		}
		got <- ds
	}()
	// The fake clock never moves: only a notification can wake b's receive.
	// Send until it returns (the first send may come before it waits).
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case ds := <-got:
			if len(ds) == 0 {
				t.Fatal("receive on b returned no message")
			}
			return
		case err := <-errs:
			t.Fatal(err)
		case <-deadline:
			t.Fatal("a long poll on broker b did not wake within 10 s of sends through broker a (schema name of 63 bytes)")
		case <-tick.C:
			if _, err := a.Send(ctx, "q", []model.SendEntry{{Body: "x"}}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// countGroups returns the number of FIFO group rows in schema.
func countGroups(t *testing.T, schema string) int64 {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), requirePostgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int64
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{schema, "groups"}.Sanitize()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFifoEmptyGroupsPruned: a FIFO group row whose messages are all gone
// is deleted by the sweeper. Every FIFO receive reads the head of every
// group row of its queue, so group rows that outlive their messages (one per
// distinct MessageGroupId ever sent) would make each receive slower without
// bound (about 3.5 s per receive at a million of them) and finally exceed
// statement_timeout.
func TestFifoEmptyGroupsPruned(t *testing.T) {
	schema := schemaFor(t)
	a, b, _ := openPair(t, schema, nil)
	ctx := context.Background()
	fifo := map[string]string{model.AttrFifoQueue: "true", model.AttrContentBasedDeduplication: "true"}
	if _, err := a.CreateQueue(ctx, "q.fifo", fifo, nil); err != nil {
		t.Fatal(err)
	}
	const n = 30
	for i := range n {
		if _, err := a.Send(ctx, "q.fifo", []model.SendEntry{{Body: fmt.Sprint("m", i), GroupID: fmt.Sprint("g", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	left := n
	for left > 0 {
		ds, err := b.Receive(ctx, model.ReceiveRequest{Queue: "q.fifo", MaxMessages: 10})
		if err != nil || len(ds) == 0 {
			t.Fatalf("receive with %d messages left: %d messages, %v", left, len(ds), err)
		}
		for _, d := range ds {
			if errs, err := b.Delete(ctx, "q.fifo", []model.DeleteEntry{{ID: "1", Receipt: d.Receipt}}); err != nil || errs[0] != nil {
				t.Fatal(err, errs)
			}
		}
		left -= len(ds)
	}
	if err := raw(a).SweepOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := countGroups(t, schema); got != 0 {
		t.Fatalf("after every message was deleted and a sweep, %d group rows are left; want 0", got)
	}
}

// TestFifoGroupPruneRacesSends: sends, receives and deletes on two brokers
// while both sweep (pruning empty group rows) in a loop: no message is
// stranded (a group row pruned under a send would hide its message from
// every receive), and each group is received in send order.
func TestFifoGroupPruneRacesSends(t *testing.T) {
	schema := schemaFor(t)
	a, b, _ := openPair(t, schema, nil)
	ctx := context.Background()
	fifo := map[string]string{model.AttrFifoQueue: "true", model.AttrContentBasedDeduplication: "true"}
	if _, err := a.CreateQueue(ctx, "q.fifo", fifo, nil); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, be := range []*broker.Broker{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := raw(be).SweepOnce(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	const groups, rounds = 4, 60
	next := map[string]int{}
	for r := range rounds {
		be := []*broker.Broker{a, b}[r%2]
		for g := range groups {
			body := fmt.Sprintf("%d/%d", g, r)
			if _, err := be.Send(ctx, "q.fifo", []model.SendEntry{{Body: body, GroupID: fmt.Sprint("g", g)}}); err != nil {
				t.Fatal(err)
			}
		}
		// Drain through the other broker: every message just sent must come.
		other := []*broker.Broker{b, a}[r%2]
		for got := 0; got < groups; {
			ds, err := other.Receive(ctx, model.ReceiveRequest{Queue: "q.fifo", MaxMessages: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) == 0 {
				t.Fatalf("round %d: %d of %d messages received, then none (stranded)", r, got, groups)
			}
			for _, d := range ds {
				var g, rr int
				fmt.Sscanf(d.Body, "%d/%d", &g, &rr)
				if want := next[d.GroupID]; rr != want {
					t.Fatalf("group %s: got message of round %d, want %d", d.GroupID, rr, want)
				}
				next[d.GroupID]++
				if errs, err := other.Delete(ctx, "q.fifo", []model.DeleteEntry{{ID: "1", Receipt: d.Receipt}}); err != nil || errs[0] != nil {
					t.Fatal(err, errs)
				}
			}
			got += len(ds)
		}
	}
	close(stop)
	wg.Wait()
}
