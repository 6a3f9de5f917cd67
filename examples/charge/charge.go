// Command charge is the "$100 charge sent twice" story, and its two
// defences. A producer enqueues "charge customer $100"; the broker stores it
// but the answer is lost (a timeout, a proxy's 502, a broker restart), so
// the producer sends it again. Then a worker charges the card and dies
// before its ack, so the queue delivers the message again. Without
// idempotency the customer pays $200.
//
//   - The producer's idempotency key: the charge is sent with its payment
//     id as its deduplication id (client.Message.DedupID, SQS's
//     MessageDeduplicationId), on a standard queue. A second send of it
//     within the queue's window (DeduplicationWindowSeconds, 5 minutes by
//     default) is answered with the first message's id and stores nothing.
//   - The consumer's: the worker records the payment id before it charges
//     (worker/idempotency, AtMostOnce: a card charge must never repeat), so
//     a redelivery is acked without charging again.
//
// Run it against a broker (go run ./cmd/sluice serve):
//
//	go run ./examples/charge -broker http://127.0.0.1:9324 -payment pay-1001 -customer ada -cents 10000
//
// It sends the charge twice, as a producer that lost the first answer does,
// then works the queue until the charge is made.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/worker"
	"github.com/sluicemq/sluice/worker/idempotency"
)

// Queue is the queue of charges to make: a standard queue, named after the
// example so that a run never meets the walkthroughs' queues.
const Queue = "charge-requests"

// Charge is one card charge to make.
type Charge struct {
	// PaymentID names the payment: the idempotency key on both sides.
	PaymentID string `json:"paymentId"`
	Customer  string `json:"customer"`
	Cents     int64  `json:"cents"`
}

// key is the charge's idempotency key, the same on every copy of it.
func (c Charge) key() string { return "charge/" + c.PaymentID }

// Enqueue sends ch to Queue with its payment id as the deduplication id and
// as the IdempotencyKey attribute: a repeat of this call, by the client's
// own retry or by the caller's, is answered with the first message's id
// and stores nothing. It returns the message id.
func Enqueue(ctx context.Context, c *client.Client, ch Charge) (string, error) {
	body, err := json.Marshal(ch)
	if err != nil {
		return "", err
	}
	res, err := c.Send(ctx, Queue, client.Message{
		Body:       string(body),
		DedupID:    ch.key(),
		Attributes: map[string]client.Attribute{idempotency.AttrIdempotencyKey: client.String(ch.key())},
	})
	return res.ID, err
}

// Provider charges cards. The example's is a Ledger; a real one calls a
// payment service.
type Provider interface {
	Charge(ctx context.Context, customer string, cents int64) error
}

// Ledger is a Provider that records the charges. Safe for concurrent use.
type Ledger struct {
	mu      sync.Mutex
	charged map[string][]int64
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger { return &Ledger{charged: map[string][]int64{}} }

// Charge records a charge of cents to customer.
func (l *Ledger) Charge(ctx context.Context, customer string, cents int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.charged[customer] = append(l.charged[customer], cents)
	return nil
}

// Charges returns the charges made to customer, in order.
func (l *Ledger) Charges(customer string) []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int64(nil), l.charged[customer]...)
}

// Handler is the worker's handler: it charges each message's customer
// through p, at most once per payment (the key is recorded in store before
// the charge: a crash after it skips the charge rather than repeat it).
// Give it a store shared by every worker of the queue (pgstore on
// PostgreSQL; the memory store serves one process).
func Handler(p Provider, store idempotency.Store) worker.Handler {
	charge := worker.JSON(func(ctx context.Context, _ *worker.Message, ch Charge) error {
		if err := p.Charge(ctx, ch.Customer, ch.Cents); err != nil {
			return idempotency.Uncertain(err) // it may have gone through: never charge again
		}
		return nil
	})
	return worker.Chain(charge, idempotency.Middleware(store, idempotency.AtMostOnce))
}

// dollars formats cents as $d.cc.
func dollars(cents int64) string { return fmt.Sprintf("$%d.%02d", cents/100, cents%100) }
