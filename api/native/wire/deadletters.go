package wire

import "time"

// ReplayRequest is the body of POST /v1/queues/{queue}/dead-letters/replay:
// a replay of the queue's dead letters back into it. Every field may be
// absent (and is left out when zero); the body may be empty.
type ReplayRequest struct {
	// IDs are the dead letters to replay (up to 100); none replays all of
	// the queue's (refused while its dead-letter queue serves other queues
	// too).
	IDs []string `json:"ids,omitempty"`
	// Body and Attributes, when given, replace each replayed message's
	// body and user attributes: an edit-and-replay, which needs IDs.
	Body       *string              `json:"body,omitempty"`
	Attributes map[string]Attribute `json:"attributes,omitempty"`
	// MaxPerSecond caps the replay's rate: 1..500 messages a second (0,
	// absent: 500).
	MaxPerSecond int `json:"maxPerSecond,omitempty"`
}

// Task is a replay (a message move task): the answer of a replay (202
// Accepted), and an entry of Replays.
type Task struct {
	// ID is the task's id.
	ID string `json:"id"`
	// Source is the dead-letter queue; Destination the queue replayed into
	// ("" when each message goes back to its own source).
	Source      string `json:"source"`
	Destination string `json:"destination"`
	// Status is "RUNNING", "COMPLETED", "CANCELLING", "CANCELLED" or
	// "FAILED".
	Status string `json:"status"`
	// Moved counts the messages moved so far; ToMove the messages to move
	// (those the dead-letter queue held when it started, or the chosen ids
	// it found).
	Moved  int64 `json:"moved"`
	ToMove int64 `json:"toMove"`
	// Skipped counts the dead letters an edit-and-replay left in the
	// dead-letter queue: their edited form does not fit the destination.
	// They are not counted in Moved.
	Skipped int64 `json:"skipped"`
	// MaxPerSecond is its rate, in messages a second.
	MaxPerSecond int `json:"maxPerSecond"`
	// FailureReason is a FAILED task's reason; absent otherwise.
	FailureReason string `json:"failureReason,omitempty"`
	// StartedAt is when it started.
	StartedAt time.Time `json:"startedAt"`
}

// Replays is the answer of GET /v1/queues/{queue}/dead-letters/replays:
// the replays into the queue (and SQS move tasks back to it), newest
// first.
type Replays struct {
	// Replays are the tasks ([] when none), up to the limit= asked for
	// (1..10, default 10).
	Replays []Task `json:"replays"`
}
