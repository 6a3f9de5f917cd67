package sqssource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicemq/sluice/worker"
)

// The message attributes that Receive lifts into worker.Message's fields
// (and leaves out of its Attributes, as Sluice's native API does), and that
// a dead-letter send puts back; and Sluice.TimeToLive, which a dead-letter
// send leaves out.
const (
	attrPriority      = "Sluice.Priority"
	attrMaxAttempts   = "Sluice.MaxAttempts"
	attrCorrelationID = "Sluice.CorrelationId"
	attrTraceParent   = "traceparent"
	attrTimeToLive    = "Sluice.TimeToLive"
)

// maxBatch is SQS's most entries in a batch call and messages in a receive.
const maxBatch = 10

// maxWait is SQS's longest long poll.
const maxWait = 20 * time.Second

// Source is a worker.Source (and worker.Backlogger) over one SQS queue,
// through the caller's *sqs.Client. Its methods are safe to call from
// several goroutines at once; it holds no goroutine of its own.
type Source struct {
	c    *sqs.Client
	url  string
	name string
	cfg  Config
	log  *slog.Logger
	now  func() time.Time

	// mu guards the redrive cache (redrive.go); the calls that fill it run
	// without it.
	mu         sync.Mutex
	redrive    *redrive
	redriveErr time.Time // when the last failed read ended; zero if none
}

var (
	_ worker.Source     = (*Source)(nil)
	_ worker.Backlogger = (*Source)(nil)
)

// New returns a Source over the queue at queueURL (as GetQueueUrl or
// CreateQueue answers it) through c, which the caller builds and owns (see
// the package doc). It makes no call: the queue's RedrivePolicy is read on
// first need.
func New(c *sqs.Client, queueURL string, cfg Config) (*Source, error) {
	if c == nil {
		return nil, errors.New("sqssource: the *sqs.Client is nil; build one with sqs.New or sqs.NewFromConfig")
	}
	name, err := queueName(queueURL)
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Source{c: c, url: queueURL, name: name, cfg: cfg,
		log: cfg.Logger.With("queue", name), now: time.Now}, nil
}

// queueName is the queue name in a queue URL: its last path segment.
func queueName(queueURL string) (string, error) {
	u, err := url.Parse(queueURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", fmt.Errorf("sqssource: queue URL %q is not an absolute URL; pass the QueueUrl that GetQueueUrl answers", queueURL)
	}
	p := strings.TrimSuffix(u.Path, "/")
	name := p[strings.LastIndexByte(p, '/')+1:]
	if name == "" {
		return "", fmt.Errorf("sqssource: queue URL %q names no queue (its path ends without a name); pass the QueueUrl that GetQueueUrl answers", queueURL)
	}
	return name, nil
}

// Queue is the queue's name, taken from its URL.
func (s *Source) Queue() string { return s.name }

// URL is the queue's URL.
func (s *Source) URL() string { return s.url }

// Receive is ReceiveMessage: up to req.Max (clamped to 1..10) messages,
// long-polling req.Wait (rounded up to whole seconds, at most 20 s; 0 leaves
// the queue's ReceiveMessageWaitTimeSeconds, as the SDK omits a zero: a
// pool's short polling, WaitTime < 0, waits the queue's default), each
// leased for req.Lease (rounded up to whole seconds, at most 12 h; 0 leaves
// the queue's VisibilityTimeout), with every system and message attribute.
func (s *Source) Receive(ctx context.Context, req worker.ReceiveRequest) ([]*worker.Message, error) {
	if req.Lease > MaxVisibility {
		return nil, fmt.Errorf("sqssource: receive lease %v is longer than SQS's 12 h visibility maximum", req.Lease)
	}
	in := &sqs.ReceiveMessageInput{
		QueueUrl:                    &s.url,
		MaxNumberOfMessages:         int32(min(max(req.Max, 1), maxBatch)),
		WaitTimeSeconds:             seconds(min(req.Wait, maxWait)),
		VisibilityTimeout:           seconds(req.Lease),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	}
	out, err := s.c.ReceiveMessage(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("sqssource: receive from %s: %w", s.name, err)
	}
	if len(out.Messages) == 0 {
		return nil, nil
	}
	maxReceive := 0
	if rd, err := s.loadRedrive(ctx); err == nil {
		maxReceive = rd.maxReceiveCount
	}
	msgs := make([]*worker.Message, 0, len(out.Messages))
	for _, m := range out.Messages {
		msgs = append(msgs, s.message(m, maxReceive))
	}
	return msgs, nil
}

// message converts a received SQS message. maxReceive is the queue's
// maxReceiveCount (0 when unknown or none).
func (s *Source) message(m types.Message, maxReceive int) *worker.Message {
	sys := m.Attributes
	rc, _ := strconv.Atoi(sys[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	wm := &worker.Message{
		ID:           deref(m.MessageId),
		Queue:        s.name,
		Body:         []byte(deref(m.Body)),
		ReceiveCount: rc,
		// SQS has one count: every receive counts, a snooze included.
		Attempts:    rc,
		MaxAttempts: maxReceive,
		GroupID:     sys[string(types.MessageSystemAttributeNameMessageGroupId)],
		Receipt:     deref(m.ReceiptHandle),
	}
	if ms, err := strconv.ParseInt(sys[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
		wm.SentAt = time.UnixMilli(ms)
	}
	for name, a := range m.MessageAttributes {
		attr := fromSQS(a)
		if s.lift(wm, name, attr) {
			continue
		}
		if wm.Attributes == nil {
			wm.Attributes = make(map[string]worker.Attribute, len(m.MessageAttributes))
		}
		wm.Attributes[name] = attr
	}
	return wm
}

// lift moves a Sluice message option or the trace context into m's fields,
// reporting whether it did; a malformed one stays an ordinary attribute.
func (s *Source) lift(m *worker.Message, name string, a worker.Attribute) bool {
	switch name {
	case attrPriority, attrMaxAttempts:
		if baseType(a.Type) != "Number" {
			return false
		}
		n, err := strconv.Atoi(strings.TrimSpace(a.Value))
		if err != nil {
			return false
		}
		if name == attrPriority {
			m.Priority = n
		} else {
			m.MaxAttempts = n // the message's own limit overrides the queue's
		}
		return true
	case attrCorrelationID:
		if baseType(a.Type) != "String" {
			return false
		}
		m.CorrelationID = a.Value
		return true
	case attrTraceParent:
		if baseType(a.Type) != "String" {
			return false
		}
		m.TraceContext = a.Value
		return true
	}
	return false
}

// baseType is an attribute type without its custom label ("Number.int" is Number).
func baseType(t string) string {
	b, _, _ := strings.Cut(t, ".")
	return b
}

func fromSQS(a types.MessageAttributeValue) worker.Attribute {
	t := deref(a.DataType)
	if baseType(t) == "Binary" {
		return worker.Attribute{Type: t, Binary: a.BinaryValue}
	}
	return worker.Attribute{Type: t, Value: deref(a.StringValue)}
}

func toSQS(a worker.Attribute) types.MessageAttributeValue {
	if baseType(a.Type) == "Binary" {
		return types.MessageAttributeValue{DataType: aws.String(a.Type), BinaryValue: a.Binary}
	}
	return types.MessageAttributeValue{DataType: aws.String(a.Type), StringValue: aws.String(a.Value)}
}

// Settle applies an outcome (see the package doc for how each is emulated):
//   - KindAck: DeleteMessage.
//   - KindNack: ChangeMessageVisibility to o.Delay when positive, else to
//     Config.Backoff's delay after m.ReceiveCount receives. The reason is
//     not kept: SQS has no place for it.
//   - KindSnooze: ChangeMessageVisibility to o.Delay, 0 when negative (the
//     next receive counts).
//   - KindRelease: ChangeMessageVisibility to 0 (the next receive counts).
//   - KindDeadLetter: send a copy to the dead-letter queue, then DeleteMessage
//     (not atomic).
//
// A lease that ended answers an error matching worker.ErrLeaseLost (but an
// ack of a stale receipt on a standard queue succeeds without effect: SQS
// does not tell).
func (s *Source) Settle(ctx context.Context, m *worker.Message, o worker.Outcome) error {
	if m == nil || m.Receipt == "" {
		return errors.New("sqssource: settle of a message without a receipt handle: settle the *worker.Message Receive returned")
	}
	switch o.Kind {
	case worker.KindAck:
		return s.delete(ctx, m)
	case worker.KindNack:
		d := o.Delay
		if d <= 0 {
			d = s.cfg.Backoff.Delay(m.ReceiveCount, s.cfg.Rand())
		}
		return s.changeVisibility(ctx, m, d, "nack")
	case worker.KindSnooze:
		return s.changeVisibility(ctx, m, max(o.Delay, 0), "snooze")
	case worker.KindRelease:
		return s.changeVisibility(ctx, m, 0, "release")
	case worker.KindDeadLetter:
		return s.deadLetter(ctx, m, o.Reason)
	}
	return fmt.Errorf("sqssource: unknown outcome kind %d: use one of worker.KindAck, KindNack, KindSnooze, KindRelease, KindDeadLetter", o.Kind)
}

func (s *Source) delete(ctx context.Context, m *worker.Message) error {
	_, err := s.c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &s.url, ReceiptHandle: &m.Receipt})
	if err != nil {
		return leaseError(fmt.Sprintf("delete message %s from %s", m.ID, s.name), err)
	}
	return nil
}

// changeVisibility makes m visible again d from now (whole seconds, rounded
// up; at most 12 h).
func (s *Source) changeVisibility(ctx context.Context, m *worker.Message, d time.Duration, what string) error {
	if d > MaxVisibility {
		return fmt.Errorf("sqssource: %s of message %s for %v: SQS's visibility timeout is at most 12 h", what, m.ID, d)
	}
	_, err := s.c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: &s.url, ReceiptHandle: &m.Receipt, VisibilityTimeout: seconds(d)})
	if err != nil {
		return leaseError(fmt.Sprintf("%s of message %s on %s (visibility %v)", what, m.ID, s.name, roundUp(d)), err)
	}
	return nil
}

// Extend sets the visibility timeout of msgs to lease (rounded up to whole
// seconds, at most 12 h) with ChangeMessageVisibilityBatch, 10 entries a
// call. errs has one entry per message (worker.ErrLeaseLost for a lease that
// ended); a call that fails as a whole fails its entries with its error, and
// err is set only when every call failed (or the arguments are wrong).
func (s *Source) Extend(ctx context.Context, msgs []*worker.Message, lease time.Duration) ([]error, error) {
	if lease > MaxVisibility {
		return nil, fmt.Errorf("sqssource: extend to %v: SQS's visibility timeout is at most 12 h", lease)
	}
	errs := make([]error, len(msgs))
	var callErr error
	calls, failed := 0, 0
	for start := 0; start < len(msgs); start += maxBatch {
		chunk := msgs[start:min(start+maxBatch, len(msgs))]
		entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(chunk))
		for i, m := range chunk {
			entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{
				Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(m.Receipt), VisibilityTimeout: seconds(lease)}
		}
		calls++
		out, err := s.c.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &s.url, Entries: entries})
		if err != nil {
			failed++
			err = fmt.Errorf("sqssource: extend %d leases on %s: %w", len(chunk), s.name, err)
			if callErr == nil {
				callErr = err
			}
			for i := range chunk {
				errs[start+i] = err
			}
			continue
		}
		done := make([]bool, len(chunk))
		for _, ok := range out.Successful {
			if i, err := strconv.Atoi(deref(ok.Id)); err == nil && i >= 0 && i < len(chunk) {
				done[i] = true
			}
		}
		for _, f := range out.Failed {
			if i, err := strconv.Atoi(deref(f.Id)); err == nil && i >= 0 && i < len(chunk) {
				done[i] = true
				errs[start+i] = entryError(fmt.Sprintf("extend the lease of message %s on %s", chunk[i].ID, s.name), f)
			}
		}
		for i, ok := range done {
			if !ok {
				errs[start+i] = fmt.Errorf("sqssource: extend the lease of message %s on %s: the answer has no entry for it", chunk[i].ID, s.name)
			}
		}
	}
	if calls > 0 && failed == calls {
		return errs, callErr
	}
	return errs, nil
}

// Backlog is the queue's ApproximateNumberOfMessages (visible now).
func (s *Source) Backlog(ctx context.Context) (int64, error) {
	out, err := s.c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &s.url,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil {
		return 0, fmt.Errorf("sqssource: backlog of %s: %w", s.name, err)
	}
	v := out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)]
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("sqssource: backlog of %s: ApproximateNumberOfMessages %q is not a number", s.name, v)
	}
	return n, nil
}
