package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/worker"
	"github.com/sluicemq/sluice/worker/idempotency"
	"github.com/sluicemq/sluice/worker/idempotency/pgstore"
)

// workMain pays until the n payments of the run are paid and the queue is
// empty, printing where it starts (resumes), its progress and its end.
func workMain(args []string) error {
	fs := flag.NewFlagSet("payroll work", flag.ExitOnError)
	brokerURL := fs.String("broker", "http://127.0.0.1:9324", "a broker's base URL")
	db := fs.String("db", "postgres://postgres@127.0.0.1:5432/payroll", "the PostgreSQL database of the payroll tables")
	n := fs.Int("n", 200000, "payments in the run: the worker exits when all are paid")
	concurrency := fs.Int("concurrency", 32, "payments handled at once")
	lease := fs.Duration("lease", 30*time.Second, "the lease of each message: after a crash, its messages come back after this long")
	progress := fs.Duration("progress", 2*time.Second, "how often to print the progress")
	protocol := fs.String("protocol", string(worker.ProtocolStream), "how the worker takes its messages: stream (a consumer stream: the broker pushes them and keeps their leases) or http (long polls of the native API)")
	_ = fs.Parse(args)
	over := map[worker.Protocol]string{worker.ProtocolStream: "over a stream", worker.ProtocolHTTP: "over HTTP"}[worker.Protocol(*protocol)]
	if over == "" {
		return fmt.Errorf("-protocol %q: want stream or http", *protocol)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pid := os.Getpid()
	db2, err := pgxpool.ParseConfig(*db)
	if err != nil {
		return err
	}
	db2.MaxConns = int32(*concurrency + 4)
	pool, err := pgxpool.NewWithConfig(ctx, db2)
	if err != nil {
		return err
	}
	defer pool.Close()
	store, err := pgstore.New(ctx, pool, pgstore.Config{})
	if err != nil {
		return fmt.Errorf("idempotency store: %w", err)
	}
	paid := func() (int64, error) {
		var k int64
		err := pool.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&k)
		return k, err
	}
	already, err := paid()
	if err != nil {
		return fmt.Errorf("read the payments (did enqueue run?): %w", err)
	}
	if already == 0 {
		fmt.Printf("worker %d: starting the run: 0 of %d paid, %s\n", pid, *n, over)
	} else {
		fmt.Printf("worker %d: resuming at %d of %d paid (%.1f %%), %s\n", pid, already, *n, 100*float64(already)/float64(*n), over)
	}

	// ran counts the payments this process made, skipped the deliveries
	// whose key was already recorded: redeliveries of paid payments.
	var ran, skipped atomic.Int64
	handler := worker.JSON(func(ctx context.Context, m *worker.Message, p Payment) error {
		did, err := store.InTx(ctx, idempotency.Key(m), func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO payments (employee, cents, worker_pid) VALUES ($1, $2, $3)`, p.Employee, p.Cents, pid)
			return err
		})
		if err != nil {
			return err
		}
		if did {
			ran.Add(1)
		} else {
			skipped.Add(1)
		}
		return nil
	})

	c, err := client.New(*brokerURL)
	if err != nil {
		return err
	}
	defer c.Close()
	cfg := worker.DefaultConfig()
	// The stream's name in the broker's consumer list (sluice queue
	// consumers payroll-payments) says which worker it is.
	cfg.Source = worker.NewSource(c, Queue, worker.WithProtocol(worker.Protocol(*protocol)),
		worker.WithClientName(fmt.Sprintf("payroll worker %d", pid)))
	cfg.Handler = handler
	cfg.Concurrency = *concurrency
	cfg.Prefetch = *concurrency / 2
	cfg.Lease = *lease
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p, err := worker.NewPool(cfg)
	if err != nil {
		return err
	}
	start := time.Now()
	ranErr := make(chan error, 1)
	go func() { ranErr <- p.Run(context.Background()) }()

	tick := time.NewTicker(*progress)
	defer tick.Stop()
	done := false
	for !done {
		select {
		case <-ctx.Done():
			done = true
			continue
		case err := <-ranErr:
			return fmt.Errorf("the pool stopped: %w", err)
		case <-tick.C:
		}
		k, err := paid()
		if err != nil {
			fmt.Printf("worker %d: reading the progress: %v\n", pid, err)
			continue
		}
		fmt.Printf("worker %d: %d of %d paid; this process paid %d, skipped %d redeliveries\n", pid, k, *n, ran.Load(), skipped.Load())
		if k > int64(*n) {
			return fmt.Errorf("%d payments for %d employees: some were paid twice", k, *n)
		}
		if k == int64(*n) {
			// All paid: wait for the queue to drain too (the last acks).
			st, err := c.Stats(ctx, Queue)
			done = err == nil && st.Depth == 0
		}
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-ranErr; !errors.Is(err, worker.ErrPoolClosed) {
		return err
	}
	el := time.Since(start)
	fmt.Printf("worker %d: done: this process paid %d and skipped %d redeliveries in %v (%.0f/s)\n",
		pid, ran.Load(), skipped.Load(), el.Round(time.Millisecond), float64(ran.Load())/el.Seconds())
	return nil
}
