// Package workertest runs a worker.Handler synchronously in a user's own
// tests, without a broker: build a message with NewMessage, run the handler
// with Run, and check the worker.Outcome the pool would apply (ack, nack
// with its reason, snooze, dead-letter now). Run calls the handler as the
// pool does (worker.Invoke: the trace context in its context, a panic
// recovered) and decides the outcome with the pool's own rule
// (worker.OutcomeOf).
package workertest

import (
	"context"
	"testing"
	"time"

	"github.com/sluicemq/sluice/worker"
)

// Run handles m with h on the test's goroutine, with t.Context() as the
// handler's context, and returns the outcome the pool would apply. A panic
// in h is recovered and becomes a nack, as in the pool (Handle gives the
// *worker.PanicError itself).
func Run(t testing.TB, h worker.Handler, m *worker.Message) worker.Outcome {
	t.Helper()
	o, _ := Handle(t.Context(), h, m)
	return o
}

// Handle handles m with h on ctx and returns the outcome the pool would
// apply and the error h returned (a *worker.PanicError for a panic).
func Handle(ctx context.Context, h worker.Handler, m *worker.Message) (worker.Outcome, error) {
	err := worker.Invoke(ctx, h, m)
	return worker.OutcomeOf(err), err
}

// Option sets a field of a message NewMessage builds.
type Option func(*worker.Message)

// NewMessage returns a message as a pool hands it to a handler on its first
// delivery: body, an id, Queue "test", ReceiveCount and Attempts 1, SentAt
// now, and a receipt; opts change it.
func NewMessage(body string, opts ...Option) *worker.Message {
	m := &worker.Message{
		ID:           "00000000-0000-4000-8000-000000000001",
		Queue:        "test",
		Body:         []byte(body),
		Attributes:   map[string]worker.Attribute{},
		ReceiveCount: 1,
		Attempts:     1,
		SentAt:       time.Now(),
		Receipt:      "workertest-receipt",
	}
	for _, o := range opts {
		o(m)
	}
	return m
}

// Attr sets a message attribute (worker.Attribute; client.String builds a
// String one).
func Attr(name string, a worker.Attribute) Option {
	return func(m *worker.Message) { m.Attributes[name] = a }
}

// Type sets the String attribute name to typ: the attribute a worker.Mux
// routes on.
func Type(name, typ string) Option {
	return Attr(name, worker.Attribute{Type: "String", Value: typ})
}

// ID sets the message id.
func ID(id string) Option { return func(m *worker.Message) { m.ID = id } }

// Attempts sets the delivery's Attempts and ReceiveCount (a redelivery),
// and the message's MaxAttempts (0: none).
func Attempts(attempts, maxAttempts int) Option {
	return func(m *worker.Message) {
		m.Attempts, m.ReceiveCount, m.MaxAttempts = attempts, attempts, maxAttempts
	}
}

// TraceContext sets the W3C traceparent the message was sent with (the
// handler's context carries it: worker.TraceParent).
func TraceContext(traceparent string) Option {
	return func(m *worker.Message) { m.TraceContext = traceparent }
}

// CorrelationID sets the message's correlation id.
func CorrelationID(id string) Option { return func(m *worker.Message) { m.CorrelationID = id } }
