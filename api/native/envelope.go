package native

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// The message envelope: what a send takes and what a receive or a browse
// answers. Its fields beyond SQS travel as message attributes (the package
// comment), so a message reads the same from either protocol.

// attribute is one user message attribute: {"type":"String|Number|Binary"
// (with an optional ".label"), "value": ...}. A Binary value is base64; a
// Number value may be given as a JSON number or a string, and is answered
// as a string (exactly as sent).
type attribute struct {
	Type  string    `json:"type"`
	Value attrValue `json:"value"`
}

// attrValue is an attribute's value as text: a JSON string, or the literal
// of a JSON number.
type attrValue string

// UnmarshalJSON takes a string or a number.
func (v *attrValue) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*v = attrValue(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return &fieldError{errorf(errBadRequest, "An attribute's value must be a string (or a number, for a Number attribute), not %s.", b)}
	}
	*v = attrValue(n)
	return nil
}

// toBrokerAttrs converts envelope attributes ("" names the field in errors).
func toBrokerAttrs(field string, in map[string]attribute) (map[string]model.MessageAttribute, error) {
	if in == nil {
		return nil, nil
	}
	out := make(map[string]model.MessageAttribute, len(in))
	for name, a := range in {
		ma := model.MessageAttribute{DataType: a.Type}
		if base, _, _ := strings.Cut(a.Type, "."); base == "Binary" {
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
func fromBrokerAttrs(in map[string]model.MessageAttribute) map[string]attribute {
	out := make(map[string]attribute, len(in))
	for name, a := range in {
		if lifted(name) {
			continue
		}
		v := a.StringValue
		if a.IsBinary() {
			v = base64.StdEncoding.EncodeToString(a.BinaryValue)
		}
		out[name] = attribute{Type: a.DataType, Value: attrValue(v)}
	}
	return out
}

// lifted reports whether an attribute is answered as an envelope field.
func lifted(name string) bool {
	switch name {
	case model.MsgAttrPriority, model.MsgAttrMaxAttempts, model.MsgAttrCorrelationID, model.MsgAttrTraceParent:
		return true
	}
	return false
}

// envelope is a message to send.
type envelope struct {
	Body       *string              `json:"body"`
	Attributes map[string]attribute `json:"attributes"`
	// Priority is stored as Sluice.Priority (-100..100).
	Priority *int `json:"priority"`
	// MaxAttempts is stored as Sluice.MaxAttempts (1..1000; the queue needs
	// a RedrivePolicy).
	MaxAttempts *int `json:"maxAttempts"`
	// CorrelationID is stored as Sluice.CorrelationId.
	CorrelationID *string `json:"correlationId"`
	// TraceContext is stored as the traceparent attribute (W3C).
	TraceContext *string `json:"traceContext"`
	// DelaySeconds and DeliverAt (at most one): when the message becomes
	// visible; on a standard queue any time within its retention period.
	DelaySeconds *int64     `json:"delaySeconds"`
	DeliverAt    *time.Time `json:"deliverAt"`
	GroupID      string     `json:"groupId"`
	DedupID      string     `json:"dedupId"`
}

// batchEntry is one message of a batch send: an envelope and its entry id.
type batchEntry struct {
	ID string `json:"id"`
	envelope
}

// toSendEntry converts an envelope; field names it in errors ("" for a
// single send, "messages[2]" in a batch). The attributes' wire form is this
// package's (base64 for Binary); the rest is model.EnvelopeEntry's rule.
func toSendEntry(field string, e *envelope, now time.Time) (model.SendEntry, error) {
	if e.Body == nil {
		return model.SendEntry{}, errorf(model.ErrMissingParameter, "Field %s is required.", fieldName(field, "body"))
	}
	attrs, err := toBrokerAttrs(fieldName(field, "attributes"), e.Attributes)
	if err != nil {
		return model.SendEntry{}, err
	}
	return model.EnvelopeEntry(field, &model.Envelope{
		Body: e.Body, Attributes: attrs,
		Priority: e.Priority, MaxAttempts: e.MaxAttempts,
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

// message is a message in an answer: a delivery (with its receipt) or a
// browsed message (with its state).
type message struct {
	ID         string               `json:"id"`
	Body       string               `json:"body"`
	Attributes map[string]attribute `json:"attributes"`
	Priority   int                  `json:"priority"`
	// Attempts is Sluice's attempts count, ReceiveCount SQS's
	// ApproximateReceiveCount (see broker/retry.go).
	Attempts     int `json:"attempts"`
	ReceiveCount int `json:"receiveCount"`
	// MaxAttempts is the message's attempt limit (its own, else its
	// queue's maxReceiveCount); absent when there is none.
	MaxAttempts      int        `json:"maxAttempts,omitempty"`
	CreatedAt        time.Time  `json:"createdAt"`
	FirstReceivedAt  *time.Time `json:"firstReceivedAt,omitempty"`
	LastReceivedAt   *time.Time `json:"lastReceivedAt,omitempty"`
	CorrelationID    string     `json:"correlationId,omitempty"`
	TraceContext     string     `json:"traceContext,omitempty"`
	GroupID          string     `json:"groupId,omitempty"`
	DedupID          string     `json:"dedupId,omitempty"`
	SequenceNumber   string     `json:"sequenceNumber,omitempty"`
	Receipt          string     `json:"receipt,omitempty"`
	DeadLetterSource string     `json:"deadLetterSource,omitempty"`
	FailureReason    string     `json:"failureReason,omitempty"`
	// State and VisibleAt are a browsed message's.
	State     string     `json:"state,omitempty"`
	VisibleAt *time.Time `json:"visibleAt,omitempty"`
}

// toMessage converts a stored message; redrive is its queue's policy (for
// the attempt limit; nil when the queue has none).
func toMessage(m *model.Message, redrive *model.RedrivePolicy) message {
	out := message{
		ID: m.ID, Body: m.Body, Attributes: fromBrokerAttrs(m.Attributes),
		Priority: m.Priority, Attempts: m.Attempts, ReceiveCount: m.ReceiveCount,
		CreatedAt: m.SentAt.UTC(), GroupID: m.GroupID, DedupID: m.DedupID, SequenceNumber: m.SequenceNumber,
		DeadLetterSource: m.DeadLetterSource, FailureReason: m.FailureReason,
		CorrelationID: m.Attributes[model.MsgAttrCorrelationID].StringValue,
		TraceContext:  m.Attributes[model.MsgAttrTraceParent].StringValue,
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
