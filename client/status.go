package client

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/sluicemq/sluice/api/native/wire"
)

// The states of a message's status by id (MessageStatus.State).
const (
	StateDelayed      = "delayed"      // sent with a delay, not visible yet
	StateReady        = "ready"        // visible, waiting for a consumer
	StateInFlight     = "inFlight"     // leased until LeaseEndsAt
	StateBackingOff   = "backingOff"   // failed, waiting until VisibleAt for its next attempt
	StateDeadLettered = "deadLettered" // in DeadLetterQueue
	StateCompleted    = "completed"    // deleted by a consumer (the queue keeps completed records)
	StateExpired      = "expired"      // dropped by its time to live
	StateReplayed     = "replayed"     // replayed from a dead-letter queue as ReplayedAs
)

// MessageStatus is a message's status by id. The fields that do not apply
// to its State are zero.
type MessageStatus struct {
	ID    string
	Queue string
	// State is one of the State constants.
	State string
	// Attempts counts its attempts (a receive adds one, a snooze takes it
	// back); ReceiveCount its deliveries (live messages only).
	Attempts, ReceiveCount int
	// VisibleAt: when a delayed or backing-off message becomes visible, or
	// when a ready one became visible.
	VisibleAt time.Time
	// LeaseEndsAt: when an in-flight message's lease ends.
	LeaseEndsAt time.Time
	// DeadLetterQueue holds a dead-lettered message, which came from
	// DeadLetterSource.
	DeadLetterQueue, DeadLetterSource string
	// Reason is its last failure reason.
	Reason string
	// Failures is a live message's failure history, oldest first (its
	// last 10 failures); FailureCount counts all its failures.
	Failures     []Failure
	FailureCount int
	// CompletedAt and Result: when a completed message was deleted, and its
	// ack's result (nil: none, as after an SQS delete).
	CompletedAt time.Time
	Result      *string
	// ExpiredAt: when an expired message was dropped.
	ExpiredAt time.Time
	// ReplayedAs is a replayed message's new id.
	ReplayedAs string
}

// Failure is one failure of a message: its reason and when it happened
// (for an expired lease, when the lease ended).
type Failure struct {
	Reason string
	At     time.Time
}

// Done reports whether the message will not run again: completed, expired
// or dead-lettered (a dead letter runs again only if it is replayed).
func (s MessageStatus) Done() bool {
	switch s.State {
	case StateCompleted, StateExpired, StateDeadLettered, StateReplayed:
		return true
	}
	return false
}

// MessageStatus answers the status of message id on queue, without
// receiving it. A dead letter asked on the queue it came from is answered
// from its dead-letter queue. ErrMessageNotFound when the queue knows no
// such message: it never held it, or it was deleted and the queue keeps no
// record of it (its CompletedRetentionSeconds, 0 by default, or passed).
func (c *Client) MessageStatus(ctx context.Context, queue, id string) (MessageStatus, error) {
	var out wire.MessageStatus
	r := request{method: http.MethodGet, path: queuePath(queue, "messages", url.PathEscape(id)), idempotent: true}
	if err := c.do(ctx, r, &out); err != nil {
		return MessageStatus{}, err
	}
	at := func(t *time.Time) time.Time {
		if t == nil {
			return time.Time{}
		}
		return *t
	}
	var failures []Failure
	for _, f := range out.Failures {
		failures = append(failures, Failure{Reason: f.Reason, At: f.At})
	}
	return MessageStatus{ID: out.ID, Queue: out.Queue, State: out.State, Attempts: out.Attempts, ReceiveCount: out.ReceiveCount,
		VisibleAt: at(out.VisibleAt), LeaseEndsAt: at(out.LeaseEndsAt), DeadLetterQueue: out.DeadLetterQueue,
		DeadLetterSource: out.DeadLetterSource, Reason: out.Reason, Failures: failures, FailureCount: out.FailureCount,
		CompletedAt: at(out.CompletedAt), Result: out.Result, ExpiredAt: at(out.ExpiredAt), ReplayedAs: out.ReplayedAs}, nil
}

// AckWithResult acknowledges a message with its job's result (at most
// 65,536 bytes; a longer one is ErrInvalidParameter and the message stays
// leased): on a queue with CompletedRetentionSeconds, its status by id
// shows the result for that long.
func (c *Client) AckWithResult(ctx context.Context, queue, receipt, result string) error {
	return c.single(ctx, queue, "ack", true, wire.ControlFields{Receipt: receipt, Result: &result})
}
