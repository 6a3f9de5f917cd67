package plan

import (
	"fmt"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// The planners: pure functions a backend calls inside its own atomic step,
// where a rule needs the queue's settings or state as the backend reads them.
// Each rule and its error text is here once; see Backend.

// SendPlan is the plan of one entry of a send.
type SendPlan struct {
	// Err is the entry's own failure (nothing is stored for it); the other
	// fields are set only when Err is nil.
	Err error
	// MessageID is the new message's id.
	MessageID string
	// Delay is the entry's delay: its own, or the queue's DelaySeconds (always
	// the queue's on a FIFO queue).
	Delay time.Duration
	// DedupKey is the key of the dedup window (DedupKey); "" when the send
	// is not deduplicated (a standard queue's send without a dedup id).
	DedupKey string
	// DedupID is the resolved dedup id (explicit, or content-based on a
	// FIFO queue), stored with the message.
	DedupID string
	// Priority and MaxAttempts are the message's Sluice options
	// (SendEntry.Options, checked by CheckOptions), stored with it.
	Priority, MaxAttempts int
	// TTL is the message's time to live (MessageTTL: its own
	// Sluice.TimeToLive, else the queue's MessageTimeToLive; 0: none),
	// always longer than Delay. The backend stores the expiry, the send's
	// instant plus TTL, with the message.
	TTL time.Duration
}

// Send validates the entries of one send to queue (its name, for the
// refusal's text) against the queue's settings and its depth (QueueStats.Depth)
// and resolves each one's delay, message id, Sluice options and dedup id
// and key. An error concerns the whole call (a missing FIFO parameter, or
// backpressure: a *DepthError; nothing is stored); a failing entry has its
// own Err.
func Send(c model.QueueConfig, queue string, depth int64, entries []model.SendEntry) ([]SendPlan, error) {
	if err := ValidateSendGroupParams(c, entries); err != nil {
		return nil, err
	}
	plans := make([]SendPlan, len(entries))
	n, low := 0, 0
	for i := range entries {
		e := &entries[i]
		if err := model.ValidateSendEntry(c, e); err != nil {
			plans[i].Err = err
			continue
		}
		opts := e.Options
		if !opts.Parsed {
			// The front parses every send's options once (as does
			// postgres.SendTx); a caller of a backend that bypassed both
			// still gets the same rules.
			opts = model.ParseMessageOptions(e.Attributes)
		}
		if err := CheckOptions(c, e.Attributes, opts); err != nil {
			plans[i].Err = err
			continue
		}
		delay, ttl := model.MessageDelay(c, e), MessageTTL(c, opts)
		if err := checkDelayTTL(opts, delay, ttl); err != nil {
			plans[i].Err = err
			continue
		}
		p := &plans[i]
		if p.MessageID = e.MessageID; p.MessageID == "" {
			p.MessageID = model.NewMessageID()
		}
		p.Delay, p.TTL = delay, ttl
		p.Priority, p.MaxAttempts = opts.Priority, opts.MaxAttempts
		if p.DedupID = DedupID(c, e); p.DedupID != "" {
			p.DedupKey = DedupKey(c, e.GroupID, p.DedupID)
		}
		n++
		if p.Priority < 0 {
			low++
		}
	}
	if err := AdmitSend(c, queue, depth, n, low); err != nil {
		return nil, err
	}
	return plans, nil
}

// ReceivePlan is a receive with the queue's defaults applied.
type ReceivePlan struct {
	// Max is the number of messages asked for (1..10).
	Max int
	// Visibility is the lease length; Wait the long-poll wait.
	Visibility, Wait time.Duration
	// AttemptID is the FIFO ReceiveRequestAttemptId ("" on a standard queue,
	// where it is ignored).
	AttemptID string
}

// Receive applies the queue's defaults to req (MaxMessages 0 means 1)
// and checks its ranges and the format of its ReceiveRequestAttemptId (FIFO
// queues only).
func Receive(c model.QueueConfig, req model.ReceiveRequest) (ReceivePlan, error) {
	p := ReceivePlan{Max: max(req.MaxMessages, 1), Visibility: c.VisibilityTimeout, Wait: c.ReceiveWaitTime}
	limit := model.MaxReceiveMessages
	if req.Dispatch {
		limit = model.MaxDispatchMessages
	}
	if req.MaxMessages < 0 || req.MaxMessages > limit {
		return ReceivePlan{}, model.InvalidParameterError(req.MaxMessages, "MaxNumberOfMessages", "Must be between 1 and 10, if provided.")
	}
	if req.Visibility != nil {
		if err := model.ValidateVisibility(*req.Visibility); err != nil {
			return ReceivePlan{}, err
		}
		p.Visibility = *req.Visibility
	}
	if req.WaitTime != nil {
		if w := *req.WaitTime; w < 0 || w > model.MaxWaitTime {
			return ReceivePlan{}, model.InvalidParameterError(int64(w/time.Second), "WaitTimeSeconds", "Must be >= 0 and <= 20, if provided.")
		}
		p.Wait = *req.WaitTime
	}
	if c.Fifo && req.AttemptID != "" {
		if err := model.ValidateFifoID("ReceiveRequestAttemptId", req.AttemptID); err != nil {
			return ReceivePlan{}, err
		}
		p.AttemptID = req.AttemptID
	}
	return p, nil
}

// DeadLetter is what a message keeps and what it becomes when a receive past
// its queue's maxReceiveCount moves it to the dead-letter queue (the
// dead-letter rule, the same in every backend).
type DeadLetterPlan struct {
	// DedupID is the message's dedup id in a FIFO dead-letter queue: its
	// message id, so that unrelated messages that shared a dedup id both
	// survive ("" when the dead-letter queue is standard: kept as it was).
	DedupID string
	// NewSequence: a FIFO dead-letter queue gives it a new sequence number,
	// after every message already there.
	NewSequence bool
	// SentAt is its SentAt there: kept on a standard dead-letter queue (it
	// expires by its original send time under the new queue's retention);
	// restarted at now on a FIFO one (SQS resets a FIFO dead letter's enqueue
	// timestamp).
	SentAt time.Time
}

// DeadLetter applies the dead-letter rule to a message (its id and
// SentAt) moving into a FIFO (dlqFifo) or standard dead-letter queue at now.
// The message keeps its id, body, attributes, receive count, attempts, first
// and last receive time and failure reason, and records its source queue
// (Message.DeadLetterSource).
func DeadLetter(messageID string, sentAt time.Time, dlqFifo bool, now time.Time) DeadLetterPlan {
	if !dlqFifo {
		return DeadLetterPlan{SentAt: sentAt}
	}
	return DeadLetterPlan{DedupID: messageID, NewSequence: true, SentAt: now}
}

// CheckOptions is the part of a message's Sluice options' rules that
// depends on the queue it is sent to (settings c): a FIFO queue keeps its
// group order and takes no Sluice.Priority, Sluice.MaxAttempts needs a
// RedrivePolicy (a dead-letter queue to move the message to), and a
// Sluice.TimeToLive is not longer than the queue's MessageRetentionPeriod
// (the retention would delete the message first). Then the options' own
// refusal (o.Err, from model.ParseMessageOptions) applies. attrs are the
// message's attributes, for the errors' texts.
func CheckOptions(c model.QueueConfig, attrs map[string]model.MessageAttribute, o model.MessageOptions) error {
	if c.Fifo && o.PriorityGiven {
		return model.InvalidParameterError(attrs[model.MsgAttrPriority].StringValue, model.MsgAttrPriority, "FIFO queues keep their group order and take no priority.")
	}
	if c.Redrive == nil && o.MaxAttemptsGiven {
		return model.InvalidParameterError(attrs[model.MsgAttrMaxAttempts].StringValue, model.MsgAttrMaxAttempts, "the queue has no RedrivePolicy (no dead-letter queue to move the message to).")
	}
	if o.Err == nil && o.TTL > c.Retention {
		return model.InvalidParameterError(attrs[model.MsgAttrTimeToLive].StringValue, model.MsgAttrTimeToLive,
			fmt.Sprintf("must not be longer than the queue's MessageRetentionPeriod (%d seconds), which would delete the message first.", int64(c.Retention/time.Second)))
	}
	return o.Err
}

// MessageTTL is the time to live of a message with options o sent to a
// queue with settings c: its own Sluice.TimeToLive, else the queue's
// MessageTimeToLive (0: none).
func MessageTTL(c model.QueueConfig, o model.MessageOptions) time.Duration {
	if o.TTL > 0 {
		return o.TTL
	}
	return c.TimeToLive
}

// checkDelayTTL refuses a message whose delay (its own DelaySeconds or
// deliverAt, else its queue's DelaySeconds) is not shorter than its time to
// live: it would expire before it could be received. The queue's own pair
// is checked when set (model.QueueConfig's rules), so the refusal names the
// message's own setting.
func checkDelayTTL(o model.MessageOptions, delay, ttl time.Duration) error {
	if ttl <= 0 || delay < ttl {
		return nil
	}
	if o.TTL > 0 {
		return model.InvalidParameterError(int64(ttl/time.Second), model.MsgAttrTimeToLive,
			fmt.Sprintf("must be longer than the message's delay (%d seconds): it would expire before it is visible.", int64(delay/time.Second)))
	}
	return model.InvalidParameterError(int64(delay/time.Second), "DelaySeconds",
		fmt.Sprintf("must be shorter than the queue's MessageTimeToLive (%d seconds): the message would expire before it is visible.", int64(ttl/time.Second)))
}
