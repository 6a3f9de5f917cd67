package client

import (
	"encoding/base64"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/api/native/wire"
)

// Conversions between the package's types and the API's JSON forms
// (package api/native/wire, which the broker's api/native uses too).

func toWireAttrs(in map[string]Attribute) map[string]wire.Attribute {
	if in == nil {
		return nil
	}
	out := make(map[string]wire.Attribute, len(in))
	for name, a := range in {
		v := a.Value
		if wire.IsBinary(a.Type) {
			v = base64.StdEncoding.EncodeToString(a.Binary)
		}
		out[name] = wire.Attribute{Type: a.Type, Value: wire.AttributeValue(v)}
	}
	return out
}

func fromWireAttrs(in map[string]wire.Attribute) (map[string]Attribute, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make(map[string]Attribute, len(in))
	for name, a := range in {
		if !wire.IsBinary(a.Type) {
			out[name] = Attribute{Type: a.Type, Value: string(a.Value)}
			continue
		}
		b, err := base64.StdEncoding.DecodeString(string(a.Value))
		if err != nil {
			return nil, fmt.Errorf("client: attribute %s is Binary but its value is not base64: %w", name, err)
		}
		out[name] = Attribute{Type: a.Type, Binary: b}
	}
	return out, nil
}

// toEnvelope converts m: zero fields are left out; Delay in whole seconds
// rounded up (never early), DeliverAt as RFC 3339 in UTC. Both given are
// sent both, and the broker refuses them (invalid_request).
func toEnvelope(m *Message) wire.Envelope {
	e := wire.Envelope{Body: ptr(m.Body), Attributes: toWireAttrs(m.Attributes), GroupID: m.GroupID, DedupID: m.DedupID}
	if m.Priority != 0 {
		e.Priority = ptr(m.Priority)
	}
	if m.MaxAttempts != 0 {
		e.MaxAttempts = ptr(m.MaxAttempts)
	}
	if m.TTL != 0 {
		e.TTLSeconds = ptr(int(seconds(m.TTL)))
	}
	if m.CorrelationID != "" {
		e.CorrelationID = ptr(m.CorrelationID)
	}
	if m.TraceContext != "" {
		e.TraceContext = ptr(m.TraceContext)
	}
	if m.Delay != 0 {
		e.DelaySeconds = ptr(seconds(m.Delay))
	}
	if !m.DeliverAt.IsZero() {
		e.DeliverAt = ptr(m.DeliverAt.UTC())
	}
	return e
}

func timeOf(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

func fromWireMessages(in []wire.Message) ([]Delivery, error) {
	out := make([]Delivery, len(in))
	for i, m := range in {
		attrs, err := fromWireAttrs(m.Attributes)
		if err != nil {
			return nil, err
		}
		out[i] = Delivery{
			ID: m.ID, Body: m.Body, Attributes: attrs, Priority: m.Priority, Attempts: m.Attempts,
			ReceiveCount: m.ReceiveCount, MaxAttempts: m.MaxAttempts, TTL: time.Duration(m.TTLSeconds) * time.Second,
			CreatedAt:       m.CreatedAt,
			FirstReceivedAt: timeOf(m.FirstReceivedAt), LastReceivedAt: timeOf(m.LastReceivedAt),
			CorrelationID: m.CorrelationID, TraceContext: m.TraceContext, GroupID: m.GroupID, DedupID: m.DedupID,
			SequenceNumber: m.SequenceNumber, Receipt: m.Receipt, DeadLetterSource: m.DeadLetterSource,
			FailureReason: m.FailureReason, State: m.State, VisibleAt: timeOf(m.VisibleAt),
		}
	}
	return out, nil
}

// checkResults verifies that a batch answer has one result per entry sent
// (n).
func checkResults(b *wire.BatchResults, n int) error {
	if len(b.Results) != n {
		return fmt.Errorf("client: the broker answered %d results for %d entries", len(b.Results), n)
	}
	return nil
}

// resultErrs is each entry's error (nil when it succeeded), in request
// order.
func resultErrs(b *wire.BatchResults) []error {
	out := make([]error, len(b.Results))
	for i, r := range b.Results {
		if !r.OK {
			out[i] = entryError(r.Error)
		}
	}
	return out
}
