package model

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The Sluice message options: message attributes named "Sluice.*". On the
// wire they are ordinary attributes (stored and returned byte for byte,
// counted in the 10, included in the MD5); plan.Send reads them. An unknown
// Sluice.* name, a wrong type or an out-of-range value fails its entry with
// ErrInvalidParameterValue.
const (
	// MsgAttrPriority (Number, -100..100, default 0): higher is served
	// first; below 0 is low priority for LowPriorityMaxDepth. FIFO queues
	// refuse it.
	MsgAttrPriority = "Sluice.Priority"
	// MsgAttrMaxAttempts (Number, 1..1000): overrides the queue's
	// maxReceiveCount for this message; refused on a queue without a
	// RedrivePolicy.
	MsgAttrMaxAttempts = "Sluice.MaxAttempts"
	// MsgAttrCorrelationID (String, up to 128 characters): carried with the
	// message, through a dead-letter queue and a replay.
	MsgAttrCorrelationID = "Sluice.CorrelationId"
	// MsgAttrTimeToLive (Number, 1..1209600 seconds): the message expires
	// that long after its send (config_ttl.go), in place of its queue's
	// MessageTimeToLive; refused when longer than the queue's
	// MessageRetentionPeriod, or not longer than the message's delay.
	MsgAttrTimeToLive = "Sluice.TimeToLive"
	// MsgAttrTraceParent is the W3C trace context attribute that
	// OpenTelemetry's SQS instrumentations inject (not a Sluice.* name; read
	// as the native envelope's trace context).
	MsgAttrTraceParent = "traceparent"
)

// The priority range.
const (
	MinPriority = -100
	MaxPriority = 100
)

// MaxCorrelationIDBytes bounds Sluice.CorrelationId.
const MaxCorrelationIDBytes = 128

// MessageOptions are the Sluice options of one message, read from its
// Sluice.* attributes once, by the front (ParseMessageOptions), before the
// send reaches a backend; the rules that depend on the queue (a FIFO queue
// takes no priority, Sluice.MaxAttempts needs a RedrivePolicy, a time to
// live within the queue's retention and longer than the message's delay)
// are the planner's (plan.CheckOptions, plan.Send), inside the backend's
// atomic step.
type MessageOptions struct {
	// Priority (MinPriority..MaxPriority) and MaxAttempts (1..1000; 0: the
	// queue's maxReceiveCount) are the values given, 0 when not given or
	// refused.
	Priority    int
	MaxAttempts int
	// TTL is the message's own time to live (Sluice.TimeToLive, 1 s ..
	// MaxTimeToLive), 0 when not given or refused: the queue's
	// MessageTimeToLive applies then.
	TTL time.Duration
	// PriorityGiven, MaxAttemptsGiven and TTLGiven report that the message
	// has the attribute, whether or not its value is valid.
	PriorityGiven, MaxAttemptsGiven, TTLGiven bool
	// Err is why the attributes are refused (an unknown Sluice.* name, a
	// wrong type, a value out of range), nil when they are not. It fails
	// the message's entry, after the queue's own rules.
	Err error
	// Parsed is set by ParseMessageOptions: options never parsed (a send
	// that did not come through the front) are parsed by the planner.
	Parsed bool
}

// ParseMessageOptions reads the Sluice.* attributes of a message: their
// names, types and ranges (the first refusal, by attribute name, is Err).
func ParseMessageOptions(attrs map[string]MessageAttribute) MessageOptions {
	o := MessageOptions{Parsed: true}
	names := make([]string, 0, 2)
	for name := range attrs {
		if len(name) >= 7 && strings.EqualFold(name[:7], "Sluice.") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		a := attrs[name]
		var err error
		switch name {
		case MsgAttrPriority:
			o.PriorityGiven = true
			o.Priority, err = OptInt(name, a, MinPriority, MaxPriority)
		case MsgAttrMaxAttempts:
			o.MaxAttemptsGiven = true
			o.MaxAttempts, err = OptInt(name, a, 1, 1000)
		case MsgAttrTimeToLive:
			o.TTLGiven = true
			var n int
			n, err = OptInt(name, a, 1, MaxTimeToLiveSeconds)
			o.TTL = time.Duration(n) * time.Second
		case MsgAttrCorrelationID:
			if BaseType(a.DataType) != "String" {
				err = InvalidParameterError(a.DataType, MsgAttrCorrelationID+" DataType", "must be String.")
			} else if len(a.StringValue) > MaxCorrelationIDBytes {
				err = InvalidParameterError(len(a.StringValue), MsgAttrCorrelationID+" length", fmt.Sprintf("must be at most %d bytes.", MaxCorrelationIDBytes))
			}
		default:
			err = Errorf(ErrInvalidParameterValue, "Message attribute name '%s' is reserved: the Sluice.* attributes are %s, %s, %s and %s.",
				name, MsgAttrPriority, MsgAttrMaxAttempts, MsgAttrCorrelationID, MsgAttrTimeToLive)
		}
		if err != nil && o.Err == nil {
			o.Err = err
		}
	}
	return o
}

// OptInt reads a Number attribute named name as an integer in lo..hi.
func OptInt(name string, a MessageAttribute, lo, hi int) (int, error) {
	if BaseType(a.DataType) != "Number" {
		return 0, InvalidParameterError(a.DataType, name+" DataType", "must be Number.")
	}
	n, err := strconv.Atoi(strings.TrimSpace(a.StringValue))
	if err != nil || n < lo || n > hi {
		return 0, InvalidParameterError(a.StringValue, name, fmt.Sprintf("must be an integer from %d to %d.", lo, hi))
	}
	return n, nil
}

// DepthError is a send refused by backpressure: the queue's depth plus the
// send would pass its MaxDepth (or, for a send holding a low-priority
// message, its LowPriorityMaxDepth). errors.Is(err, ErrThrottled) holds;
// SQS answers RequestThrottled, which the AWS SDKs retry as throttling, and
// the native API 429 with Retry-After.
type DepthError struct {
	Queue string
	// Depth is the queue's depth when the send was refused; Limit the limit
	// it would pass; LowPriority whether that is LowPriorityMaxDepth.
	Depth, Limit int64
	LowPriority  bool
}

func (e *DepthError) Error() string {
	limit := AttrMaxDepth
	if e.LowPriority {
		limit = AttrLowPriorityMaxDepth + " (the send holds a message of priority below 0)"
	}
	return fmt.Sprintf("Queue %s is full: its depth is %d and its %s is %d. Retry later, or consume faster.", e.Queue, e.Depth, limit, e.Limit)
}

// Unwrap returns ErrThrottled.
func (e *DepthError) Unwrap() error { return ErrThrottled }

// Reason names the refusal for counters: "max_depth" or "low_priority_max_depth".
func (e *DepthError) Reason() string {
	if e.LowPriority {
		return "low_priority_max_depth"
	}
	return "max_depth"
}
