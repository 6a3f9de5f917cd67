package client

import (
	"encoding/base64"
	"fmt"
	"strings"
	"time"
)

// The JSON forms of the API (api/native on the broker's side), and their
// conversions from and to the package's types.

// wireAttribute is {"type": ..., "value": ...}: a Binary value in base64.
type wireAttribute struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// isBinary reports whether an attribute type is Binary (with or without a
// ".label").
func isBinary(typ string) bool {
	base, _, _ := strings.Cut(typ, ".")
	return base == "Binary"
}

func toWireAttrs(in map[string]Attribute) map[string]wireAttribute {
	if in == nil {
		return nil
	}
	out := make(map[string]wireAttribute, len(in))
	for name, a := range in {
		v := a.Value
		if isBinary(a.Type) {
			v = base64.StdEncoding.EncodeToString(a.Binary)
		}
		out[name] = wireAttribute{Type: a.Type, Value: v}
	}
	return out
}

func fromWireAttrs(in map[string]wireAttribute) (map[string]Attribute, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make(map[string]Attribute, len(in))
	for name, a := range in {
		if !isBinary(a.Type) {
			out[name] = Attribute{Type: a.Type, Value: a.Value}
			continue
		}
		b, err := base64.StdEncoding.DecodeString(a.Value)
		if err != nil {
			return nil, fmt.Errorf("client: attribute %s is Binary but its value is not base64: %w", name, err)
		}
		out[name] = Attribute{Type: a.Type, Binary: b}
	}
	return out, nil
}

// envelope is a message to send; zero fields are left out.
type envelope struct {
	ID            string                   `json:"id,omitempty"`
	Body          string                   `json:"body"`
	Attributes    map[string]wireAttribute `json:"attributes,omitempty"`
	Priority      int                      `json:"priority,omitempty"`
	MaxAttempts   int                      `json:"maxAttempts,omitempty"`
	CorrelationID string                   `json:"correlationId,omitempty"`
	TraceContext  string                   `json:"traceContext,omitempty"`
	DelaySeconds  *int64                   `json:"delaySeconds,omitempty"`
	DeliverAt     *time.Time               `json:"deliverAt,omitempty"`
	GroupID       string                   `json:"groupId,omitempty"`
	DedupID       string                   `json:"dedupId,omitempty"`
}

// toEnvelope converts m: Delay in whole seconds rounded up (never early),
// DeliverAt as RFC 3339 in UTC. Both given are sent both, and the broker
// refuses them (invalid_request).
func toEnvelope(m *Message) envelope {
	e := envelope{
		Body: m.Body, Attributes: toWireAttrs(m.Attributes), Priority: m.Priority, MaxAttempts: m.MaxAttempts,
		CorrelationID: m.CorrelationID, TraceContext: m.TraceContext, GroupID: m.GroupID, DedupID: m.DedupID,
	}
	if m.Delay != 0 {
		s := seconds(m.Delay)
		e.DelaySeconds = &s
	}
	if !m.DeliverAt.IsZero() {
		t := m.DeliverAt.UTC()
		e.DeliverAt = &t
	}
	return e
}

// wireMessage is a received or browsed message.
type wireMessage struct {
	ID               string                   `json:"id"`
	Body             string                   `json:"body"`
	Attributes       map[string]wireAttribute `json:"attributes"`
	Priority         int                      `json:"priority"`
	Attempts         int                      `json:"attempts"`
	ReceiveCount     int                      `json:"receiveCount"`
	MaxAttempts      int                      `json:"maxAttempts"`
	CreatedAt        time.Time                `json:"createdAt"`
	FirstReceivedAt  *time.Time               `json:"firstReceivedAt"`
	LastReceivedAt   *time.Time               `json:"lastReceivedAt"`
	CorrelationID    string                   `json:"correlationId"`
	TraceContext     string                   `json:"traceContext"`
	GroupID          string                   `json:"groupId"`
	DedupID          string                   `json:"dedupId"`
	SequenceNumber   string                   `json:"sequenceNumber"`
	Receipt          string                   `json:"receipt"`
	DeadLetterSource string                   `json:"deadLetterSource"`
	FailureReason    string                   `json:"failureReason"`
	State            string                   `json:"state"`
	VisibleAt        *time.Time               `json:"visibleAt"`
}

func timeOf(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

func fromWireMessages(in []wireMessage) ([]Delivery, error) {
	out := make([]Delivery, len(in))
	for i, m := range in {
		attrs, err := fromWireAttrs(m.Attributes)
		if err != nil {
			return nil, err
		}
		out[i] = Delivery{
			ID: m.ID, Body: m.Body, Attributes: attrs, Priority: m.Priority, Attempts: m.Attempts,
			ReceiveCount: m.ReceiveCount, MaxAttempts: m.MaxAttempts, CreatedAt: m.CreatedAt,
			FirstReceivedAt: timeOf(m.FirstReceivedAt), LastReceivedAt: timeOf(m.LastReceivedAt),
			CorrelationID: m.CorrelationID, TraceContext: m.TraceContext, GroupID: m.GroupID, DedupID: m.DedupID,
			SequenceNumber: m.SequenceNumber, Receipt: m.Receipt, DeadLetterSource: m.DeadLetterSource,
			FailureReason: m.FailureReason, State: m.State, VisibleAt: timeOf(m.VisibleAt),
		}
	}
	return out, nil
}

// batchResult is one entry's result in a batch answer.
type batchResult struct {
	ID             string     `json:"id"`
	OK             bool       `json:"ok"`
	MessageID      string     `json:"messageId"`
	SequenceNumber string     `json:"sequenceNumber"`
	Deleted        *bool      `json:"deleted"`
	Error          *errorBody `json:"error"`
}

// batchResults is a batch answer.
type batchResults struct {
	Results []batchResult `json:"results"`
}

// check verifies the answer has one result per entry sent.
func (b *batchResults) check(n int) error {
	if len(b.Results) != n {
		return fmt.Errorf("client: the broker answered %d results for %d entries", len(b.Results), n)
	}
	return nil
}

// errs is each entry's error (nil when it succeeded), in request order.
func (b *batchResults) errs() []error {
	out := make([]error, len(b.Results))
	for i, r := range b.Results {
		if !r.OK {
			out[i] = entryError(r.Error)
		}
	}
	return out
}
