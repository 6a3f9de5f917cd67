package native

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/api/native/wire"
	"github.com/sluicemq/sluice/broker/model"
)

// The message envelope: what a send takes (wire.Envelope) and what a
// receive or a browse answers (wire.Message), converted from and to the
// broker's messages. Its fields beyond SQS travel as message attributes (the
// package comment), so a message reads the same from either protocol.

// toBrokerAttrs converts envelope attributes ("" names the field in errors).
func toBrokerAttrs(field string, in map[string]wire.Attribute) (map[string]model.MessageAttribute, error) {
	if in == nil {
		return nil, nil
	}
	out := make(map[string]model.MessageAttribute, len(in))
	for name, a := range in {
		ma := model.MessageAttribute{DataType: a.Type}
		if wire.IsBinary(a.Type) {
			b, err := base64.StdEncoding.DecodeString(string(a.Value))
			if err != nil {
				return nil, errorf(errBadRequest, "%s.%s is Binary: its value must be base64 (standard alphabet, padded).", field, name)
			}
			ma.BinaryValue = b
		} else {
			ma.StringValue = string(a.Value)
		}
		out[name] = ma
	}
	return out, nil
}

// fromBrokerAttrs converts a message's attributes for an answer, leaving
// out the ones the envelope lifts into its own fields.
func fromBrokerAttrs(in map[string]model.MessageAttribute) map[string]wire.Attribute {
	out := make(map[string]wire.Attribute, len(in))
	for name, a := range in {
		if model.EnvelopeField(name) {
			continue
		}
		v := a.StringValue
		if a.IsBinary() {
			v = base64.StdEncoding.EncodeToString(a.BinaryValue)
		}
		out[name] = wire.Attribute{Type: a.DataType, Value: wire.AttributeValue(v)}
	}
	return out
}

// toSendEntry converts an envelope; field names it in errors ("" for a
// single send, "messages[2]" in a batch). The attributes' wire form is this
// package's (base64 for Binary); the rest is model.EnvelopeEntry's rule.
func toSendEntry(field string, e *wire.Envelope, now time.Time) (model.SendEntry, error) {
	if e.Body == nil {
		return model.SendEntry{}, errorf(model.ErrMissingParameter, "Field %s is required.", fieldName(field, "body"))
	}
	attrs, err := toBrokerAttrs(fieldName(field, "attributes"), e.Attributes)
	if err != nil {
		return model.SendEntry{}, err
	}
	return model.EnvelopeEntry(field, &model.Envelope{
		Body: e.Body, Attributes: attrs,
		Priority: e.Priority, MaxAttempts: e.MaxAttempts, TTLSeconds: e.TTLSeconds,
		CorrelationID: e.CorrelationID, TraceContext: e.TraceContext,
		DelaySeconds: e.DelaySeconds, DeliverAt: e.DeliverAt,
		GroupID: e.GroupID, DedupID: e.DedupID,
	}, now)
}

// fieldName is field's member name ("" names the top level).
func fieldName(field, name string) string {
	if field == "" {
		return name
	}
	return field + "." + name
}

// toMessage converts a stored message; redrive is its queue's policy (for
// the attempt limit; nil when the queue has none).
func toMessage(m *model.Message, redrive *model.RedrivePolicy) wire.Message {
	out := wire.Message{
		ID: m.ID, Body: m.Body, Attributes: fromBrokerAttrs(m.Attributes),
		Priority: m.Priority, Attempts: m.Attempts, ReceiveCount: m.ReceiveCount,
		CreatedAt: m.SentAt.UTC(), GroupID: m.GroupID, DedupID: m.DedupID, SequenceNumber: m.SequenceNumber,
		DeadLetterSource: m.DeadLetterSource, FailureReason: m.FailureReason,
		CorrelationID: m.Attributes[model.MsgAttrCorrelationID].StringValue,
		TraceContext:  m.Attributes[model.MsgAttrTraceParent].StringValue,
		TTLSeconds:    attrInt(m.Attributes[model.MsgAttrTimeToLive]),
	}
	own := m.MaxAttempts
	if own == 0 {
		own = attrInt(m.Attributes[model.MsgAttrMaxAttempts])
	}
	out.MaxAttempts = model.MaxAttempts(redrive, own)
	if out.Priority == 0 {
		// The attribute is what was sent; Priority is what the backend
		// derived from it (0 for messages stored before priorities).
		out.Priority = attrInt(m.Attributes[model.MsgAttrPriority])
	}
	if !m.FirstReceiveAt.IsZero() {
		t := m.FirstReceiveAt.UTC()
		out.FirstReceivedAt = &t
	}
	if !m.LastReceiveAt.IsZero() {
		t := m.LastReceiveAt.UTC()
		out.LastReceivedAt = &t
	}
	return out
}

// attrInt reads a Number attribute (0 when absent or not an integer).
func attrInt(a model.MessageAttribute) int {
	n, _ := strconv.Atoi(strings.TrimSpace(a.StringValue))
	return n
}
