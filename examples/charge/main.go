package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/worker"
	"github.com/sluicemq/sluice/worker/idempotency"
)

func main() {
	brokerURL := flag.String("broker", "http://127.0.0.1:9324", "the broker's base URL")
	payment := flag.String("payment", "pay-1001", "the payment id (the idempotency key)")
	customer := flag.String("customer", "ada", "the customer to charge")
	cents := flag.Int64("cents", 10000, "the amount, in cents")
	flag.Parse()
	if err := run(*brokerURL, Charge{PaymentID: *payment, Customer: *customer, Cents: *cents}); err != nil {
		fmt.Fprintln(os.Stderr, "charge:", err)
		os.Exit(1)
	}
}

func run(brokerURL string, ch Charge) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := client.New(brokerURL)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.CreateQueue(ctx, Queue, nil); err != nil {
		return fmt.Errorf("create queue %s on %s (is the broker running? go run ./cmd/sluice serve): %w", Queue, brokerURL, err)
	}
	// The producer sends the charge, loses the answer, and sends it again.
	first, err := Enqueue(ctx, c, ch)
	if err != nil {
		return err
	}
	again, err := Enqueue(ctx, c, ch)
	if err != nil {
		return err
	}
	fmt.Printf("sent %s twice: message %s, then %s\n", ch.PaymentID, first, again)

	ledger := NewLedger()
	cfg := worker.DefaultConfig()
	cfg.Source = worker.NewSource(c, Queue)
	cfg.Handler = Handler(ledger, idempotency.NewMemoryStore())
	pool, err := worker.NewPool(cfg)
	if err != nil {
		return err
	}
	ran := make(chan error, 1)
	go func() { ran <- pool.Run(context.Background()) }()
	// Work until the queue is empty: the charge made and acked.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case err := <-ran:
			return err
		case <-tick.C:
			st, err := c.Stats(ctx, Queue)
			done = err == nil && st.Depth == 0
		}
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pool.Shutdown(shutdown); err != nil && !errors.Is(err, worker.ErrPoolClosed) {
		return err
	}
	charges := ledger.Charges(ch.Customer)
	for _, cents := range charges {
		fmt.Printf("charged %s %s\n", ch.Customer, dollars(cents))
	}
	if len(charges) == 0 {
		fmt.Printf("nothing charged: %s was charged by an earlier run (the broker answered its message id)\n", ch.PaymentID)
	}
	return nil
}
