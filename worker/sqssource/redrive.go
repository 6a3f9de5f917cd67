package sqssource

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicemq/sluice/worker"
)

// DeadLetterReasonAttribute is the message attribute (String) a dead-letter
// send adds with the outcome's reason. It is not a Sluice.* name, which
// Sluice reserves for its message options.
const DeadLetterReasonAttribute = "DeadLetterReason"

// maxAttributes is SQS's most message attributes on a message.
const maxAttributes = 10

// reserveLease is the visibility a dead-letter sets before its send: it
// proves the lease is still held (a lost one fails here, before any copy
// exists) and keeps the message leased through the send and the delete.
const reserveLease = 30 * time.Second

// redriveRetry is how long after a failed read of the RedrivePolicy the next
// need of it reads again (meanwhile MaxAttempts is 0, and a dead-letter
// without Config.DeadLetterQueueURL fails with the read's error).
const redriveRetry = time.Minute

// redrive is what the source knows of its queue's RedrivePolicy, read once
// and kept for the Source's life (a changed policy is seen after a restart).
type redrive struct {
	// maxReceiveCount is 0 when the queue has no RedrivePolicy.
	maxReceiveCount int
	// dlqURL is the dead-letter queue (Config.DeadLetterQueueURL, else the
	// policy's target resolved with GetQueueUrl); "" when there is none.
	dlqURL string
}

// loadRedrive returns the cached RedrivePolicy, reading it on first need
// (and again redriveRetry after a failed read). Two goroutines that find it
// missing at once both read it: the reads are idempotent, the last one
// stays.
func (s *Source) loadRedrive(ctx context.Context) (*redrive, error) {
	s.mu.Lock()
	rd, failedAt := s.redrive, s.redriveErr
	s.mu.Unlock()
	if rd != nil {
		return rd, nil
	}
	if !failedAt.IsZero() && s.now().Sub(failedAt) < redriveRetry {
		return nil, fmt.Errorf("sqssource: the RedrivePolicy of %s is unknown: its last read failed less than %v ago", s.name, redriveRetry)
	}
	rd, err := s.readRedrive(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil { // a cancelled caller says nothing of the queue
			s.redriveErr = s.now()
			s.log.Warn("sqssource: cannot read the queue's RedrivePolicy; MaxAttempts stays 0 and dead-lettering needs Config.DeadLetterQueueURL",
				"error", err, "retry_in", redriveRetry)
		}
		return nil, err
	}
	s.redrive, s.redriveErr = rd, time.Time{}
	return rd, nil
}

// readRedrive reads the RedrivePolicy and resolves its target's URL.
func (s *Source) readRedrive(ctx context.Context) (*redrive, error) {
	out, err := s.c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &s.url,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameRedrivePolicy}})
	if err != nil {
		return nil, fmt.Errorf("sqssource: read the RedrivePolicy of %s (GetQueueAttributes): %w", s.name, err)
	}
	rd := &redrive{dlqURL: s.cfg.DeadLetterQueueURL}
	policy := out.Attributes[string(types.QueueAttributeNameRedrivePolicy)]
	if policy == "" {
		return rd, nil
	}
	arn, maxReceive, err := parseRedrivePolicy(policy)
	if err != nil {
		return nil, fmt.Errorf("sqssource: the RedrivePolicy of %s: %w", s.name, err)
	}
	rd.maxReceiveCount = maxReceive
	if rd.dlqURL != "" {
		return rd, nil
	}
	account, name, err := parseQueueARN(arn)
	if err != nil {
		return nil, fmt.Errorf("sqssource: the RedrivePolicy of %s: %w", s.name, err)
	}
	in := &sqs.GetQueueUrlInput{QueueName: &name}
	if account != "" {
		in.QueueOwnerAWSAccountId = &account
	}
	got, err := s.c.GetQueueUrl(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("sqssource: resolve the dead-letter queue %s of %s (GetQueueUrl): %w; or set Config.DeadLetterQueueURL", arn, s.name, err)
	}
	rd.dlqURL = deref(got.QueueUrl)
	return rd, nil
}

// parseRedrivePolicy reads a RedrivePolicy value: its deadLetterTargetArn
// and maxReceiveCount (a JSON number or string, as SQS accepts both).
func parseRedrivePolicy(v string) (arn string, maxReceive int, err error) {
	var p struct {
		Target string          `json:"deadLetterTargetArn"`
		Max    json.RawMessage `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(v), &p); err != nil {
		return "", 0, fmt.Errorf("%q is not JSON: %v", v, err)
	}
	if p.Target == "" {
		return "", 0, fmt.Errorf("%q has no deadLetterTargetArn", v)
	}
	raw := strings.Trim(string(p.Max), `"`)
	maxReceive, err = strconv.Atoi(raw)
	if err != nil || maxReceive < 1 {
		return "", 0, fmt.Errorf("%q has no positive maxReceiveCount", v)
	}
	return p.Target, maxReceive, nil
}

// parseQueueARN splits arn:partition:sqs:region:account:name.
func parseQueueARN(arn string) (account, name string, err error) {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[5] == "" {
		return "", "", fmt.Errorf("deadLetterTargetArn %q is not a queue ARN (arn:partition:sqs:region:account:name)", arn)
	}
	return parts[4], parts[5], nil
}

// deadLetterQueue is where a dead-letter goes: Config.DeadLetterQueueURL, or
// the RedrivePolicy's target.
func (s *Source) deadLetterQueue(ctx context.Context) (string, error) {
	if s.cfg.DeadLetterQueueURL != "" {
		return s.cfg.DeadLetterQueueURL, nil
	}
	rd, err := s.loadRedrive(ctx)
	if err != nil {
		return "", err
	}
	if rd.dlqURL == "" {
		return "", fmt.Errorf("%w (queue %s)", ErrNoDeadLetterQueue, s.name)
	}
	return rd.dlqURL, nil
}

// deadLetter emulates "dead-letter now" (SQS has no such call):
//
//  1. ChangeMessageVisibility to reserveLease: a lost lease fails here,
//     before a copy exists, and the lease cannot lapse during 2 and 3.
//  2. SendMessage of a copy to the dead-letter queue: the body, the
//     attributes (dead-letter attributes below) and the reason; on a FIFO
//     dead-letter queue, the message's group (its id when it has none) and
//     its id as the deduplication id, so a retried send is not doubled
//     within SQS's 5-minute deduplication window.
//  3. DeleteMessage from the source queue.
//
// It is not atomic: a crash or failure between 2 and 3 leaves the message
// in both queues (the source's copy comes back when its lease ends, and a
// later dead-letter of it sends a second copy past the deduplication window).
func (s *Source) deadLetter(ctx context.Context, m *worker.Message, reason string) error {
	dlq, err := s.deadLetterQueue(ctx)
	if err != nil {
		return fmt.Errorf("sqssource: dead-letter message %s: %w; the message comes back when its lease ends", m.ID, err)
	}
	if err := s.changeVisibility(ctx, m, reserveLease, "dead-letter (reserve the lease)"); err != nil {
		return err
	}
	in := &sqs.SendMessageInput{QueueUrl: &dlq, MessageBody: aws.String(string(m.Body)),
		MessageAttributes: s.deadLetterAttributes(m, reason, isFifo(dlq))}
	if isFifo(dlq) {
		group := m.GroupID
		if group == "" {
			group = m.ID
		}
		in.MessageGroupId, in.MessageDeduplicationId = &group, aws.String(m.ID)
	}
	if _, err := s.c.SendMessage(ctx, in); err != nil {
		return fmt.Errorf("sqssource: dead-letter message %s: send to %s: %w; the message stays in %s and comes back when its lease ends", m.ID, dlq, err, s.name)
	}
	if err := s.delete(ctx, m); err != nil {
		return fmt.Errorf("sqssource: dead-letter message %s: sent to %s, but %w: it is now in both queues", m.ID, dlq, err)
	}
	return nil
}

// deadLetterAttributes are the attributes of m's dead-letter copy: its own,
// with the lifted fields put back (Sluice.CorrelationId, traceparent,
// Sluice.Priority unless the dead-letter queue is FIFO, which refuses
// priorities), without Sluice.MaxAttempts (an attempt limit of the source
// queue; Sluice refuses it on a queue without a RedrivePolicy, as a
// dead-letter queue usually is) and Sluice.TimeToLive (a dead letter leaves
// its time to live behind, as Sluice's own dead-letter moves do; the copy
// is a new send, which would expire again), plus DeadLetterReasonAttribute. When the
// copy already has SQS's 10 attributes, the reason is dropped (the
// message's own attributes are what a redrive replays) and logged at Warn.
func (s *Source) deadLetterAttributes(m *worker.Message, reason string, fifo bool) map[string]types.MessageAttributeValue {
	attrs := make(map[string]types.MessageAttributeValue, len(m.Attributes)+4)
	for name, a := range m.Attributes {
		attrs[name] = toSQS(a)
	}
	if m.CorrelationID != "" {
		attrs[attrCorrelationID] = toSQS(worker.Attribute{Type: "String", Value: m.CorrelationID})
	}
	if m.TraceContext != "" {
		attrs[attrTraceParent] = toSQS(worker.Attribute{Type: "String", Value: m.TraceContext})
	}
	if m.Priority != 0 && !fifo {
		attrs[attrPriority] = toSQS(worker.Attribute{Type: "Number", Value: strconv.Itoa(m.Priority)})
	}
	delete(attrs, attrMaxAttempts)
	delete(attrs, attrTimeToLive)
	if reason == "" {
		reason = "dead-lettered by the handler"
	}
	reason = worker.CleanReason(reason)
	if len(attrs) >= maxAttributes {
		s.log.Warn("sqssource: the dead-letter copy has 10 attributes already; its reason is not attached",
			"message_id", m.ID, "reason", reason)
		return attrs
	}
	attrs[DeadLetterReasonAttribute] = toSQS(worker.Attribute{Type: "String", Value: reason})
	return attrs
}

// isFifo reports whether a queue URL names a FIFO queue (its name ends in .fifo).
func isFifo(queueURL string) bool {
	return strings.HasSuffix(strings.TrimSuffix(queueURL, "/"), ".fifo")
}
