package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/examples/internal/drain"
	"github.com/sluicemq/sluice/worker"
)

func main() {
	brokerURL := flag.String("broker", "http://127.0.0.1:9324", "the broker's base URL")
	orders := flag.Int("orders", 100, "good orders to send beside the poison one")
	attempts := flag.Int("attempts", 3, "attempts before a message goes to the dead-letter queue")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up after this long (0: wait for ever)")
	flag.Parse()
	if err := run(*brokerURL, *orders, *attempts, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "poison:", err)
		os.Exit(1)
	}
}

func run(brokerURL string, orders, attempts int, timeout time.Duration) error {
	ctx, cancel := drain.Context(timeout)
	defer cancel()
	c, err := client.New(brokerURL)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := Setup(ctx, c, attempts); err != nil {
		return fmt.Errorf("create the queues on %s (is the broker running? go run ./cmd/sluice serve): %w", brokerURL, err)
	}
	fmt.Printf("sending %d orders and a poison one to %s\n", orders, Queue)
	if err := SendOrders(ctx, c, orders); err != nil {
		return err
	}
	shipper := NewShipper()
	cfg := worker.DefaultConfig()
	cfg.Source = worker.NewSource(c, Queue)
	cfg.Handler = shipper.Handler()
	cfg.Concurrency = 4
	cfg.WaitTime = time.Second
	// The panics' stacks are logged at error level; this keeps them short.
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	pool, err := worker.NewPool(cfg)
	if err != nil {
		return err
	}
	if err := drain.Work(ctx, c, Queue, pool, os.Stderr); err != nil { // progress on stderr
		return err
	}
	ps := pool.Stats()
	fmt.Printf("shipped %d orders; handler calls: %d succeeded, %d failed\n", len(shipper.Shipped()), ps.Handled, ps.Failed)
	page, err := c.DeadLetters(context.Background(), Queue)
	if err != nil {
		return err
	}
	for _, m := range page.Messages {
		fmt.Printf("dead letter %s: %s after %d receives, reason %q\n", m.ID, m.Body, m.ReceiveCount, m.FailureReason)
	}
	return nil
}
