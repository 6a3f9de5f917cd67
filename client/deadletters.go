package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// The dead letters of a source queue: the messages its RedrivePolicy moved
// to its dead-letter queue. Every call takes the source queue; a queue
// without a RedrivePolicy answers ErrConflict.

// DeadLetters answers a page of the queue's dead letters (only the ones
// that came from it, when its dead-letter queue serves several queues).
// Each has its DeadLetterSource, Attempts and FailureReason.
func (c *Client) DeadLetters(ctx context.Context, queue string, opts ...BrowseOption) (Page, error) {
	return c.browse(ctx, queuePath(queue, "dead-letters"), opts)
}

// DeleteDeadLetters deletes up to 100 dead letters by id (ids of the
// queue's DeadLetters pages) and answers, for each, whether it was there.
func (c *Client) DeleteDeadLetters(ctx context.Context, queue string, ids []string) ([]bool, error) {
	return c.deleteIDs(ctx, queuePath(queue, "dead-letters", "delete"), ids)
}

// ReplayTask is a replay: a move task from the dead-letter queue back to
// the queue. Its JSON form is the native API's.
type ReplayTask struct {
	ID string `json:"id"`
	// Source is the dead-letter queue; Destination the queue replayed into.
	Source      string `json:"source"`
	Destination string `json:"destination"`
	// Status is "RUNNING", "COMPLETED", "CANCELLING", "CANCELLED" or
	// "FAILED".
	Status string `json:"status"`
	Moved  int64  `json:"moved"`
	ToMove int64  `json:"toMove"`
	// Skipped counts the dead letters an edit-and-replay left in the
	// dead-letter queue: their edited form does not fit the queue.
	Skipped       int64     `json:"skipped"`
	MaxPerSecond  int       `json:"maxPerSecond"`
	FailureReason string    `json:"failureReason,omitempty"`
	StartedAt     time.Time `json:"startedAt"`
}

// Done reports whether the task has ended (COMPLETED, CANCELLED or FAILED).
func (t ReplayTask) Done() bool { return t.Status != "RUNNING" && t.Status != "CANCELLING" }

// ReplayOption is an option of Replay.
type ReplayOption func(*replayRequest)

type replayRequest struct {
	IDs          []string                 `json:"ids,omitempty"`
	Body         *string                  `json:"body,omitempty"`
	Attributes   map[string]wireAttribute `json:"attributes,omitempty"`
	MaxPerSecond int                      `json:"maxPerSecond,omitempty"`
}

// ReplayIDs replays only these dead letters (up to 100), oldest first; an
// id the dead-letter queue does not hold is passed over. Without it every
// dead letter of the queue is replayed.
func ReplayIDs(ids ...string) ReplayOption {
	return func(r *replayRequest) { r.IDs = append(r.IDs, ids...) }
}

// EditBody replaces the body of each replayed message (with ReplayIDs).
func EditBody(body string) ReplayOption { return func(r *replayRequest) { r.Body = &body } }

// EditAttributes replaces the user attributes of each replayed message
// (with ReplayIDs); the correlation id is kept unless attrs name their own
// Sluice.CorrelationId.
func EditAttributes(attrs map[string]Attribute) ReplayOption {
	return func(r *replayRequest) {
		r.Attributes = toWireAttrs(attrs)
		if r.Attributes == nil {
			r.Attributes = map[string]wireAttribute{}
		}
	}
}

// MaxPerSecond caps the replay's rate: 1..500 (default 500).
func MaxPerSecond(n int) ReplayOption { return func(r *replayRequest) { r.MaxPerSecond = n } }

// Replay starts moving the queue's dead letters back into it, as a
// rate-limited task, and answers the task (poll Replays for its progress).
// A replayed message is new (a new id, its attempts reset) and keeps its
// attributes. One replay per dead-letter queue runs at a time: another one
// meanwhile is ErrInvalidParameter. A replay of all dead letters of a
// dead-letter queue that serves other queues too is ErrConflict (replay
// chosen ids then). Not retried after an ambiguous failure.
func (c *Client) Replay(ctx context.Context, queue string, opts ...ReplayOption) (ReplayTask, error) {
	var in replayRequest
	for _, o := range opts {
		o(&in)
	}
	var out ReplayTask
	if err := c.do(ctx, request{method: http.MethodPost, path: queuePath(queue, "dead-letters", "replay"), body: in}, &out); err != nil {
		return ReplayTask{}, err
	}
	return out, nil
}

// Replays answers the replays into the queue (and SQS move tasks back to
// it), newest first: up to limit (1..10; 0 for the default, 10).
func (c *Client) Replays(ctx context.Context, queue string, limit int) ([]ReplayTask, error) {
	q := url.Values{}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out struct {
		Replays []ReplayTask `json:"replays"`
	}
	if err := c.do(ctx, request{method: http.MethodGet, path: queuePath(queue, "dead-letters", "replays"), query: q, idempotent: true}, &out); err != nil {
		return nil, err
	}
	return out.Replays, nil
}
