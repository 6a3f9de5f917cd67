package wire

import "time"

// MessageStatus is a message's status by id: the answer of GET
// /v1/queues/{queue}/messages/{id}. Fields that do not apply to its State
// are left out.
type MessageStatus struct {
	ID string `json:"id"`
	// Queue is the queue asked.
	Queue string `json:"queue"`
	// State is delayed, ready, inFlight, backingOff, deadLettered,
	// completed, expired or replayed.
	State string `json:"state"`
	// Attempts is the message's attempts so far (receives, less snoozes).
	Attempts int `json:"attempts"`
	// ReceiveCount is how many times it was received (live messages).
	ReceiveCount int `json:"receiveCount,omitempty"`
	// VisibleAt is when a delayed or backing-off message becomes visible,
	// or when a ready one became visible.
	VisibleAt *time.Time `json:"visibleAt,omitempty"`
	// LeaseEndsAt is when an in-flight message's lease ends.
	LeaseEndsAt *time.Time `json:"leaseEndsAt,omitempty"`
	// DeadLetterQueue holds a dead-lettered message; DeadLetterSource is
	// the queue it came from.
	DeadLetterQueue  string `json:"deadLetterQueue,omitempty"`
	DeadLetterSource string `json:"deadLetterSource,omitempty"`
	// Reason is the message's last failure reason, when it failed.
	Reason string `json:"reason,omitempty"`
	// Failures is a live message's failure history, oldest first: its
	// last 10 failures, each with its reason and the broker's instant of
	// it; FailureCount counts all its failures (more than the list holds
	// once the oldest were dropped).
	Failures     []Failure `json:"failures,omitempty"`
	FailureCount int       `json:"failureCount,omitempty"`
	// CompletedAt is when a completed message was deleted; Result its
	// ack's result (absent when the ack gave none, as an SQS delete).
	CompletedAt *time.Time `json:"completedAt,omitempty"`
	Result      *string    `json:"result,omitempty"`
	// ExpiredAt is when an expired message was dropped.
	ExpiredAt *time.Time `json:"expiredAt,omitempty"`
	// ReplayedAs is a replayed dead letter's new id (in the queue it was
	// replayed to).
	ReplayedAs string `json:"replayedAs,omitempty"`
}

// Failure is one failure of a message (MessageStatus.Failures).
type Failure struct {
	// Reason is the failure's reason: a nack's, "lease expired", …
	Reason string `json:"reason"`
	// At is when it failed (for an expired lease, when the lease ended).
	At time.Time `json:"at"`
}
