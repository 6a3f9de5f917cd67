package model

import (
	"strings"
	"time"
)

// Limits of the SQS API that the broker enforces.
const (
	MaxBatchEntries      = 10               // entries per batch call
	MaxBatchBytes        = 1 << 20          // total payload of a send batch
	MaxMessageBytes      = 1 << 20          // the largest MaximumMessageSize
	MinMessageBytes      = 1024             // the smallest MaximumMessageSize
	MaxReceiveMessages   = 10               // MaxNumberOfMessages upper bound
	MaxDispatchMessages  = 100              // a stream dispatcher's claim (ReceiveRequest.Dispatch)
	MaxWaitTime          = 20 * time.Second // WaitTimeSeconds upper bound
	MaxVisibilityTimeout = 12 * time.Hour   // VisibilityTimeout upper bound
	MaxDelay             = 15 * time.Minute // DelaySeconds upper bound
	MinRetention         = time.Minute      // MessageRetentionPeriod lower bound
	MaxRetention         = 14 * 24 * time.Hour
	MaxMessageAttributes = 10 // user message attributes per message
	// DefaultMaxInFlight is the in-flight cap per queue (SQS's standard-queue figure).
	DefaultMaxInFlight = 120000
)

// MessageAttribute is one user or system message attribute. DataType is
// "String", "Number" or "Binary", optionally followed by ".label". String and
// Number values travel in StringValue, Binary values in BinaryValue.
type MessageAttribute struct {
	DataType    string
	StringValue string
	BinaryValue []byte
}

// IsBinary reports whether the attribute carries BinaryValue.
func (a MessageAttribute) IsBinary() bool { return BaseType(a.DataType) == "Binary" }

// SendEntry is one message to send.
type SendEntry struct {
	// ID is the batch entry id (echoed in the result); may be empty for a single send.
	ID string
	// Body is the message body: 1 byte up to the queue's MaximumMessageSize, in
	// XML 1.0's character set.
	Body string
	// Delay overrides the queue's DelaySeconds when non-nil (0..15 min).
	Delay *time.Duration
	// Attributes are the user message attributes (at most 10).
	Attributes map[string]MessageAttribute
	// SystemAttributes: only "AWSTraceHeader" (DataType String) is allowed.
	SystemAttributes map[string]MessageAttribute
	// SenderID is recorded as the SenderId system attribute.
	SenderID string
	// GroupID and DedupID are FIFO's MessageGroupId and MessageDeduplicationId.
	// On a standard queue GroupID names the message's tenant (fair queues).
	GroupID, DedupID string
	// LongDelay lets Delay run past 15 minutes, up to the queue's retention
	// period (the native API; standard queues only).
	LongDelay bool
	// Options are the message's Sluice options, parsed from Attributes by
	// the front (ParseMessageOptions) before the send reaches a backend.
	Options MessageOptions
	// MessageID, when not empty, is the new message's id: a schedule's run
	// (Schedule.RunEntry) derives it from the run's key. No API sets it:
	// every other message gets a new random id (NewMessageID).
	MessageID string
}

// SendResult is the outcome of one SendEntry. Err is set when this entry failed;
// the other entries of the batch are not affected.
type SendResult struct {
	ID             string
	MessageID      string
	SequenceNumber string // FIFO only
	Err            error
}

// Message is a stored message as a consumer sees it.
type Message struct {
	ID               string
	Body             string
	Attributes       map[string]MessageAttribute
	SystemAttributes map[string]MessageAttribute
	SenderID         string
	SentAt           time.Time
	GroupID          string
	DedupID          string
	SequenceNumber   string
	// Priority is the message's Sluice.Priority (-100..100; 0 when unset).
	Priority int
	// ReceiveCount is how many times the message has been received (after this
	// receive, for a Delivery). It keeps counting across a move to a dead-letter queue.
	ReceiveCount int
	// Attempts is Sluice's attempts count: a receive adds one, a snooze takes
	// it back (see retry.go). It keeps counting across a move to a
	// dead-letter queue.
	Attempts int
	// MaxAttempts is the message's own Sluice.MaxAttempts (0: its queue's
	// maxReceiveCount).
	MaxAttempts int
	// FirstReceiveAt is the time of the first receive (zero before it);
	// LastReceiveAt the time of the latest.
	FirstReceiveAt, LastReceiveAt time.Time
	// FailureReason is the reason of its latest failure (a nack's reason,
	// ReasonLeaseExpired, …; "" if it never failed).
	FailureReason string
	// DeadLetterSource is the name of the queue a dead-lettered message came from.
	DeadLetterSource string
}

// Delivery is a message handed to a consumer under a lease.
type Delivery struct {
	Message
	// Receipt is the opaque receipt handle of this lease.
	Receipt string
}

// ReceiveRequest asks for up to MaxMessages messages.
type ReceiveRequest struct {
	Queue string
	// MaxMessages is 1..10 (1..MaxDispatchMessages with Dispatch); 0
	// means 1.
	MaxMessages int
	// Dispatch marks the front's stream dispatcher's receive: one claim
	// serves the free credit of several streams, so it may take up to
	// MaxDispatchMessages.
	Dispatch bool
	// Visibility overrides the queue's VisibilityTimeout for these messages (0..12 h).
	Visibility *time.Duration
	// WaitTime overrides the queue's ReceiveMessageWaitTimeSeconds (0..20 s).
	WaitTime *time.Duration
	// AttemptID is FIFO's ReceiveRequestAttemptId (ignored on standard queues).
	AttemptID string
	// InFlightCap is the queue's in-flight cap (plan.ClaimRoom), set by the
	// front from broker.Config.MaxInFlight; <= 0 means no cap.
	InFlightCap int64
	// Account owns Queue (see QueueRef), set by the front.
	Account string
}

// Ref returns the queue the request names.
func (r ReceiveRequest) Ref() QueueRef { return QueueRef{Account: r.Account, Name: r.Queue} }

// DeleteEntry is one receipt to delete.
type DeleteEntry struct {
	ID      string
	Receipt string
	// Result is an ack's result (the native API's and the stream
	// protocol's; nil: none), at most MaxResultBytes, kept with the
	// message's completed record when its queue keeps them
	// (CompletedRetentionSeconds).
	Result *string
}

// VisibilityEntry changes one lease's visibility timeout, counted from now.
type VisibilityEntry struct {
	ID      string
	Receipt string
	Timeout time.Duration
}

// QueueRef names a queue at the Backend seam: the account that owns it and
// its name. A backend keys every queue by both, so that accounts can come
// without a storage change. Account "" is the broker's own account (the one
// its --account-id names, whatever that id is): the only one the front
// serves today, and the one every queue created before accounts belongs to.
type QueueRef struct {
	Account string
	Name    string
}

// String is the queue's name, prefixed by "<account>/" for another account
// than the broker's own (for logs).
func (r QueueRef) String() string {
	if r.Account == "" {
		return r.Name
	}
	return r.Account + "/" + r.Name
}

// Queue describes a queue.
type Queue struct {
	// ID is the internal id: a re-created queue of the same name gets a new one.
	ID uint64
	// Account owns the queue ("" = the broker's own; see QueueRef).
	Account    string
	Name       string
	Config     QueueConfig
	Tags       map[string]string
	CreatedAt  time.Time
	ModifiedAt time.Time
}

// QueueStats are the approximate counts of a queue, from maintained counters.
type QueueStats struct {
	Visible  int64 // ready to be received
	InFlight int64 // leased, not yet deleted or expired
	Delayed  int64 // not yet visible because of a delay or a backoff
	// OldestSentAt is when the oldest message of the queue was sent (zero
	// when the queue is empty).
	OldestSentAt time.Time
	// OldestVisibleSince is when the message that has been visible (ready
	// to be received) the longest became visible: the end of its delay,
	// backoff or lease, or its send. Zero when no message is visible:
	// delayed, backing-off and in-flight messages do not count. A backend
	// may round it down to a whole second. The health of a queue judges
	// the age of its waiting work by it (how long a ready message has
	// waited for a consumer), not by OldestSentAt.
	OldestVisibleSince time.Time
}

// Depth is what MaxDepth limits: visible + in flight + delayed.
func (s QueueStats) Depth() int64 { return s.Visible + s.InFlight + s.Delayed }

// QueueInfo is a queue with its counts.
type QueueInfo struct {
	Queue
	Stats QueueStats
}

// MessageState is where a browsed message is.
type MessageState string

// The message states.
const (
	StateVisible  MessageState = "visible"
	StateInFlight MessageState = "inflight"
	StateDelayed  MessageState = "delayed"
)

// MaxBrowse is the most messages one Browse page holds; BrowseScanLimit the
// most messages a backend examines for one page (a filter that matches
// little returns a short page and a cursor to go on from).
const (
	MaxBrowse       = 100
	BrowseScanLimit = 10000
)

// BrowseRequest asks for a page of a queue's messages, without leasing them.
type BrowseRequest struct {
	// Limit is 1..MaxBrowse (the front's default is 20).
	Limit int
	// Newest lists the newest messages first; the default is oldest first
	// (send order).
	Newest bool
	// After is the cursor of the previous page's BrowsePage.Next ("" =
	// from the start). Its form is the backend's own.
	After string
	// Filter keeps only the messages it matches.
	Filter BrowseFilter
}

// BrowseFilter selects browsed messages; zero fields match everything.
type BrowseFilter struct {
	// Attribute and Value: the message has user attribute Attribute, and,
	// when Value is not "", its string value equals Value.
	Attribute, Value string
	// Reason: the message's FailureReason contains Reason.
	Reason string
}

// Match reports whether m passes the filter (the one home of the rule; every
// backend calls it).
func (f BrowseFilter) Match(m *Message) bool {
	if f.Attribute != "" {
		a, ok := m.Attributes[f.Attribute]
		if !ok || (f.Value != "" && (a.IsBinary() || a.StringValue != f.Value)) {
			return false
		}
	}
	return f.Reason == "" || strings.Contains(m.FailureReason, f.Reason)
}

// BrowsedMessage is a message as Browse shows it: its content and where it is.
type BrowsedMessage struct {
	Message
	State MessageState
	// VisibleAt is when a delayed message becomes visible, or an in-flight
	// message's lease ends (zero for a visible message).
	VisibleAt time.Time
}

// BrowsePage is one page of Browse; Next is "" after the last page.
type BrowsePage struct {
	Messages []BrowsedMessage
	Next     string
}
