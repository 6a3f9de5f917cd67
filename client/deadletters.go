package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/sluicemq/sluice/api/native/wire"
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
// the queue. Its fields, and its JSON form, are the native API's
// (wire.Task): ID, Source (the dead-letter queue), Destination (the queue
// replayed into), Status ("RUNNING", "COMPLETED", "CANCELLING",
// "CANCELLED" or "FAILED"), Moved, ToMove, Skipped (the dead letters an
// edit-and-replay left in the dead-letter queue: their edited form does not
// fit the queue), MaxPerSecond, FailureReason and StartedAt.
type ReplayTask wire.Task

// Done reports whether the task has ended (COMPLETED, CANCELLED or FAILED).
func (t ReplayTask) Done() bool { return t.Status != "RUNNING" && t.Status != "CANCELLING" }

// ReplayOption is an option of Replay.
type ReplayOption func(*wire.ReplayRequest)

// ReplayIDs replays only these dead letters (up to 100), oldest first; an
// id the dead-letter queue does not hold is passed over. Without it every
// dead letter of the queue is replayed.
func ReplayIDs(ids ...string) ReplayOption {
	return func(r *wire.ReplayRequest) { r.IDs = append(r.IDs, ids...) }
}

// EditBody replaces the body of each replayed message (with ReplayIDs).
func EditBody(body string) ReplayOption { return func(r *wire.ReplayRequest) { r.Body = &body } }

// EditAttributes replaces the user attributes of each replayed message
// (with ReplayIDs); the correlation id is kept unless attrs name their own
// Sluice.CorrelationId.
func EditAttributes(attrs map[string]Attribute) ReplayOption {
	return func(r *wire.ReplayRequest) {
		r.Attributes = toWireAttrs(attrs)
		if r.Attributes == nil {
			r.Attributes = map[string]wire.Attribute{}
		}
	}
}

// MaxPerSecond caps the replay's rate: 1..500 (default 500).
func MaxPerSecond(n int) ReplayOption { return func(r *wire.ReplayRequest) { r.MaxPerSecond = n } }

// Replay starts moving the queue's dead letters back into it, as a
// rate-limited task, and answers the task (poll Replays for its progress).
// A replayed message is new (a new id, its attempts reset) and keeps its
// attributes. One replay per dead-letter queue runs at a time: another one
// meanwhile is ErrInvalidParameter. A replay of all dead letters of a
// dead-letter queue that serves other queues too is ErrConflict (replay
// chosen ids then). Not retried after an ambiguous failure.
func (c *Client) Replay(ctx context.Context, queue string, opts ...ReplayOption) (ReplayTask, error) {
	var in wire.ReplayRequest
	for _, o := range opts {
		o(&in)
	}
	var out wire.Task
	if err := c.do(ctx, request{method: http.MethodPost, path: queuePath(queue, "dead-letters", "replay"), body: in}, &out); err != nil {
		return ReplayTask{}, err
	}
	return ReplayTask(out), nil
}

// Replays answers the replays into the queue (and SQS move tasks back to
// it), newest first: up to limit (1..10; 0 for the default, 10).
func (c *Client) Replays(ctx context.Context, queue string, limit int) ([]ReplayTask, error) {
	q := url.Values{}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out wire.Replays
	if err := c.do(ctx, request{method: http.MethodGet, path: queuePath(queue, "dead-letters", "replays"), query: q, idempotent: true}, &out); err != nil {
		return nil, err
	}
	if out.Replays == nil {
		return nil, nil
	}
	ts := make([]ReplayTask, len(out.Replays))
	for i, t := range out.Replays {
		ts[i] = ReplayTask(t)
	}
	return ts, nil
}
