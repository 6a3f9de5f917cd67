package model

import (
	"encoding/json"
	"fmt"
	"time"
)

// Dead-letter webhooks (the DeadLetterWebhook queue attribute): the pure
// part, shared by both backends and the dispatcher (package webhook).
//
// When a message of a queue whose DeadLetterWebhook is set moves to its
// dead-letter queue, the backend inserts, in the same atomic step as the
// move, one event message (DeadLetterEvent, its JSON as the body) into the
// outbox: the internal queue WebhookOutbox, when it exists (the dispatcher
// creates it when it starts). So an event exists if and only if the move
// happened, and it survives restarts. The dispatcher long-polls the outbox,
// signs and POSTs the events, deletes them on a 2xx and nacks them
// otherwise; the outbox's RetryPolicy (WebhookOutboxConfig) backs them off.

// EventTimeFormat is the form of DeadLetterEvent's "at": UTC, microseconds
// (PostgreSQL's precision), so that every backend writes the same bytes for
// the same instant. The PostgreSQL claim spells it in SQL (to_char with
// 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"').
const EventTimeFormat = "2006-01-02T15:04:05.000000Z"

// DeadLetterEvent is one move of a message to a dead-letter queue, as the
// outbox stores it and the webhook delivers it:
//
//	{"queue":"orders","deadLetterQueue":"orders-dlq","messageId":"…",
//	 "reason":"lease expired","attempts":5,"receiveCount":5,
//	 "at":"2025-01-02T03:04:05.678901Z"}
//
// Queue is the source queue's name, DeadLetterQueue its dead-letter queue's;
// Attempts and ReceiveCount are the message's counts as it was moved, Reason
// its failure reason, At the instant of the move. MessageID and At together
// identify a move: a receiver deduplicates deliveries by them.
type DeadLetterEvent struct {
	Queue           string
	DeadLetterQueue string
	MessageID       string
	Reason          string
	Attempts        int
	ReceiveCount    int
	At              time.Time
}

// eventJSON is DeadLetterEvent's wire form, in its field order.
type eventJSON struct {
	Queue           string `json:"queue"`
	DeadLetterQueue string `json:"deadLetterQueue"`
	MessageID       string `json:"messageId"`
	Reason          string `json:"reason"`
	Attempts        int    `json:"attempts"`
	ReceiveCount    int    `json:"receiveCount"`
	At              string `json:"at"`
}

// MarshalJSON encodes the event in its wire form (At in EventTimeFormat).
func (e DeadLetterEvent) MarshalJSON() ([]byte, error) {
	return json.Marshal(eventJSON{e.Queue, e.DeadLetterQueue, e.MessageID, e.Reason, e.Attempts, e.ReceiveCount,
		e.At.UTC().Format(EventTimeFormat)})
}

// UnmarshalJSON decodes the wire form (At in RFC 3339).
func (e *DeadLetterEvent) UnmarshalJSON(b []byte) error {
	var w eventJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	at, err := time.Parse(time.RFC3339Nano, w.At)
	if err != nil {
		return fmt.Errorf("dead-letter event: at %q: %w", w.At, err)
	}
	*e = DeadLetterEvent{w.Queue, w.DeadLetterQueue, w.MessageID, w.Reason, w.Attempts, w.ReceiveCount, at}
	return nil
}

// Body is the outbox message's body: the event's JSON.
func (e DeadLetterEvent) Body() string {
	b, _ := e.MarshalJSON() // strings, ints and a formatted time: cannot fail
	return string(b)
}

// ParseDeadLetterEvent decodes an outbox message's body.
func ParseDeadLetterEvent(body string) (DeadLetterEvent, error) {
	var e DeadLetterEvent
	err := json.Unmarshal([]byte(body), &e)
	return e, err
}
