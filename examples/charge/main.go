package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/examples/internal/drain"
	"github.com/sluicemq/sluice/worker"
	"github.com/sluicemq/sluice/worker/idempotency"
)

func main() {
	brokerURL := flag.String("broker", "http://127.0.0.1:9324", "the broker's base URL")
	payment := flag.String("payment", "pay-1001", "the payment id (the idempotency key)")
	customer := flag.String("customer", "ada", "the customer to charge")
	cents := flag.Int64("cents", 10000, "the amount, in cents")
	timeout := flag.Duration("timeout", time.Minute, "give up after this long (0: wait for ever)")
	flag.Parse()
	if err := run(*brokerURL, Charge{PaymentID: *payment, Customer: *customer, Cents: *cents}, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "charge:", err)
		os.Exit(1)
	}
}

func run(brokerURL string, ch Charge, timeout time.Duration) error {
	ctx, stop := drain.Context(timeout)
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
	// Work until the queue is empty: the charge made and acked.
	if err := drain.Work(ctx, c, Queue, pool, os.Stderr); err != nil { // progress on stderr
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
