package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluicemq/sluice/client"
)

// extendChunk is how many leases one extend request carries (the API's
// batch limit).
const extendChunk = 10

// nativeSource is a Source over Sluice's native API (NewSource with
// ProtocolHTTP, and the stream source's way for the messages of a stream
// that has ended): a queue through a *client.Client. It holds no state of
// its own, so it is safe for concurrent use as the client is.
type nativeSource struct {
	c     *client.Client
	queue string
}

// Receive leases up to req.Max messages, waiting up to req.Wait.
func (s *nativeSource) Receive(ctx context.Context, req ReceiveRequest) ([]*Message, error) {
	opts := []client.ReceiveOption{client.WaitTime(req.Wait)}
	if req.Max > 0 {
		opts = append(opts, client.MaxMessages(req.Max))
	}
	if req.Lease > 0 {
		opts = append(opts, client.VisibilityTimeout(req.Lease))
	}
	ds, err := s.c.Receive(ctx, s.queue, opts...)
	if err != nil {
		return nil, err
	}
	out := make([]*Message, len(ds))
	for i := range ds {
		out[i] = s.message(&ds[i])
	}
	return out, nil
}

// message converts a delivery.
func (s *nativeSource) message(d *client.Delivery) *Message {
	return &Message{
		ID: d.ID, Queue: s.queue, Body: []byte(d.Body), Attributes: d.Attributes,
		ReceiveCount: d.ReceiveCount, Attempts: d.Attempts, MaxAttempts: d.MaxAttempts, Priority: d.Priority,
		CorrelationID: d.CorrelationID, TraceContext: d.TraceContext, GroupID: d.GroupID, SentAt: d.CreatedAt,
		FailureReason: d.FailureReason, Receipt: d.Receipt,
	}
}

// Settle applies o to m.
func (s *nativeSource) Settle(ctx context.Context, m *Message, o Outcome) error {
	var err error
	// A negative delay is 0, as OutcomeOf makes it: never sent to the broker.
	delay := max(o.Delay, 0)
	switch o.Kind {
	case KindAck:
		err = s.c.Ack(ctx, s.queue, m.Receipt)
	case KindNack:
		err = s.c.Nack(ctx, s.queue, m.Receipt, o.Reason, delay)
	case KindSnooze:
		err = s.c.Snooze(ctx, s.queue, m.Receipt, delay)
	case KindRelease:
		err = s.c.Release(ctx, s.queue, m.Receipt)
	case KindDeadLetter:
		err = s.c.DeadLetter(ctx, s.queue, m.Receipt, o.Reason)
	default:
		return fmt.Errorf("worker: outcome kind %d is none of KindAck..KindDeadLetter", o.Kind)
	}
	return leaseError(err)
}

// leaseError makes a control's error on an ended lease ErrLeaseLost (the
// client's error wrapped beside it); any other error is returned as is.
func leaseError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, client.ErrMessageNotInFlight) || errors.Is(err, client.ErrInvalidReceipt) || staleReceipt(err) {
		return fmt.Errorf("%w: %w", ErrLeaseLost, err)
	}
	return err
}

// staleReceipt reports whether err is the broker's answer to a stale
// receipt: invalid_parameter on the receipt ("Value ... for parameter
// ReceiptHandle is invalid. Reason: Message does not exist or is not
// available for visibility timeout change.", or "... The receipt handle has
// expired."). Any other invalid_parameter (a delay out of range, a reason
// too long) is the request's fault, not a lost lease, and stays as is.
func staleReceipt(err error) bool {
	var e *client.Error
	return errors.As(err, &e) && e.Code == "invalid_parameter" && staleReceiptText(e.Message)
}

// staleReceiptText reports whether an invalid_parameter's message is about
// a stale receipt.
func staleReceiptText(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "receipthandle is invalid") || strings.Contains(m, "receipt handle has expired") ||
		strings.Contains(m, "not available for visibility timeout change")
}

// Extend extends the leases of msgs, 10 per request (the batch extend).
// A request that fails as a whole fails the call; the messages of the
// chunks before it keep their answers.
func (s *nativeSource) Extend(ctx context.Context, msgs []*Message, lease time.Duration) ([]error, error) {
	errs := make([]error, len(msgs))
	for start := 0; start < len(msgs); start += extendChunk {
		chunk := msgs[start:min(start+extendChunk, len(msgs))]
		entries := make([]client.ExtendEntry, len(chunk))
		for i, m := range chunk {
			entries[i] = client.ExtendEntry{Receipt: m.Receipt, Visibility: lease}
		}
		res, err := s.c.ExtendBatch(ctx, s.queue, entries)
		if err != nil {
			return errs, err
		}
		for i, e := range res {
			errs[start+i] = leaseError(e)
		}
	}
	return errs, nil
}

// Backlog answers the queue's visible messages.
func (s *nativeSource) Backlog(ctx context.Context) (int64, error) {
	st, err := s.c.Stats(ctx, s.queue)
	if err != nil {
		return 0, err
	}
	return st.Visible, nil
}
