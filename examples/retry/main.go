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
	timeout := flag.Duration("timeout", 10*time.Minute, "give up after this long (0: wait for ever); the schedule takes about six minutes")
	flag.Parse()
	if err := run(*brokerURL, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "retry:", err)
		os.Exit(1)
	}
}

func run(brokerURL string, timeout time.Duration) error {
	ctx, cancel := drain.Context(timeout)
	defer cancel()
	c, err := client.New(brokerURL)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := Setup(ctx, c); err != nil {
		return fmt.Errorf("create the queues on %s (is the broker running? go run ./cmd/sluice serve): %w", brokerURL, err)
	}
	gateway := NewGateway(map[string]int{"p-1": 2, "p-2": -1})
	log := NewLog(time.Now)
	if err := SendPayments(ctx, c); err != nil {
		return err
	}
	cfg := worker.DefaultConfig()
	cfg.Source = worker.NewSource(c, Queue)
	cfg.Handler = Handler(gateway, log)
	// A failed attempt is logged at warn level; the report says it better.
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	pool, err := worker.NewPool(cfg)
	if err != nil {
		return err
	}
	fmt.Printf("payments sent; the schedule is %s, %d attempts (about six minutes)\n", RetryPolicy, MaxAttempts)
	if err := drain.Work(ctx, c, Queue, pool, os.Stderr); err != nil { // progress on stderr
		return err
	}
	Report(os.Stdout, log.Attempts())
	page, err := c.DeadLetters(context.Background(), Queue)
	if err != nil {
		return err
	}
	ReportDeadLetters(os.Stdout, page.Messages)
	return nil
}
