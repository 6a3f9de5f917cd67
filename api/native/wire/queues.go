package wire

import "time"

// Queue is a queue with its settings and stats: the answer of POST
// /v1/queues, GET and PATCH /v1/queues/{queue}, and of .../pause and
// .../resume.
type Queue struct {
	// Name is the queue's name; ARN its ARN.
	Name string `json:"name"`
	ARN  string `json:"arn"`
	// Fifo says it is a FIFO queue.
	Fifo bool `json:"fifo"`
	// DeadLetterQueue is its RedrivePolicy's target; absent when it has
	// none.
	DeadLetterQueue string `json:"deadLetterQueue,omitempty"`
	// CreatedAt and ModifiedAt are when it was created and last changed.
	CreatedAt  time.Time `json:"createdAt"`
	ModifiedAt time.Time `json:"modifiedAt"`
	// Attributes are every settable attribute as SQS strings
	// ("VisibilityTimeout": "30"), the Sluice ones (RetryPolicy, MaxDepth,
	// LowPriorityMaxDepth, Paused, DeliveryMode, DeadLetterWebhook,
	// DeduplicationWindowSeconds, DeduplicationUntil, HealthDepth, HealthAge,
	// MaxInFlight, MaxReceivesPerSecond, MessageTimeToLive,
	// ExpiredMessageAction, ArchiveExpired) with their defaults when unset.
	Attributes map[string]string `json:"attributes"`
	// Tags are its tags ({} when none).
	Tags map[string]string `json:"tags"`
	// Stats is its live view.
	Stats Stats `json:"stats"`
}

// QueueSummary is a queue in a QueueList.
type QueueSummary struct {
	Name string `json:"name"`
	Fifo bool   `json:"fifo"`
	// Paused says its deliveries are paused (its Paused attribute).
	Paused bool `json:"paused"`
	// Stats is its live view.
	Stats Stats `json:"stats"`
}

// QueueList is a page of queues in name order: the answer of GET
// /v1/queues.
type QueueList struct {
	// Queues are the page's queues ([] when none).
	Queues []QueueSummary `json:"queues"`
	// Next is the after= of the next page (the page's last name); absent
	// after the last page.
	Next string `json:"next,omitempty"`
}

// Stats is a queue's live view: the answer of GET
// /v1/queues/{queue}/stats, and a Queue's and QueueSummary's stats. Every
// field is present.
type Stats struct {
	// Visible counts the messages ready to be received; InFlight the
	// leased ones; Delayed the ones delayed, backing off or snoozed.
	Visible  int64 `json:"visible"`
	InFlight int64 `json:"inFlight"`
	Delayed  int64 `json:"delayed"`
	// Depth is what MaxDepth limits: visible + inFlight + delayed.
	Depth int64 `json:"depth"`
	// OldestAgeSeconds is the age of the oldest message in whole seconds
	// (0 when the queue is empty).
	OldestAgeSeconds int64 `json:"oldestAgeSeconds"`
	// OldestVisibleAgeSeconds is how long the longest-visible message has
	// waited for a consumer since it became visible, in whole seconds (0
	// when none is visible: delayed, backing-off and in-flight messages do
	// not count). It is what a queue's health judges.
	OldestVisibleAgeSeconds int64 `json:"oldestVisibleAgeSeconds"`
	// DeadLetters counts the messages of the queue's dead-letter queue;
	// null (nil) when it has none.
	DeadLetters *int64 `json:"deadLetters"`
	// Refused counts the sends this broker refused since it started, by
	// reason ("max_depth", "low_priority_max_depth").
	Refused map[string]int64 `json:"refused"`
}

// CreateQueueRequest is the body of POST /v1/queues.
type CreateQueueRequest struct {
	// Name is the queue's name (1..80 of [A-Za-z0-9_-], ending in .fifo
	// for a FIFO queue), required.
	Name string `json:"name"`
	// Attributes are its attributes as SQS strings (the Sluice ones
	// included); absent when none are given (the defaults).
	Attributes map[string]string `json:"attributes,omitempty"`
	// Tags are its tags; absent when none.
	Tags map[string]string `json:"tags,omitempty"`
}

// UpdateQueueRequest is the body of PATCH /v1/queues/{queue}.
type UpdateQueueRequest struct {
	// Attributes are the attributes to change (only these), as SQS
	// strings; required.
	Attributes map[string]string `json:"attributes"`
}
