package model

import "time"

// JobState is a message's state as its status by id tells it
// (broker.Broker.MessageStatus; the native API's
// GET /v1/queues/{queue}/messages/{id}).
type JobState string

// The job states. A live message is delayed, ready, in flight, backing off
// or dead-lettered; a message that left its queue is completed, expired or
// replayed while its queue keeps a record of it (MessageRecord).
const (
	// JobDelayed: sent with a delay (or snoozed before any receive), not
	// yet visible.
	JobDelayed JobState = "delayed"
	// JobReady: visible, waiting for a consumer.
	JobReady JobState = "ready"
	// JobInFlight: leased to a consumer until its lease ends.
	JobInFlight JobState = "inFlight"
	// JobBackingOff: received at least once and waiting before its next
	// attempt (a nack's delay, a retry policy's backoff, a snooze).
	JobBackingOff JobState = "backingOff"
	// JobDeadLettered: in a dead-letter queue, asked there or on the queue
	// it came from.
	JobDeadLettered JobState = "deadLettered"
	// JobCompleted: deleted by a consumer (an ack, an SQS delete) while its
	// queue keeps completed records (CompletedRetentionSeconds).
	JobCompleted JobState = "completed"
	// JobExpired: its time to live passed and it was dropped, while its
	// queue keeps completed records.
	JobExpired JobState = "expired"
	// JobReplayed: a dead letter replayed by a move task, which gave it a
	// new id (MessageStatus.ReplayedAs).
	JobReplayed JobState = "replayed"
)

// AttrCompletedRetentionSeconds is the Sluice queue attribute
// (QueueConfig.CompletedRetention): how long, in seconds, the queue keeps a
// record of a message that left it by a consumer's delete (completed), its
// time to live (expired, when dropped) or a replay (replayed). 0, the
// default, keeps none.
const AttrCompletedRetentionSeconds = "CompletedRetentionSeconds"

// MaxResultBytes bounds the result an ack may carry (kept with its
// completed record).
const MaxResultBytes = 64 * 1024

// MaxCompletedRetention is the longest CompletedRetentionSeconds: 14 days,
// the longest message retention.
const MaxCompletedRetention = 14 * 24 * time.Hour

// MessageRecord is what a queue keeps of a message that left it, for its
// CompletedRetention from At: a completed one (with the ack's result, if
// any), an expired one, a replayed one (with its new id).
type MessageRecord struct {
	ID    string
	State JobState // JobCompleted, JobExpired or JobReplayed
	At    time.Time
	// Attempts is the message's attempts count when it left.
	Attempts int
	// Result is an ack's result (nil: none given, as by an SQS delete).
	Result *string
	// ReplayedAs is a replayed message's new id.
	ReplayedAs string
	// Reason is the message's last failure reason, when it had one.
	Reason string
	// Source is the queue a dead letter came from (its DeadLetterSource),
	// when the record's queue is a dead-letter queue.
	Source string
}

// MessageLookup is what a backend finds of a message id in a queue
// (Backend.LookupMessage): the live message, or the record the queue keeps
// of it, or neither (both nil). Unlike Browse's, a visible Live message has
// its VisibleAt: when it became visible.
type MessageLookup struct {
	Live   *BrowsedMessage
	Record *MessageRecord
	// Failures is a Live message's failure history (its last MaxFailures
	// failures, oldest first); FailureCount counts all its failures.
	Failures     []Failure
	FailureCount int
}

// MaxFailures is how many failures a message's history keeps: the last
// ones, the oldest dropped first, so that a message failing for ever costs
// a bounded size.
const MaxFailures = 10

// Failure is one failure of a message: its reason (a nack's, "lease
// expired", …) and the broker clock's instant of it.
type Failure struct {
	Reason string
	At     time.Time
}

// AddFailure returns history h of at most MaxFailures entries with f
// appended, dropping the oldest when full. The result is a new slice: h and
// its backing array are never written, so copies of a history may share it
// (an append into spare capacity would write an element another copy of the
// same length appends to as well).
func AddFailure[F any](h []F, f F) []F {
	if len(h) >= MaxFailures {
		h = h[len(h)-MaxFailures+1:]
	}
	out := make([]F, len(h), len(h)+1)
	copy(out, h)
	return append(out, f)
}

// MessageStatus is a message's status by id. Zero fields do not apply to
// its State.
type MessageStatus struct {
	ID, Queue string
	State     JobState
	// Attempts is the message's attempts count (receives, less snoozes).
	Attempts int
	// ReceiveCount is how many times it was received.
	ReceiveCount int
	// VisibleAt is when a delayed or backing-off message becomes visible,
	// or when a ready one became visible.
	VisibleAt time.Time
	// LeaseEndsAt is when an in-flight message's lease ends.
	LeaseEndsAt time.Time
	// DeadLetterQueue is the dead-letter queue holding a dead-lettered
	// message; DeadLetterSource the queue it came from.
	DeadLetterQueue, DeadLetterSource string
	// Reason is the message's last failure reason, when it failed.
	Reason string
	// Failures is a live message's failure history, oldest first: its
	// last MaxFailures failures of FailureCount in all.
	Failures     []Failure
	FailureCount int
	// CompletedAt and Result: a completed message's deletion time and its
	// ack's result (nil: none).
	CompletedAt time.Time
	Result      *string
	// ExpiredAt is when an expired message was dropped.
	ExpiredAt time.Time
	// ReplayedAs is a replayed message's new id.
	ReplayedAs string
}
