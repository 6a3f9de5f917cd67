package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/api/native/wire"
)

// Queue is a queue with its settings and stats.
type Queue struct {
	Name string
	ARN  string
	Fifo bool
	// DeadLetterQueue names the queue its RedrivePolicy moves dead letters
	// to ("" when it has none).
	DeadLetterQueue string
	CreatedAt       time.Time
	ModifiedAt      time.Time
	// Attributes are all of its settable attributes as SQS strings
	// ("VisibilityTimeout": "30"), the Sluice ones (RetryPolicy, MaxDepth,
	// LowPriorityMaxDepth, Paused, DeliveryMode, DeadLetterWebhook,
	// DeduplicationWindowSeconds, DeduplicationUntil, HealthDepth, HealthAge,
	// MaxInFlight, MaxReceivesPerSecond, MessageTimeToLive,
	// ExpiredMessageAction) with their defaults when unset.
	Attributes map[string]string
	Tags       map[string]string
	Stats      Stats
}

// QueueSummary is a queue in a list.
type QueueSummary struct {
	Name   string
	Fifo   bool
	Paused bool
	Stats  Stats
}

// QueuePage is a page of queues in name order. Next, when not "", names the
// last queue of the page: pass it to ListQueues with After for the next one.
type QueuePage struct {
	Queues []QueueSummary
	Next   string
}

// Stats is a queue's live view.
type Stats struct {
	// Visible messages can be received now; InFlight are leased; Delayed
	// wait for a delay, a retry backoff or a snooze.
	Visible, InFlight, Delayed int64
	// Depth is their sum: what MaxDepth limits.
	Depth int64
	// OldestAge is the age of the oldest message, in whole seconds (0 when
	// the queue is empty).
	OldestAge time.Duration
	// OldestVisibleAge is how long the longest-visible message has waited
	// since it became visible, in whole seconds (0 when none is visible:
	// delayed, backing-off and in-flight messages do not count). It is
	// what the queue's health judges.
	OldestVisibleAge time.Duration
	// DeadLetters counts the messages of its dead-letter queue; nil when it
	// has none.
	DeadLetters *int64
	// Refused counts the sends this broker refused since it started, by
	// reason ("max_depth", "low_priority_max_depth").
	Refused map[string]int64
}

// statsOf converts a queue's stats.
func statsOf(s wire.Stats) Stats {
	return Stats{Visible: s.Visible, InFlight: s.InFlight, Delayed: s.Delayed, Depth: s.Depth,
		OldestAge: time.Duration(s.OldestAgeSeconds) * time.Second, OldestVisibleAge: time.Duration(s.OldestVisibleAgeSeconds) * time.Second,
		DeadLetters: s.DeadLetters, Refused: s.Refused}
}

// queueOf converts a queue.
func queueOf(q *wire.Queue) Queue {
	return Queue{Name: q.Name, ARN: q.ARN, Fifo: q.Fifo, DeadLetterQueue: q.DeadLetterQueue,
		CreatedAt: q.CreatedAt, ModifiedAt: q.ModifiedAt, Attributes: q.Attributes, Tags: q.Tags, Stats: statsOf(q.Stats)}
}

// QueueOption is an option of CreateQueue.
type QueueOption func(*wire.CreateQueueRequest)

// Tags tags the queue created (the tags are set at creation only; SQS's
// TagQueue changes them later).
func Tags(tags map[string]string) QueueOption {
	return func(r *wire.CreateQueueRequest) { r.Tags = tags }
}

// CreateQueue creates queue name with attrs (SQS attribute strings and the
// Sluice ones, docs/sluice-attributes.md; nil for the defaults) and answers
// it. A create of an existing queue answers that queue when every given
// attribute has its value, else ErrQueueExists. A name ending in ".fifo"
// with FifoQueue "true" makes a FIFO queue.
func (c *Client) CreateQueue(ctx context.Context, name string, attrs map[string]string, opts ...QueueOption) (Queue, error) {
	in := wire.CreateQueueRequest{Name: name, Attributes: attrs}
	for _, o := range opts {
		o(&in)
	}
	var out wire.Queue
	if err := c.do(ctx, request{method: http.MethodPost, path: "/queues", body: in, idempotent: true}, &out); err != nil {
		return Queue{}, err
	}
	return queueOf(&out), nil
}

// GetQueue answers a queue: its settings and stats.
func (c *Client) GetQueue(ctx context.Context, queue string) (Queue, error) {
	var out wire.Queue
	if err := c.do(ctx, request{method: http.MethodGet, path: queuePath(queue), idempotent: true}, &out); err != nil {
		return Queue{}, err
	}
	return queueOf(&out), nil
}

// ListOption is an option of ListQueues.
type ListOption func(url.Values)

// Prefix lists only the queues whose name starts with p.
func Prefix(p string) ListOption { return func(q url.Values) { q.Set("prefix", p) } }

// After lists the queues after name (a QueuePage's Next).
func After(name string) ListOption { return func(q url.Values) { q.Set("after", name) } }

// PageSize sets how many queues a page holds: 1..1000 (default 100).
func PageSize(n int) ListOption { return func(q url.Values) { q.Set("limit", strconv.Itoa(n)) } }

// ListQueues answers a page of queues in name order, each with its stats.
func (c *Client) ListQueues(ctx context.Context, opts ...ListOption) (QueuePage, error) {
	q := url.Values{}
	for _, o := range opts {
		o(q)
	}
	var out wire.QueueList
	if err := c.do(ctx, request{method: http.MethodGet, path: "/queues", query: q, idempotent: true}, &out); err != nil {
		return QueuePage{}, err
	}
	page := QueuePage{Queues: make([]QueueSummary, len(out.Queues)), Next: out.Next}
	for i, s := range out.Queues {
		page.Queues[i] = QueueSummary{Name: s.Name, Fifo: s.Fifo, Paused: s.Paused, Stats: statsOf(s.Stats)}
	}
	return page, nil
}

// UpdateQueue changes the queue's attributes (only the ones given) and
// answers the queue.
func (c *Client) UpdateQueue(ctx context.Context, queue string, attrs map[string]string) (Queue, error) {
	var out wire.Queue
	body := wire.UpdateQueueRequest{Attributes: attrs}
	if err := c.do(ctx, request{method: http.MethodPatch, path: queuePath(queue), body: body, idempotent: true}, &out); err != nil {
		return Queue{}, err
	}
	return queueOf(&out), nil
}

// DeleteQueue deletes the queue and its messages. Not retried after an
// ambiguous failure (the repeat would answer ErrQueueNotFound).
func (c *Client) DeleteQueue(ctx context.Context, queue string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: queuePath(queue)}, nil)
}

// PurgeQueue deletes every message of the queue (visible, delayed and in
// flight). A second purge within 60 s is ErrPurgeInProgress.
func (c *Client) PurgeQueue(ctx context.Context, queue string) error {
	return c.do(ctx, request{method: http.MethodPost, path: queuePath(queue, "purge")}, nil)
}

// Pause stops the queue's deliveries (receives get nothing; a waiting one
// keeps waiting) while sends, acks, browsing and replays go on; it answers
// the queue.
func (c *Client) Pause(ctx context.Context, queue string) (Queue, error) {
	var out wire.Queue
	if err := c.do(ctx, request{method: http.MethodPost, path: queuePath(queue, "pause"), idempotent: true}, &out); err != nil {
		return Queue{}, err
	}
	return queueOf(&out), nil
}

// Resume resumes a paused queue's deliveries, waking waiting receives; it
// answers the queue.
func (c *Client) Resume(ctx context.Context, queue string) (Queue, error) {
	var out wire.Queue
	if err := c.do(ctx, request{method: http.MethodPost, path: queuePath(queue, "resume"), idempotent: true}, &out); err != nil {
		return Queue{}, err
	}
	return queueOf(&out), nil
}

// Stats answers the queue's stats.
func (c *Client) Stats(ctx context.Context, queue string) (Stats, error) {
	var out wire.Stats
	if err := c.do(ctx, request{method: http.MethodGet, path: queuePath(queue, "stats"), idempotent: true}, &out); err != nil {
		return Stats{}, err
	}
	return statsOf(out), nil
}
