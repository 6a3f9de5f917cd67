package wire

import "time"

// Envelope is a message to send: the body of POST
// /v1/queues/{queue}/messages, and (within a BatchEntry) of a batch send.
// Every field but Body may be absent; the pointer fields tell an absent
// one from a zero one, and are left out when nil. The fields the SQS model
// has no place for (priority, maxAttempts, ttlSeconds, correlationId,
// traceContext) are stored as message attributes and read back as
// Message's fields.
type Envelope struct {
	// Body is the message body, required: 1 byte up to the queue's
	// MaximumMessageSize. A nil Body encodes as null (which the broker
	// refuses, as it does an absent body).
	Body *string `json:"body"`
	// Attributes are the user message attributes by name (at most 10, the
	// stored fields below included); absent when empty.
	Attributes map[string]Attribute `json:"attributes,omitempty"`
	// Priority (-100..100) is stored as the Sluice.Priority attribute:
	// higher is served first, below 0 is low priority. Standard queues only.
	Priority *int `json:"priority,omitempty"`
	// MaxAttempts (1..1000) is stored as Sluice.MaxAttempts: it overrides
	// the queue's maxReceiveCount (the queue needs a RedrivePolicy).
	MaxAttempts *int `json:"maxAttempts,omitempty"`
	// TTLSeconds (1..1209600) is stored as Sluice.TimeToLive: the message
	// expires that many seconds after the send, in place of the queue's
	// MessageTimeToLive. It must not be longer than the queue's
	// MessageRetentionPeriod, and must be longer than the message's delay.
	// An expired message is never received: it is dropped, or moved to the
	// dead-letter queue (the queue's ExpiredMessageAction).
	TTLSeconds *int `json:"ttlSeconds,omitempty"`
	// CorrelationID (up to 128 bytes) is stored as Sluice.CorrelationId,
	// and kept through a dead-letter queue and a replay.
	CorrelationID *string `json:"correlationId,omitempty"`
	// TraceContext is a W3C traceparent, stored as the traceparent
	// attribute.
	TraceContext *string `json:"traceContext,omitempty"`
	// DelaySeconds is how many seconds later the message becomes visible:
	// on a standard queue up to its retention period; a FIFO queue takes
	// none. DeliverAt names the time instead (RFC 3339; a past time is
	// now). Give at most one.
	DelaySeconds *int64     `json:"delaySeconds,omitempty"`
	DeliverAt    *time.Time `json:"deliverAt,omitempty"`
	// GroupID is a FIFO queue's message group (required there), or a
	// standard fair queue's tenant; absent when "".
	GroupID string `json:"groupId,omitempty"`
	// DedupID is the deduplication id: required on a FIFO queue (unless it
	// has ContentBasedDeduplication), optional on a standard one (an
	// idempotent send); a repeated id within the queue's window is answered
	// with the original message id and stores nothing. Absent when "".
	DedupID string `json:"dedupId,omitempty"`
}

// BatchEntry is one message of a batch send: its entry id and its
// Envelope's fields, side by side in one JSON object.
type BatchEntry struct {
	// ID is the entry's id (1..80 of [A-Za-z0-9_-], distinct in the
	// batch): give every entry one, or none (it is left out when ""); the
	// results then echo it.
	ID string `json:"id,omitempty"`
	Envelope
}

// SendBatchRequest is the body of POST /v1/queues/{queue}/messages/batch.
type SendBatchRequest struct {
	// Messages are the messages to send, 1..10.
	Messages []BatchEntry `json:"messages"`
}

// Sent is the answer of a send (201 Created).
type Sent struct {
	// ID is the new message's id.
	ID string `json:"id"`
	// SequenceNumber is a FIFO message's sequence number; absent on a
	// standard queue.
	SequenceNumber string `json:"sequenceNumber,omitempty"`
}

// BatchResult is one entry's outcome in a BatchResults answer, in request
// order: OK, or its Error. It is a batch send's, a batch control's or a
// delete by ids' result; the fields of the other kinds are absent.
type BatchResult struct {
	// ID echoes the entry's id when the entries had ids (a delete by ids
	// echoes the message id); absent otherwise.
	ID string `json:"id,omitempty"`
	// OK says the entry succeeded.
	OK bool `json:"ok"`
	// MessageID and SequenceNumber are a sent message's (SequenceNumber a
	// FIFO one's only); absent elsewhere.
	MessageID      string `json:"messageId,omitempty"`
	SequenceNumber string `json:"sequenceNumber,omitempty"`
	// Deleted is a delete by id's: whether the queue held the message.
	// Absent (nil) on the other results.
	Deleted *bool `json:"deleted,omitempty"`
	// Error is a failed entry's error (its code as a whole request's
	// would be); absent when OK.
	Error *ErrorBody `json:"error,omitempty"`
}

// BatchResults is the answer of a batch: a batch send, a batch control
// (POST /v1/queues/{queue}/ack, ... with entries) and a delete by ids
// (POST .../messages/delete, .../dead-letters/delete).
type BatchResults struct {
	// Results holds one result per entry, in request order.
	Results []BatchResult `json:"results"`
}

// ReceiveRequest is the body of POST /v1/queues/{queue}/receive. Every
// field may be absent (nil, and left out): the body may be empty.
type ReceiveRequest struct {
	// Max is the most messages to receive: 1..10 (default 1).
	Max *int `json:"max,omitempty"`
	// WaitSeconds is how long to wait for a first message: 0..20 seconds
	// (default: the queue's ReceiveMessageWaitTimeSeconds).
	WaitSeconds *int64 `json:"waitSeconds,omitempty"`
	// VisibilitySeconds is the lease: 0..43200 seconds (default: the
	// queue's VisibilityTimeout).
	VisibilitySeconds *int64 `json:"visibilitySeconds,omitempty"`
}

// Message is a message as an answer gives it: a received one (with its
// Receipt) or a browsed one (with its State and VisibleAt). Its Attributes
// leave out the ones lifted into fields (Sluice.Priority,
// Sluice.MaxAttempts, Sluice.TimeToLive, Sluice.CorrelationId, traceparent).
type Message struct {
	// ID is the message id; Body its body.
	ID   string `json:"id"`
	Body string `json:"body"`
	// Attributes are the user attributes by name ({} when none).
	Attributes map[string]Attribute `json:"attributes"`
	// Priority is its priority, -100..100 (0 when not set).
	Priority int `json:"priority"`
	// Attempts is Sluice's attempts count (a receive adds one, a snooze
	// takes it back); ReceiveCount is SQS's ApproximateReceiveCount (every
	// delivery).
	Attempts     int `json:"attempts"`
	ReceiveCount int `json:"receiveCount"`
	// MaxAttempts is its attempt limit (its own, else its queue's
	// maxReceiveCount); absent (0) when there is none.
	MaxAttempts int `json:"maxAttempts,omitempty"`
	// TTLSeconds is the time to live it was sent with (its
	// Sluice.TimeToLive); absent (0) when it was sent without one (the
	// queue's MessageTimeToLive may apply). A dead letter, or a message
	// moved by a redrive or a replay, keeps the field but no expiry.
	TTLSeconds int `json:"ttlSeconds,omitempty"`
	// CreatedAt is when it was sent.
	CreatedAt time.Time `json:"createdAt"`
	// FirstReceivedAt and LastReceivedAt are its first and latest
	// deliveries; absent (nil) before the first.
	FirstReceivedAt *time.Time `json:"firstReceivedAt,omitempty"`
	LastReceivedAt  *time.Time `json:"lastReceivedAt,omitempty"`
	// CorrelationID, TraceContext, GroupID, DedupID and SequenceNumber are
	// the envelope's (SequenceNumber a FIFO message's); each is absent when
	// "".
	CorrelationID  string `json:"correlationId,omitempty"`
	TraceContext   string `json:"traceContext,omitempty"`
	GroupID        string `json:"groupId,omitempty"`
	DedupID        string `json:"dedupId,omitempty"`
	SequenceNumber string `json:"sequenceNumber,omitempty"`
	// Receipt is a received message's: what the controls take. Absent on
	// a browsed message.
	Receipt string `json:"receipt,omitempty"`
	// DeadLetterSource is a dead letter's source queue; absent otherwise.
	DeadLetterSource string `json:"deadLetterSource,omitempty"`
	// FailureReason is the reason of its latest failure (a nack's, "lease
	// expired", ...); absent when it has not failed.
	FailureReason string `json:"failureReason,omitempty"`
	// State ("visible", "inflight" or "delayed") is a browsed message's;
	// absent on a received one.
	State string `json:"state,omitempty"`
	// VisibleAt is a browsed message's: when a delayed one becomes visible,
	// or an in-flight one's lease ends. Absent otherwise.
	VisibleAt *time.Time `json:"visibleAt,omitempty"`
}

// Messages is the answer of a receive: the messages leased ([] when none
// came by the end of the wait).
type Messages struct {
	// Messages are the deliveries, each with its Receipt.
	Messages []Message `json:"messages"`
}

// BrowsePage is a page of browsed messages: the answer of GET
// /v1/queues/{queue}/messages and of GET .../dead-letters. A filtered page
// may be short, even empty, and still have a next page.
type BrowsePage struct {
	// Queue is the queue browsed (the dead-letter queue, for dead letters).
	Queue string `json:"queue"`
	// Messages are the page's messages ([] when none), each with its State
	// and VisibleAt.
	Messages []Message `json:"messages"`
	// Next is the cursor= of the next page; absent after the last.
	Next string `json:"next,omitempty"`
}

// IDs is the body of a delete by ids: POST
// /v1/queues/{queue}/messages/delete and .../dead-letters/delete.
type IDs struct {
	// IDs are the message ids to delete (1..100).
	IDs []string `json:"ids"`
}
