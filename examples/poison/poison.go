// Command poison shows what becomes of a poison message: one that makes its
// handler panic every time. The pool recovers each panic (logged with its
// stack) and nacks the message with the panic as the reason; after the
// queue's maxReceiveCount attempts the broker moves it to the dead-letter
// queue, reason and counts kept, while every other message flows and the
// workers stay up.
//
// Run it against a broker (go run ./cmd/sluice serve):
//
//	go run ./examples/poison -broker http://127.0.0.1:9324 -orders 100
//
// It sends the orders and one poison order, handles them all, and prints
// the dead letters with their reasons.
package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/worker"
)

// The queues: orders, and its dead-letter queue, named after the example so
// that a run never meets queues of the walkthroughs or of another example.
const (
	Queue      = "poison-orders"
	DeadLetter = "poison-orders-dlq"
)

// Order is a message: an order to ship. Lines is never empty in a good
// order; the poison order has none, and the handler's bug (it reads the
// first line without looking) makes it panic.
type Order struct {
	ID    int    `json:"id"`
	Lines []Line `json:"lines"`
}

// Line is one line of an Order.
type Line struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

// Setup creates the dead-letter queue and the orders queue, whose messages
// go to it after maxAttempts failed attempts, and empties both: a run cut
// short leaves messages behind, which the next run would wait for. Without
// a RetryPolicy a failed message is visible again at once.
func Setup(ctx context.Context, c *client.Client, maxAttempts int) error {
	dlq, err := c.CreateQueue(ctx, DeadLetter, nil)
	if err != nil {
		return err
	}
	_, err = c.CreateQueue(ctx, Queue, map[string]string{
		"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":%d}`, dlq.ARN, maxAttempts),
	})
	if err != nil {
		return err
	}
	for _, q := range []string{Queue, DeadLetter} {
		if err := c.PurgeQueue(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// Shipper is the handler's state: the orders shipped, by id.
type Shipper struct {
	mu      sync.Mutex
	shipped map[int]int
}

// NewShipper returns a Shipper that has shipped nothing.
func NewShipper() *Shipper { return &Shipper{shipped: map[int]int{}} }

// Handler ships an order. It has the bug that makes an order without lines
// a poison message: it indexes the first line unchecked.
func (s *Shipper) Handler() worker.Handler {
	return worker.JSON(func(ctx context.Context, _ *worker.Message, o Order) error {
		first := o.Lines[0] // the bug: panics on an order without lines
		_ = first.SKU
		s.mu.Lock()
		defer s.mu.Unlock()
		s.shipped[o.ID]++
		return nil
	})
}

// Shipped answers how many times each order was shipped.
func (s *Shipper) Shipped() map[int]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int]int, len(s.shipped))
	for k, v := range s.shipped {
		out[k] = v
	}
	return out
}

// SendOrders sends orders 1..n, each with one line, and the poison order
// (id 0, no lines) in the middle.
func SendOrders(ctx context.Context, c *client.Client, n int) error {
	for i := 1; i <= n; i++ {
		if i == n/2+1 {
			if _, err := c.Send(ctx, Queue, client.Message{Body: `{"id":0,"lines":[]}`}); err != nil {
				return err
			}
		}
		body := `{"id":` + strconv.Itoa(i) + `,"lines":[{"sku":"tea","qty":1}]}`
		if _, err := c.Send(ctx, Queue, client.Message{Body: body}); err != nil {
			return err
		}
	}
	return nil
}
