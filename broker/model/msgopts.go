package model

import (
	"fmt"
	"strconv"
	"strings"
)

// The Sluice message options: message attributes named "Sluice.*". On the
// wire they are ordinary attributes (stored and returned byte for byte,
// counted in the 10, included in the MD5); PlanSend reads them. An unknown
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
// attributes.
type MessageOptions struct {
	Priority    int
	MaxAttempts int
}

// ParseMessageOptions reads the Sluice.* attributes of a message bound for a
// queue with settings c.
func ParseMessageOptions(c QueueConfig, attrs map[string]MessageAttribute) (MessageOptions, error) {
	var o MessageOptions
	for name, a := range attrs {
		if len(name) < 7 || !strings.EqualFold(name[:7], "Sluice.") {
			continue
		}
		var err error
		switch name {
		case MsgAttrPriority:
			if c.Fifo {
				return o, InvalidParameterError(a.StringValue, MsgAttrPriority, "FIFO queues keep their group order and take no priority.")
			}
			o.Priority, err = OptInt(name, a, MinPriority, MaxPriority)
		case MsgAttrMaxAttempts:
			if c.Redrive == nil {
				return o, InvalidParameterError(a.StringValue, MsgAttrMaxAttempts, "the queue has no RedrivePolicy (no dead-letter queue to move the message to).")
			}
			o.MaxAttempts, err = OptInt(name, a, 1, 1000)
		case MsgAttrCorrelationID:
			if BaseType(a.DataType) != "String" {
				return o, InvalidParameterError(a.DataType, MsgAttrCorrelationID+" DataType", "must be String.")
			}
			if len(a.StringValue) > MaxCorrelationIDBytes {
				return o, InvalidParameterError(len(a.StringValue), MsgAttrCorrelationID+" length", fmt.Sprintf("must be at most %d bytes.", MaxCorrelationIDBytes))
			}
		default:
			return o, Errorf(ErrInvalidParameterValue, "Message attribute name '%s' is reserved: the Sluice.* attributes are %s, %s and %s.",
				name, MsgAttrPriority, MsgAttrMaxAttempts, MsgAttrCorrelationID)
		}
		if err != nil {
			return o, err
		}
	}
	return o, nil
}

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
