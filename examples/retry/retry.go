// Command retry shows a retry schedule: the lab's retry queues (a failed
// payment waits 10 s, then 60 s, then 300 s before it goes to the
// dead-letter queue) as one queue with RetryPolicy {"delays":[10,60,300]}
// and a RedrivePolicy. The handler only returns an error; the broker holds
// each failed payment back for the schedule's next delay, and moves it to
// the dead-letter queue after its last attempt.
//
// Run it against a broker (go run ./cmd/sluice serve); it takes a little
// over six minutes (10 s + 60 s + 300 s):
//
//	go run ./examples/retry -broker http://127.0.0.1:9324
//
// It sends two payments to a gateway that is down: p-1's recovers on its
// third attempt, p-2's never does. It prints each attempt, when it came
// (seconds after the send) and how it ended, then the dead letter.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/worker"
)

// The queues: payments, and its dead-letter queue, named after the example
// so that a run never meets queues of the walkthroughs or of another
// example.
const (
	Queue      = "retry-payments"
	DeadLetter = "retry-payments-dlq"
)

// RetryPolicy is the payments queue's schedule: 10 s after the first failed
// attempt, 60 s after the second, 300 s after the third (jitter none, the
// default of a schedule). MaxAttempts (the RedrivePolicy's
// maxReceiveCount) is 4: the fourth failure moves the payment to the
// dead-letter queue, after the three waits.
const (
	RetryPolicy = `{"delays":[10,60,300]}`
	MaxAttempts = 4
)

// Setup creates the dead-letter queue and the payments queue.
func Setup(ctx context.Context, c *client.Client) error {
	dlq, err := c.CreateQueue(ctx, DeadLetter, nil)
	if err != nil {
		return err
	}
	_, err = c.CreateQueue(ctx, Queue, map[string]string{
		"RetryPolicy":   RetryPolicy,
		"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":%d}`, dlq.ARN, MaxAttempts),
	})
	if err != nil {
		return err
	}
	// A run cut short leaves payments behind, which the next run would wait
	// for: the example's own queues start empty.
	for _, q := range []string{Queue, DeadLetter} {
		if err := c.PurgeQueue(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// Payment is a message: a charge to make.
type Payment struct {
	ID    string `json:"id"`
	Cents int64  `json:"cents"`
}

// SendPayments sends the example's two payments.
func SendPayments(ctx context.Context, c *client.Client) error {
	for _, id := range []string{"p-1", "p-2"} {
		if _, err := c.Send(ctx, Queue, client.Message{Body: `{"id":"` + id + `","cents":10000}`}); err != nil {
			return err
		}
	}
	return nil
}

// ErrUnavailable is the gateway's answer while it is down for a payment.
var ErrUnavailable = errors.New("gateway unavailable")

// Gateway stands in for a payment provider that is down: each payment's
// first Failures[id] charges fail (-1: every charge fails).
type Gateway struct {
	mu       sync.Mutex
	failures map[string]int
}

// NewGateway returns a Gateway whose charges of payment id fail
// failures[id] times before one succeeds (-1: never).
func NewGateway(failures map[string]int) *Gateway {
	f := make(map[string]int, len(failures))
	for k, v := range failures {
		f[k] = v
	}
	return &Gateway{failures: f}
}

// Charge makes one charge of p.
func (g *Gateway) Charge(p Payment) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch n := g.failures[p.ID]; {
	case n < 0:
		return ErrUnavailable
	case n > 0:
		g.failures[p.ID] = n - 1
		return ErrUnavailable
	}
	return nil
}

// Attempt is one handler call: which payment, its attempt number, when
// (after Log's start) and its error (nil: paid).
type Attempt struct {
	Payment string
	N       int
	At      time.Duration
	Err     error
}

// Log records the attempts; its clock is the wall clock in the program and
// the broker's fake clock in the test.
type Log struct {
	now   func() time.Time
	start time.Time
	mu    sync.Mutex
	all   []Attempt
}

// NewLog returns a Log whose times count from now().
func NewLog(now func() time.Time) *Log { return &Log{now: now, start: now()} }

// Attempts answers the attempts recorded so far, in the order of (time,
// payment, attempt).
func (l *Log) Attempts() []Attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]Attempt(nil), l.all...)
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.At != b.At {
			return a.At < b.At
		}
		if a.Payment != b.Payment {
			return a.Payment < b.Payment
		}
		return a.N < b.N
	})
	return out
}

// Handler charges each payment through g and records the attempt in l. An
// error nacks the message (with the error as its reason), and the queue's
// RetryPolicy decides when it comes back.
func Handler(g *Gateway, l *Log) worker.Handler {
	return worker.JSON(func(ctx context.Context, m *worker.Message, p Payment) error {
		err := g.Charge(p)
		l.mu.Lock()
		l.all = append(l.all, Attempt{Payment: p.ID, N: m.Attempts, At: l.now().Sub(l.start), Err: err})
		l.mu.Unlock()
		return err
	})
}

// Report writes the attempts, one a line, the time rounded to seconds.
func Report(w io.Writer, attempts []Attempt) {
	for _, a := range attempts {
		outcome := "paid"
		if a.Err != nil {
			outcome = a.Err.Error()
		}
		fmt.Fprintf(w, "%4ds  %s attempt %d: %s\n", int64(a.At.Round(time.Second)/time.Second), a.Payment, a.N, outcome)
	}
}

// ReportDeadLetters writes each dead letter: its payment, attempts and the
// reason of its last failure.
func ReportDeadLetters(w io.Writer, dead []client.Delivery) {
	for _, m := range dead {
		var p Payment
		_ = json.Unmarshal([]byte(m.Body), &p)
		fmt.Fprintf(w, "dead letter %s after %d attempts, reason %q\n", p.ID, m.Attempts, m.FailureReason)
	}
}
