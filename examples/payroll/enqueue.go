package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/client/pgtx"
)

// enqueueMain creates the queue and the tables, then enqueues n payments in
// transactions of batch payments each: the payroll_due rows and their
// messages commit together.
func enqueueMain(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("payroll enqueue", flag.ExitOnError)
	brokerURL := fs.String("broker", "http://127.0.0.1:9324", "a broker's base URL (to create the queue)")
	db := fs.String("db", "postgres://postgres@127.0.0.1:5432/payroll", "the PostgreSQL database of the brokers (--store) and of the payroll tables")
	n := fs.Int("n", 200000, "payments to enqueue (employees 1..n)")
	batch := fs.Int("batch", 1000, "payments per transaction")
	_ = fs.Parse(args)
	if *n < 1 || *batch < 1 {
		return fmt.Errorf("-n and -batch must be at least 1")
	}

	c, err := client.New(*brokerURL)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.CreateQueue(ctx, Queue, nil); err != nil {
		return fmt.Errorf("create queue %s on %s (is a broker on this database running? sluice serve --store %s): %w", Queue, *brokerURL, *db, err)
	}
	pool, err := pgxpool.New(ctx, *db)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, schema); err != nil {
		return fmt.Errorf("create the payroll tables: %w", err)
	}

	start := time.Now()
	sender := pgtx.New(pgtx.Config{})
	for first := 1; first <= *n; first += *batch {
		last := min(first+*batch-1, *n)
		if err := enqueueBatch(ctx, pool, sender, first, last); err != nil {
			return fmt.Errorf("enqueue employees %d..%d: %w", first, last, err)
		}
	}
	el := time.Since(start)
	fmt.Printf("enqueued %d payments in %v (%.0f/s)\n", *n, el.Round(time.Millisecond), float64(*n)/el.Seconds())
	return nil
}

// enqueueBatch makes employees first..last due and queues their payments, in
// one transaction. A batch already enqueued (a rerun of enqueue) is skipped:
// its payroll_due rows exist.
func enqueueBatch(ctx context.Context, pool *pgxpool.Pool, sender *pgtx.Sender, first, last int) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO payroll_due (employee, cents)
			SELECT e, 300000 + (e % 1000) * 100 FROM generate_series($1::int, $2::int) AS e
			ON CONFLICT DO NOTHING`, first, last)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return nil
		}
		if tag.RowsAffected() != int64(last-first+1) {
			return fmt.Errorf("%d of %d employees were already due: run enqueue again with the same -batch", int64(last-first+1)-tag.RowsAffected(), last-first+1)
		}
		// Sends last, just before the commit: the queue rows stay locked
		// until the transaction ends.
		msgs := make([]client.Message, 0, 10)
		for e := first; e <= last; e++ {
			body, _ := json.Marshal(Payment{Employee: e, Cents: cents(e)})
			msgs = append(msgs, client.Message{Body: string(body),
				Attributes: map[string]client.Attribute{"IdempotencyKey": client.String(Key(e))}})
			if len(msgs) == 10 || e == last {
				if _, err := sender.Send(ctx, tx, Queue, msgs...); err != nil {
					return err
				}
				msgs = msgs[:0]
			}
		}
		return nil
	})
}
