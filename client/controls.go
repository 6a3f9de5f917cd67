package client

import (
	"context"
	"net/http"
	"time"

	"github.com/sluicemq/sluice/api/native/wire"
)

// The consumer controls on a leased message, each by its receipt: single
// (answering the entry's error) and batch (up to 10 entries, answering one
// error or nil per entry, in order; the second result is for the request as
// a whole).
//
// A control on a lease that has ended (the message went back to the queue)
// is ErrMessageNotInFlight; on a stale receipt (the message was deleted, or
// received again since) ErrInvalidParameter, as in SQS. An ack of a stale
// receipt succeeds without effect.

// ptr is a pointer to a copy of v: an optional field given.
func ptr[T any](v T) *T { return &v }

// control sends a batch control: one entry per message (without entry ids:
// the results come in request order).
func (c *Client) control(ctx context.Context, queue, name string, idempotent bool, fields []wire.ControlFields) ([]error, error) {
	entries := make([]wire.ControlEntry, len(fields))
	for i, f := range fields {
		entries[i].ControlFields = f
	}
	var out wire.BatchResults
	r := request{method: http.MethodPost, path: queuePath(queue, name), idempotent: idempotent,
		body: wire.ControlRequest{Entries: entries}}
	if err := c.do(ctx, r, &out); err != nil {
		return nil, err
	}
	if err := checkResults(&out, len(entries)); err != nil {
		return nil, err
	}
	return resultErrs(&out), nil
}

// single sends one control's fields.
func (c *Client) single(ctx context.Context, queue, name string, idempotent bool, f wire.ControlFields) error {
	return c.do(ctx, request{method: http.MethodPost, path: queuePath(queue, name), body: f, idempotent: idempotent}, nil)
}

// Ack acknowledges a message: the work is done, it is deleted.
func (c *Client) Ack(ctx context.Context, queue, receipt string) error {
	return c.single(ctx, queue, "ack", true, wire.ControlFields{Receipt: receipt})
}

// AckBatch acknowledges up to 10 messages.
func (c *Client) AckBatch(ctx context.Context, queue string, receipts []string) ([]error, error) {
	return c.control(ctx, queue, "ack", true, receiptsOnly(receipts))
}

func receiptsOnly(receipts []string) []wire.ControlFields {
	out := make([]wire.ControlFields, len(receipts))
	for i, r := range receipts {
		out[i] = wire.ControlFields{Receipt: r}
	}
	return out
}

// nackFields is a nack's: the reason is kept as the message's failure
// reason ("" sends none); delay 0 follows the queue's RetryPolicy (visible
// at once without one), a positive delay (whole seconds rounded up, up to
// 12 h) retries after exactly that long.
func nackFields(receipt, reason string, delay time.Duration) wire.ControlFields {
	f := wire.ControlFields{Receipt: receipt}
	if reason != "" {
		f.Reason = &reason
	}
	if delay != 0 {
		f.DelaySeconds = ptr(seconds(delay))
	}
	return f
}

// Nack is a failed attempt: the message goes back to the queue, with reason
// as its failure reason, after delay (0: the queue's RetryPolicy backoff,
// or at once without one). Past its last attempt it moves to the
// dead-letter queue at once.
func (c *Client) Nack(ctx context.Context, queue, receipt, reason string, delay time.Duration) error {
	return c.single(ctx, queue, "nack", false, nackFields(receipt, reason, delay))
}

// NackEntry is one message of a NackBatch: see Nack.
type NackEntry struct {
	Receipt string
	Reason  string
	Delay   time.Duration
}

// NackBatch nacks up to 10 messages.
func (c *Client) NackBatch(ctx context.Context, queue string, entries []NackEntry) ([]error, error) {
	fs := make([]wire.ControlFields, len(entries))
	for i, e := range entries {
		fs[i] = nackFields(e.Receipt, e.Reason, e.Delay)
	}
	return c.control(ctx, queue, "nack", false, fs)
}

// Extend sets the lease to end d from now (1 s..12 h, whole seconds rounded
// up): a heartbeat while the work goes on.
func (c *Client) Extend(ctx context.Context, queue, receipt string, d time.Duration) error {
	return c.single(ctx, queue, "extend", true, wire.ControlFields{Receipt: receipt, VisibilitySeconds: ptr(seconds(d))})
}

// ExtendEntry is one lease of an ExtendBatch: see Extend.
type ExtendEntry struct {
	Receipt    string
	Visibility time.Duration
}

// ExtendBatch extends up to 10 leases.
func (c *Client) ExtendBatch(ctx context.Context, queue string, entries []ExtendEntry) ([]error, error) {
	fs := make([]wire.ControlFields, len(entries))
	for i, e := range entries {
		fs[i] = wire.ControlFields{Receipt: e.Receipt, VisibilitySeconds: ptr(seconds(e.Visibility))}
	}
	return c.control(ctx, queue, "extend", true, fs)
}

// Snooze makes the message visible again after d (0..12 h, whole seconds
// rounded up), without counting the attempt.
func (c *Client) Snooze(ctx context.Context, queue, receipt string, d time.Duration) error {
	return c.single(ctx, queue, "snooze", false, wire.ControlFields{Receipt: receipt, DelaySeconds: ptr(seconds(d))})
}

// SnoozeEntry is one message of a SnoozeBatch: see Snooze.
type SnoozeEntry struct {
	Receipt string
	Delay   time.Duration
}

// SnoozeBatch snoozes up to 10 messages.
func (c *Client) SnoozeBatch(ctx context.Context, queue string, entries []SnoozeEntry) ([]error, error) {
	fs := make([]wire.ControlFields, len(entries))
	for i, e := range entries {
		fs[i] = wire.ControlFields{Receipt: e.Receipt, DelaySeconds: ptr(seconds(e.Delay))}
	}
	return c.control(ctx, queue, "snooze", false, fs)
}

// Release hands the message back at once without counting the attempt (a
// snooze of 0): for a message received but never worked on.
func (c *Client) Release(ctx context.Context, queue, receipt string) error {
	return c.single(ctx, queue, "release", false, wire.ControlFields{Receipt: receipt})
}

// ReleaseBatch releases up to 10 messages.
func (c *Client) ReleaseBatch(ctx context.Context, queue string, receipts []string) ([]error, error) {
	return c.control(ctx, queue, "release", false, receiptsOnly(receipts))
}

// DeadLetter moves the message to the queue's dead-letter queue at once,
// whatever its attempts, with reason as its failure reason: for a message
// that can never succeed. A queue without a RedrivePolicy answers
// ErrConflict.
func (c *Client) DeadLetter(ctx context.Context, queue, receipt, reason string) error {
	f := wire.ControlFields{Receipt: receipt}
	if reason != "" {
		f.Reason = &reason
	}
	return c.single(ctx, queue, "dead-letter", false, f)
}

// DeadLetterEntry is one message of a DeadLetterBatch: see DeadLetter.
type DeadLetterEntry struct {
	Receipt string
	Reason  string
}

// DeadLetterBatch dead-letters up to 10 messages.
func (c *Client) DeadLetterBatch(ctx context.Context, queue string, entries []DeadLetterEntry) ([]error, error) {
	fs := make([]wire.ControlFields, len(entries))
	for i, e := range entries {
		fs[i] = wire.ControlFields{Receipt: e.Receipt}
		if e.Reason != "" {
			fs[i].Reason = ptr(e.Reason)
		}
	}
	return c.control(ctx, queue, "dead-letter", false, fs)
}
