package model

import (
	"strconv"
	"time"
)

// Envelope is a message to send as the native API takes it: the SQS
// message with Sluice's options as fields. EnvelopeEntry turns it into a
// SendEntry: the one home of that rule, shared by the native HTTP API
// (api/native) and the transactional sender (client/pgtx), so both answer
// the same errors. nil pointers are fields not given.
type Envelope struct {
	// Body is required.
	Body *string
	// Attributes are the user message attributes, already decoded.
	Attributes map[string]MessageAttribute
	// Priority becomes Sluice.Priority, MaxAttempts Sluice.MaxAttempts,
	// TTLSeconds Sluice.TimeToLive, CorrelationID Sluice.CorrelationId,
	// TraceContext traceparent: each is given as a field or as that
	// attribute, not both. Their ranges are plan.Send's
	// (ParseMessageOptions) to check, as for any message.
	Priority, MaxAttempts, TTLSeconds *int
	CorrelationID, TraceContext       *string
	// DelaySeconds (0 up to MaxRetention in seconds) and DeliverAt (a time
	// in the past is now) say when the message becomes visible; at most one.
	DelaySeconds *int64
	DeliverAt    *time.Time
	// GroupID and DedupID are the MessageGroupId (a FIFO group or a fair
	// queue's tenant) and the MessageDeduplicationId.
	GroupID, DedupID string
}

// EnvelopeField reports whether a message attribute is one an envelope
// gives as its own field (Priority, MaxAttempts, TTLSeconds, CorrelationID,
// TraceContext): the native and stream APIs answer it there, not among the
// attributes.
func EnvelopeField(name string) bool {
	switch name {
	case MsgAttrPriority, MsgAttrMaxAttempts, MsgAttrTimeToLive, MsgAttrCorrelationID, MsgAttrTraceParent:
		return true
	}
	return false
}

// EnvelopeEntry converts e into a SendEntry (LongDelay set: the native
// delays run up to the queue's retention period). field names the envelope
// in errors: "" for a single send, "messages[2]" in a batch, so that an
// error names "messages[2].body". now turns DeliverAt into a delay (rounded
// up to the second: never early). e.Attributes is not modified.
func EnvelopeEntry(field string, e *Envelope, now time.Time) (SendEntry, error) {
	at := func(name string) string {
		if field == "" {
			return name
		}
		return field + "." + name
	}
	if e.Body == nil {
		return SendEntry{}, Errorf(ErrMissingParameter, "Field %s is required.", at("body"))
	}
	attrs, copied := e.Attributes, false
	set := func(fieldName, attr, typ, value string) error {
		if _, dup := attrs[attr]; dup {
			return Errorf(ErrInvalidRequest, "Give %s either as field %s or as attribute %s, not both.", fieldName, at(fieldName), attr)
		}
		if !copied {
			m := make(map[string]MessageAttribute, len(attrs)+1)
			for k, v := range attrs {
				m[k] = v
			}
			attrs, copied = m, true
		}
		attrs[attr] = MessageAttribute{DataType: typ, StringValue: value}
		return nil
	}
	if e.Priority != nil {
		if err := set("priority", MsgAttrPriority, "Number", strconv.Itoa(*e.Priority)); err != nil {
			return SendEntry{}, err
		}
	}
	if e.MaxAttempts != nil {
		if err := set("maxAttempts", MsgAttrMaxAttempts, "Number", strconv.Itoa(*e.MaxAttempts)); err != nil {
			return SendEntry{}, err
		}
	}
	if e.TTLSeconds != nil {
		if err := set("ttlSeconds", MsgAttrTimeToLive, "Number", strconv.Itoa(*e.TTLSeconds)); err != nil {
			return SendEntry{}, err
		}
	}
	if e.CorrelationID != nil {
		if err := set("correlationId", MsgAttrCorrelationID, "String", *e.CorrelationID); err != nil {
			return SendEntry{}, err
		}
	}
	if e.TraceContext != nil {
		if err := set("traceContext", MsgAttrTraceParent, "String", *e.TraceContext); err != nil {
			return SendEntry{}, err
		}
	}
	se := SendEntry{Body: *e.Body, Attributes: attrs, GroupID: e.GroupID, DedupID: e.DedupID, LongDelay: true}
	switch {
	case e.DelaySeconds != nil && e.DeliverAt != nil:
		return SendEntry{}, Errorf(ErrInvalidRequest, "Give at most one of %s and %s.", at("delaySeconds"), at("deliverAt"))
	case e.DelaySeconds != nil:
		if *e.DelaySeconds < 0 || *e.DelaySeconds > int64(MaxRetention/time.Second) {
			return SendEntry{}, Errorf(ErrInvalidParameterValue, "Field %s must be from 0 to the queue's retention period in seconds, not %d.", at("delaySeconds"), *e.DelaySeconds)
		}
		d := time.Duration(*e.DelaySeconds) * time.Second
		se.Delay = &d
	case e.DeliverAt != nil:
		// A time in the past is "now". A delay is kept to the second above
		// (never early), as delays are in whole seconds elsewhere.
		// Sub saturates at the largest Duration: refuse a time past the
		// longest retention here, before the rounding could overflow.
		d := max(e.DeliverAt.Sub(now), 0)
		if d >= MaxRetention {
			return SendEntry{}, Errorf(ErrInvalidParameterValue, "Field %s must be within the queue's retention period from now, not %s.", at("deliverAt"), e.DeliverAt.UTC().Format(time.RFC3339))
		}
		if r := d % time.Second; r != 0 {
			d += time.Second - r
		}
		se.Delay = &d
	}
	return se, nil
}
