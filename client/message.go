package client

import "time"

// Attribute is a message attribute: its type ("String", "Number" or
// "Binary", optionally with a ".label" suffix) and its value: Value for
// String and Number, Binary for Binary.
type Attribute struct {
	Type   string
	Value  string
	Binary []byte
}

// String returns a String attribute.
func String(v string) Attribute { return Attribute{Type: "String", Value: v} }

// Number returns a Number attribute; v is its decimal text ("42", "129.90").
func Number(v string) Attribute { return Attribute{Type: "Number", Value: v} }

// Binary returns a Binary attribute.
func Binary(v []byte) Attribute { return Attribute{Type: "Binary", Binary: v} }

// Message is a message to send: the native API's envelope. Zero fields are
// not sent (the broker's defaults apply).
type Message struct {
	// Body is required: 1 byte up to the queue's MaximumMessageSize.
	Body string
	// Attributes are the message attributes (at most 10, the ones the
	// fields below become included).
	Attributes map[string]Attribute
	// Priority is -100..100: higher is served first (standard queues).
	Priority int
	// MaxAttempts (1..1000) overrides the queue's maxReceiveCount.
	MaxAttempts int
	// TTL is the message's time to live (whole seconds, rounded up; 1 s to
	// 14 days, and at most the queue's retention period), in place of the
	// queue's MessageTimeToLive: after it the message is never received
	// (dropped, or moved to the dead-letter queue). It must be longer than
	// the message's delay.
	TTL time.Duration
	// CorrelationID (up to 128 bytes) is kept through the dead-letter queue
	// and a replay.
	CorrelationID string
	// TraceContext is a W3C traceparent.
	TraceContext string
	// Delay makes the message visible that much later (whole seconds, at
	// most the queue's retention period); DeliverAt names the time instead.
	// Give at most one.
	Delay     time.Duration
	DeliverAt time.Time
	// GroupID is a FIFO queue's message group, or a fair queue's tenant.
	GroupID string
	// DedupID is the deduplication id: a FIFO queue's (required unless it
	// has ContentBasedDeduplication), or on a standard queue an idempotency
	// key. A repeated id within the queue's window is answered with the
	// original message id and stores nothing, so a send that carries one is
	// safe to repeat.
	DedupID string
}

// Delivery is a message as the broker answers it: a received one (with its
// Receipt) or a browsed one (with its State and VisibleAt).
type Delivery struct {
	ID         string
	Body       string
	Attributes map[string]Attribute
	Priority   int
	// Attempts is Sluice's attempts count (a receive adds one, a snooze
	// takes it back); ReceiveCount is SQS's ApproximateReceiveCount.
	Attempts     int
	ReceiveCount int
	// MaxAttempts is the message's attempt limit; 0 when it has none.
	MaxAttempts int
	// TTL is the time to live the message was sent with; 0 when none was
	// given (the queue's MessageTimeToLive may apply).
	TTL              time.Duration
	CreatedAt        time.Time
	FirstReceivedAt  time.Time
	LastReceivedAt   time.Time
	CorrelationID    string
	TraceContext     string
	GroupID          string
	DedupID          string
	SequenceNumber   string
	Receipt          string
	DeadLetterSource string
	FailureReason    string
	// State ("visible", "inflight", "delayed") and VisibleAt are a browsed
	// message's.
	State     string
	VisibleAt time.Time
}
