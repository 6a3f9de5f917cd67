package stream

import (
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/api/stream/streampb"
	"github.com/sluicemq/sluice/broker/model"
)

// toSendEntry converts an envelope (model.EnvelopeEntry's rule, as for the
// native API); field names it in errors ("messages[2]").
func toSendEntry(field string, e *streampb.Envelope, now time.Time) (model.SendEntry, error) {
	if e == nil {
		return model.SendEntry{}, model.Errorf(model.ErrMissingParameter, "Field %s.body is required.", field)
	}
	var attrs map[string]model.MessageAttribute
	if len(e.GetAttributes()) > 0 {
		attrs = make(map[string]model.MessageAttribute, len(e.GetAttributes()))
		for name, a := range e.GetAttributes() {
			ma := model.MessageAttribute{DataType: a.GetType()}
			if isBinary(a.GetType()) {
				ma.BinaryValue = a.GetBinaryValue()
			} else {
				ma.StringValue = a.GetStringValue()
			}
			attrs[name] = ma
		}
	}
	body := e.GetBody()
	env := &model.Envelope{
		Body: &body, Attributes: attrs,
		CorrelationID: e.CorrelationId, TraceContext: e.TraceContext,
		DelaySeconds: e.DelaySeconds,
		GroupID:      e.GetGroupId(), DedupID: e.GetDedupId(),
	}
	if e.Priority != nil {
		p := int(e.GetPriority())
		env.Priority = &p
	}
	if e.MaxAttempts != nil {
		m := int(e.GetMaxAttempts())
		env.MaxAttempts = &m
	}
	if e.TtlSeconds != nil {
		t := int(e.GetTtlSeconds())
		env.TTLSeconds = &t
	}
	if e.DeliverAtUnixMs != nil {
		t := time.UnixMilli(e.GetDeliverAtUnixMs())
		env.DeliverAt = &t
	}
	return model.EnvelopeEntry(field, env, now)
}

// isBinary reports whether an attribute data type is Binary (or a labelled
// Binary.x).
func isBinary(typ string) bool {
	base, _, _ := strings.Cut(typ, ".")
	return base == "Binary"
}

// toMessage converts a delivery; redrive is its queue's policy (for the
// attempt limit; nil when the queue has none).
func toMessage(d *model.Delivery, redrive *model.RedrivePolicy) *streampb.Message {
	m := &d.Message
	out := &streampb.Message{
		Id: m.ID, Body: m.Body, Receipt: d.Receipt,
		Priority: int32(m.Priority), Attempts: int32(m.Attempts), ReceiveCount: int32(m.ReceiveCount),
		SentAtUnixMs: m.SentAt.UnixMilli(), GroupId: m.GroupID, DedupId: m.DedupID, SequenceNumber: m.SequenceNumber,
		FailureReason: m.FailureReason,
		CorrelationId: m.Attributes[model.MsgAttrCorrelationID].StringValue,
		TraceContext:  m.Attributes[model.MsgAttrTraceParent].StringValue,
		TtlSeconds:    int32(attrInt(m.Attributes[model.MsgAttrTimeToLive])),
	}
	own := m.MaxAttempts
	if own == 0 {
		own = attrInt(m.Attributes[model.MsgAttrMaxAttempts])
	}
	out.MaxAttempts = int32(model.MaxAttempts(redrive, own))
	if out.Priority == 0 {
		out.Priority = int32(attrInt(m.Attributes[model.MsgAttrPriority]))
	}
	for name, a := range m.Attributes {
		if model.EnvelopeField(name) {
			continue
		}
		if out.Attributes == nil {
			out.Attributes = make(map[string]*streampb.Attribute, len(m.Attributes))
		}
		pa := &streampb.Attribute{Type: a.DataType}
		if a.IsBinary() {
			pa.BinaryValue = a.BinaryValue
		} else {
			pa.StringValue = a.StringValue
		}
		out.Attributes[name] = pa
	}
	return out
}

// attrInt reads a Number attribute (0 when absent or not an integer).
func attrInt(a model.MessageAttribute) int {
	n, _ := strconv.Atoi(strings.TrimSpace(a.StringValue))
	return n
}
