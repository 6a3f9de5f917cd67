package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/postgres"
)

// openPair opens two brokers on one schema and one fake clock.
func openPair(t *testing.T, schema string, tune func(*postgres.Config)) (a, b *postgres.Backend, clock *broker.FakeClock) {
	t.Helper()
	url := requirePostgres(t)
	clock = broker.NewFakeClock(time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC))
	open := func() *postgres.Backend {
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
		return be
	}
	return open(), open(), clock
}

// TestLongSchemaNameWakesOtherBroker: a schema name of the longest allowed
// length (63 bytes) still gives a working LISTEN/NOTIFY channel, so a long
// poll on one broker wakes on a send through another without polling.
func TestLongSchemaNameWakesOtherBroker(t *testing.T) {
	url := requirePostgres(t)
	schema := "t_long_" + strings.Repeat("x", 63-len("t_long_"))
	drop := func() {
		conn, err := pgx.Connect(context.Background(), url)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	}
	drop()
	t.Cleanup(drop)
	a, b, _ := openPair(t, schema, func(c *postgres.Config) { c.PollInterval = broker.MaxWaitTime })
	ctx := context.Background()
	if _, err := a.CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	wait := 20 * time.Second
	got := make(chan []broker.Delivery, 1)
	errs := make(chan error, 1)
	go func() {
		ds, err := b.Receive(ctx, broker.ReceiveRequest{Queue: "q", WaitTime: &wait})
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
			if _, err := a.Send(ctx, "q", []broker.SendEntry{{Body: "x"}}); err != nil {
				t.Fatal(err)
			}
		}
	}
}
