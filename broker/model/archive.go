package model

import (
	"encoding/base64"
	"strings"
	"time"
)

// Archive: a queue whose ArchiveExpired is true has the messages its
// retention ends written, before they are removed, to the broker's archive
// (gzip-compressed JSON lines, one ExportLine each, in the directory the
// broker owns). The writing, its files and its exactly-once rule are the
// backends' (broker/internal/archive); docs/archive.md has the user's view.
const AttrArchiveExpired = "ArchiveExpired"

// ExportLine is one message as a JSON line: the line of `sluice dlq export`,
// of the broker's archive, and what the CLI prints with --json; `sluice send
// --from-export` reads it back (body, attributes, priority, group, dedup
// id, correlation id and trace context; the other fields are its history).
// One format: a new field is optional (omitempty), so that old lines stay
// readable.
type ExportLine struct {
	ID               string                     `json:"id"`
	Body             string                     `json:"body"`
	Attributes       map[string]ExportAttribute `json:"attributes,omitempty"`
	Priority         int                        `json:"priority,omitempty"`
	ReceiveCount     int                        `json:"receiveCount"`
	Attempts         int                        `json:"attempts"`
	CreatedAt        time.Time                  `json:"createdAt"`
	CorrelationID    string                     `json:"correlationId,omitempty"`
	TraceContext     string                     `json:"traceContext,omitempty"`
	GroupID          string                     `json:"groupId,omitempty"`
	DedupID          string                     `json:"dedupId,omitempty"`
	SequenceNumber   string                     `json:"sequenceNumber,omitempty"`
	Receipt          string                     `json:"receipt,omitempty"`
	State            string                     `json:"state,omitempty"`
	DeadLetterSource string                     `json:"deadLetterSource,omitempty"`
	Reason           string                     `json:"reason,omitempty"`
	// FirstReceivedAt and LastReceivedAt are its first and latest receive
	// (absent before one).
	FirstReceivedAt *time.Time `json:"firstReceivedAt,omitempty"`
	LastReceivedAt  *time.Time `json:"lastReceivedAt,omitempty"`
	// Queue and ArchivedAt are set in the archive only: the queue whose
	// retention removed the message, and when.
	Queue      string     `json:"queue,omitempty"`
	ArchivedAt *time.Time `json:"archivedAt,omitempty"`
}

// ExportAttribute is a message attribute of an ExportLine: Binary values in
// base64, as the native API has them.
type ExportAttribute struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// ArchiveLine is the archive's line of message m of queue, removed at t.
func ArchiveLine(m *Message, queue string, t time.Time) ExportLine {
	l := ExportLine{
		ID: m.ID, Body: m.Body, Priority: m.Priority, ReceiveCount: m.ReceiveCount, Attempts: m.Attempts,
		CreatedAt: m.SentAt.UTC(), GroupID: m.GroupID, DedupID: m.DedupID, SequenceNumber: m.SequenceNumber,
		DeadLetterSource: m.DeadLetterSource, Reason: m.FailureReason, Queue: queue,
		CorrelationID: m.Attributes[MsgAttrCorrelationID].StringValue,
		TraceContext:  m.Attributes[MsgAttrTraceParent].StringValue,
	}
	at := t.UTC()
	l.ArchivedAt = &at
	if !m.FirstReceiveAt.IsZero() {
		f := m.FirstReceiveAt.UTC()
		l.FirstReceivedAt = &f
	}
	if !m.LastReceiveAt.IsZero() {
		r := m.LastReceiveAt.UTC()
		l.LastReceivedAt = &r
	}
	if len(m.Attributes) > 0 {
		l.Attributes = make(map[string]ExportAttribute, len(m.Attributes))
		for k, a := range m.Attributes {
			v := a.StringValue
			if strings.HasPrefix(a.DataType, "Binary") {
				v = base64.StdEncoding.EncodeToString(a.BinaryValue)
			}
			l.Attributes[k] = ExportAttribute{Type: a.DataType, Value: v}
		}
	}
	return l
}
