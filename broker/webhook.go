package broker

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"
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

// WebhookOutbox is the outbox queue of the dead-letter events. Its account
// is not one a client can name (real accounts are 12-digit ids, and the
// front serves only the broker's own, ""), so it never shows in ListQueues
// and no SQS or native call reaches it.
var WebhookOutbox = QueueRef{Account: "sluice", Name: "dead-letter-webhooks"}

// The outbox's settings (WebhookOutboxConfig).
const (
	// WebhookRetryBase and WebhookRetryMax bound the backoff of a failed
	// delivery: min(2 s * 2^(n-1), 300 s), full jitter.
	WebhookRetryBase = 2 * time.Second
	WebhookRetryMax  = 300 * time.Second
	// WebhookRetention is how long an undelivered event is kept (14 days,
	// the longest retention): past it the event is dropped.
	WebhookRetention = MaxRetention
)

// WebhookOutboxConfig is the outbox queue's settings: a standard queue,
// retention WebhookRetention, a RetryPolicy (the backoff of failed
// deliveries) and no RedrivePolicy (an event is retried until it is
// delivered or expires).
func WebhookOutboxConfig() QueueConfig {
	c := DefaultQueueConfig(false)
	c.Retention = WebhookRetention
	c.VisibilityTimeout = time.Minute
	c.Retry = &RetryPolicy{Base: WebhookRetryBase, Max: WebhookRetryMax, Jitter: JitterFull}
	return c
}

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

// WebhookEvent is the event of a dead-letter move of message m (as it is in
// the dead-letter queue: its counts after the move) from queue source to
// queue dlq at now, with its reason; ok is false when source has no
// DeadLetterWebhook (no event is written). A backend calls it inside the
// move's atomic step and inserts the event's Body into WebhookOutbox.
func WebhookEvent(source QueueConfig, sourceName, dlqName, messageID, reason string, attempts, receiveCount int, now time.Time) (DeadLetterEvent, bool) {
	if source.DeadLetterWebhook == "" {
		return DeadLetterEvent{}, false
	}
	return DeadLetterEvent{Queue: sourceName, DeadLetterQueue: dlqName, MessageID: messageID, Reason: reason,
		Attempts: attempts, ReceiveCount: receiveCount, At: now}, true
}

// WebhookHost is the host a webhook URL calls, as "host:port" in lower
// case, the port made explicit (80 for http, 443 for https): what an
// operator's allowed hosts are matched against (WebhookHosts).
func WebhookHost(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("webhook URL %q has no host", rawURL)
	}
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		default:
			return "", fmt.Errorf("webhook URL %q is not http or https", rawURL)
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port), nil
}

// WebhookHosts is the operator's list of the hosts that dead-letter
// webhooks may call (Options.WebhookHosts).
type WebhookHosts interface {
	// Allowed reports whether a webhook may call host, given as WebhookHost
	// gives it ("host:port", lower case, the port explicit).
	Allowed(host string) bool
}

// checkWebhook refuses a DeadLetterWebhook (raw, as given) that the
// operator does not allow: every URL when webhooks are off
// (Options.WebhookHosts nil), else one whose host is not allowed.
// "" (no webhook) is always accepted.
func (b *Broker) checkWebhook(raw string) error {
	if raw == "" {
		return nil
	}
	bad := func(reason string) error {
		return Errorf(ErrInvalidAttributeValue, "Invalid value for the parameter DeadLetterWebhook. Reason: %s", reason)
	}
	if b.opts.WebhookHosts == nil {
		return bad("dead-letter webhooks are off on this broker: the operator must start it with --webhook-secret and allow the host with --webhook-allow-host.")
	}
	host, err := WebhookHost(raw)
	if err != nil {
		return bad("must be an http or https URL.")
	}
	if !b.opts.WebhookHosts.Allowed(host) {
		return bad(fmt.Sprintf("host %s is not allowed on this broker: the operator allows hosts with --webhook-allow-host.", host))
	}
	return nil
}
