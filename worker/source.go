package worker

import (
	"context"
	"errors"
	"time"

	"github.com/sluicemq/sluice/client"
)

// Attribute is a message attribute (client.Attribute).
type Attribute = client.Attribute

// Message is one leased message as a handler sees it. A handler may read it
// but must not keep it past its return.
type Message struct {
	// ID is the broker's message id: the same on every delivery.
	ID string
	// Queue names the queue it came from (as the source names it).
	Queue      string
	Body       []byte
	Attributes map[string]Attribute
	// ReceiveCount counts its deliveries, this one included (SQS's
	// ApproximateReceiveCount). Attempts is Sluice's attempts count (a
	// snooze does not count); on plain SQS it equals ReceiveCount.
	ReceiveCount int
	Attempts     int
	// MaxAttempts is its attempt limit; 0 when unknown or none.
	MaxAttempts   int
	Priority      int
	CorrelationID string
	// TraceContext is the W3C traceparent it was sent with; the handler's
	// context carries it too (TraceParent).
	TraceContext string
	GroupID      string
	SentAt       time.Time
	// FailureReason is the reason of its latest failure (a nack's), when the
	// source knows it.
	FailureReason string
	// Receipt is the source's handle on this delivery's lease.
	Receipt string
}

// ReceiveRequest asks a Source for messages.
type ReceiveRequest struct {
	// Max is 1..10.
	Max int
	// Wait is the long-poll time: 0..20 s.
	Wait time.Duration
	// Lease is the visibility timeout each message is leased for.
	Lease time.Duration
}

// Kind is what an Outcome does with a message.
type Kind int

// The outcomes of a handled (or unstarted) message.
const (
	// KindAck deletes the message: the work is done.
	KindAck Kind = iota + 1
	// KindNack is a failed attempt, with a Reason. Delay 0 follows the queue's
	// retry policy (on plain SQS, the source's client-side backoff); a
	// positive Delay retries after exactly that long.
	KindNack
	// KindSnooze makes the message visible again after Delay; the attempt does
	// not count where the broker supports it (Sluice), on plain SQS it does.
	KindSnooze
	// KindRelease hands the message back at once, without counting the attempt
	// where the broker supports it: for messages prefetched but never
	// started.
	KindRelease
	// KindDeadLetter moves the message to its queue's dead-letter queue at once,
	// with a Reason.
	KindDeadLetter
)

// Outcome is what becomes of a message.
type Outcome struct {
	Kind   Kind
	Reason string
	Delay  time.Duration
}

// Source is where a pool gets its messages: a queue, through some API. It
// is small so that other brokers can be adapted; NewSource is a Sluice
// broker (a StreamSource by default), package sqssource any SQS endpoint.
// Its methods are called from several goroutines at once.
type Source interface {
	// Receive leases up to req.Max messages, waiting up to req.Wait for a
	// first one. An empty answer is not an error.
	Receive(ctx context.Context, req ReceiveRequest) ([]*Message, error)
	// Settle applies an outcome to a leased message. A lease that has ended
	// (the message was delivered again since) is ErrLeaseLost.
	Settle(ctx context.Context, m *Message, o Outcome) error
	// Extend sets the leases of msgs to end lease from now (a heartbeat),
	// answering one error (or nil) per message, ErrLeaseLost for a lease
	// that has ended; err is for the call as a whole.
	Extend(ctx context.Context, msgs []*Message, lease time.Duration) (errs []error, err error)
}

// Backlogger is a Source that can tell its queue's backlog (the messages
// visible now), for adaptive concurrency.
type Backlogger interface {
	Backlog(ctx context.Context) (int64, error)
}

// ErrLeaseLost is the cause of a handler's context cancellation when its
// message's lease ended before the handler did (the heartbeat could not
// extend it: the message may be delivered to another worker), and the error
// a Source answers for a control on an ended lease.
var ErrLeaseLost = errors.New("worker: the message's lease was lost; it may be delivered again")
