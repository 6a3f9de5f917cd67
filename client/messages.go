package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/api/native/wire"
)

// SendResult is a sent message's id, and a FIFO message's sequence number.
type SendResult struct {
	ID             string
	SequenceNumber string
}

// BatchResult is one message's result in a batch send: its SendResult, or
// its error (an *Error; Err == nil when it was sent).
type BatchResult struct {
	SendResult
	Err error
}

// Send sends one message to the queue. A full queue is ErrQueueFull (after
// the retries). A send retried after a lost answer may store the message
// twice on a standard queue unless it carries a DedupID: see Client.
func (c *Client) Send(ctx context.Context, queue string, m Message) (SendResult, error) {
	var out wire.Sent
	r := request{method: http.MethodPost, path: queuePath(queue, "messages"), body: toEnvelope(&m), idempotent: true,
		duplicates: m.DedupID == ""}
	if err := c.do(ctx, r, &out); err != nil {
		return SendResult{}, err
	}
	return SendResult{ID: out.ID, SequenceNumber: out.SequenceNumber}, nil
}

// SendBatch sends up to 10 messages in one request and answers each one's
// result in order. A batch that would take the queue past its MaxDepth is
// refused whole (the error is ErrQueueFull); otherwise each message is sent
// or fails on its own (its BatchResult.Err). The same duplicate caveat as
// Send's applies to a retried batch.
func (c *Client) SendBatch(ctx context.Context, queue string, msgs []Message) ([]BatchResult, error) {
	in := wire.SendBatchRequest{Messages: make([]wire.BatchEntry, len(msgs))}
	for i := range msgs {
		in.Messages[i].Envelope = toEnvelope(&msgs[i])
	}
	var out wire.BatchResults
	r := request{method: http.MethodPost, path: queuePath(queue, "messages", "batch"), body: in, idempotent: true}
	for i := range msgs {
		if msgs[i].DedupID == "" {
			r.duplicates = true
		}
	}
	if err := c.do(ctx, r, &out); err != nil {
		return nil, err
	}
	if err := checkResults(&out, len(msgs)); err != nil {
		return nil, err
	}
	res := make([]BatchResult, len(msgs))
	for i, e := range resultErrs(&out) {
		res[i] = BatchResult{SendResult: SendResult{ID: out.Results[i].MessageID, SequenceNumber: out.Results[i].SequenceNumber}, Err: e}
	}
	return res, nil
}

// ReceiveOption is an option of Receive.
type ReceiveOption func(*wire.ReceiveRequest)

// MaxMessages receives up to n messages: 1..10 (default 1).
func MaxMessages(n int) ReceiveOption { return func(r *wire.ReceiveRequest) { r.Max = &n } }

// WaitTime waits up to d (0..20 s, whole seconds rounded up) for a first
// message: a long poll. Default: the queue's ReceiveMessageWaitTimeSeconds.
func WaitTime(d time.Duration) ReceiveOption {
	return func(r *wire.ReceiveRequest) { r.WaitSeconds = ptr(seconds(d)) }
}

// VisibilityTimeout leases the messages for d (0..12 h, whole seconds
// rounded up). Default: the queue's VisibilityTimeout.
func VisibilityTimeout(d time.Duration) ReceiveOption {
	return func(r *wire.ReceiveRequest) { r.VisibilitySeconds = ptr(seconds(d)) }
}

// Receive leases messages of the queue: none when there are none by the end
// of the wait (not an error). Each Delivery's Receipt is what the controls
// (Ack, Nack, Extend, ...) take. Cancelling ctx ends a long poll at once.
func (c *Client) Receive(ctx context.Context, queue string, opts ...ReceiveOption) ([]Delivery, error) {
	var in wire.ReceiveRequest
	for _, o := range opts {
		o(&in)
	}
	var out wire.Messages
	if err := c.do(ctx, request{method: http.MethodPost, path: queuePath(queue, "receive"), body: in, idempotent: true}, &out); err != nil {
		return nil, err
	}
	return fromWireMessages(out.Messages)
}

// Page is a page of browsed messages (or dead letters). Next, when not "",
// is the cursor of the next page (pass it with Cursor); a filtered page may
// be short, even empty, and still have a Next.
type Page struct {
	// Queue is the queue browsed (the dead-letter queue, for dead letters).
	Queue    string
	Messages []Delivery
	Next     string
}

// Order is the order of a browse.
type Order string

// The orders of a browse.
const (
	// Oldest first: send order (the default).
	Oldest Order = "oldest"
	// Newest first.
	Newest Order = "newest"
)

// BrowseOption is an option of Browse and DeadLetters.
type BrowseOption func(url.Values)

// Limit sets the page size: 1..100 (default 20).
func Limit(n int) BrowseOption { return func(q url.Values) { q.Set("limit", strconv.Itoa(n)) } }

// Cursor continues after the page whose Next it is.
func Cursor(next string) BrowseOption { return func(q url.Values) { q.Set("cursor", next) } }

// InOrder sets the order (default Oldest).
func InOrder(o Order) BrowseOption { return func(q url.Values) { q.Set("order", string(o)) } }

// WithAttribute keeps the messages that have attribute name.
func WithAttribute(name string) BrowseOption { return func(q url.Values) { q.Set("attribute", name) } }

// WithAttributeValue keeps the messages whose attribute name has the string
// value.
func WithAttributeValue(name, value string) BrowseOption {
	return func(q url.Values) { q.Set("attribute", name); q.Set("value", value) }
}

// WithReason keeps the messages whose failure reason contains s.
func WithReason(s string) BrowseOption { return func(q url.Values) { q.Set("reason", s) } }

// browse reads one page at path.
func (c *Client) browse(ctx context.Context, path string, opts []BrowseOption) (Page, error) {
	q := url.Values{}
	for _, o := range opts {
		o(q)
	}
	var out wire.BrowsePage
	if err := c.do(ctx, request{method: http.MethodGet, path: path, query: q, idempotent: true}, &out); err != nil {
		return Page{}, err
	}
	ms, err := fromWireMessages(out.Messages)
	if err != nil {
		return Page{}, err
	}
	return Page{Queue: out.Queue, Messages: ms, Next: out.Next}, nil
}

// Browse answers a page of the queue's messages without receiving them
// (nothing is leased, no count moves); each has its State ("visible",
// "inflight", "delayed") and VisibleAt.
func (c *Client) Browse(ctx context.Context, queue string, opts ...BrowseOption) (Page, error) {
	return c.browse(ctx, queuePath(queue, "messages"), opts)
}

// DeleteMessage deletes a message by id whatever its state (a lease on it
// ends); ErrMessageNotFound when the queue does not hold it.
func (c *Client) DeleteMessage(ctx context.Context, queue, id string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: queuePath(queue, "messages", url.PathEscape(id))}, nil)
}

// DeleteMessages deletes up to 100 messages by id and answers, for each,
// whether the queue held it.
func (c *Client) DeleteMessages(ctx context.Context, queue string, ids []string) ([]bool, error) {
	return c.deleteIDs(ctx, queuePath(queue, "messages", "delete"), ids)
}

func (c *Client) deleteIDs(ctx context.Context, path string, ids []string) ([]bool, error) {
	var out wire.BatchResults
	if err := c.do(ctx, request{method: http.MethodPost, path: path, body: wire.IDs{IDs: ids}}, &out); err != nil {
		return nil, err
	}
	if err := checkResults(&out, len(ids)); err != nil {
		return nil, err
	}
	found := make([]bool, len(ids))
	for i, r := range out.Results {
		found[i] = r.Deleted != nil && *r.Deleted
	}
	return found, nil
}
