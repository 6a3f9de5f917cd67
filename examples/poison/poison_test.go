package main

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/testbroker"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/worker"
)

// One order panics its handler every time. It ends in the dead-letter queue
// after its 3 attempts, with the panic as its reason; the 60 good orders are
// each shipped once; and the same pool, still up, ships orders sent after.
func TestPoisonGoesToTheDeadLetterQueue(t *testing.T) {
	t.Parallel()
	const good, attempts = 60, 3
	ctx := context.Background()
	c, err := client.New(testbroker.Start(t, testbroker.Config{}).URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := Setup(ctx, c, attempts); err != nil {
		t.Fatal(err)
	}
	if err := SendOrders(ctx, c, good); err != nil {
		t.Fatal(err)
	}

	shipper := NewShipper()
	cfg := worker.DefaultConfig()
	cfg.Source = worker.NewSource(c, Queue)
	cfg.Handler = shipper.Handler()
	cfg.Concurrency = 4
	cfg.WaitTime = time.Second
	cfg.Logger = testutil.Logger(t)
	pool, err := worker.NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- pool.Run(ctx) }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = pool.Shutdown(ctx)
			<-ran
		}
	})

	deadLetters := func() []client.Delivery {
		page, err := c.DeadLetters(ctx, Queue)
		if err != nil {
			t.Fatal(err)
		}
		return page.Messages
	}
	testutil.Eventually(t, 30*time.Second, "the good orders shipped and the poison dead-lettered", func() bool {
		st, err := c.Stats(ctx, Queue)
		if err != nil {
			t.Fatal(err)
		}
		return st.Depth == 0 && len(shipper.Shipped()) == good && len(deadLetters()) == 1
	})

	dl := deadLetters()[0]
	if dl.Body != `{"id":0,"lines":[]}` {
		t.Fatalf("dead letter %q, want the poison order", dl.Body)
	}
	if !strings.HasPrefix(dl.FailureReason, "panic: runtime error: index out of range [0] with length 0") {
		t.Fatalf("dead letter's reason %q, want the panic", dl.FailureReason)
	}
	if dl.ReceiveCount != attempts || dl.Attempts != attempts {
		t.Fatalf("dead letter received %d times, %d attempts; want %d and %d", dl.ReceiveCount, dl.Attempts, attempts, attempts)
	}
	if dl.DeadLetterSource != Queue {
		t.Errorf("dead letter's source %q, want %q", dl.DeadLetterSource, Queue)
	}
	for id, n := range shipper.Shipped() {
		if n != 1 || id < 1 || id > good {
			t.Fatalf("order %d shipped %d times, want orders 1..%d once each", id, n, good)
		}
	}
	if st := pool.Stats(); st.Handled != good || st.Failed != attempts {
		t.Fatalf("pool counted %d handled and %d failed, want %d and %d", st.Handled, st.Failed, good, attempts)
	}

	// The workers are still up: more orders flow through the same pool.
	for i := good + 1; i <= good+10; i++ {
		body := `{"id":` + strconv.Itoa(i) + `,"lines":[{"sku":"tea","qty":1}]}`
		if _, err := c.Send(ctx, Queue, client.Message{Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 30*time.Second, "10 more orders shipped by the same pool", func() bool {
		return len(shipper.Shipped()) == good+10
	})
	select {
	case err := <-ran:
		t.Fatalf("the pool stopped on its own: %v", err)
	default:
	}
	stopped = true
	if err := pool.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-ran; !errors.Is(err, worker.ErrPoolClosed) {
		t.Fatalf("Run: %v", err)
	}
}
