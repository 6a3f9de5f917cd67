package plan

import (
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// WebhookOutbox is the outbox queue of the dead-letter events. Its account
// is not one a client can name (real accounts are 12-digit ids, and the
// front serves only the broker's own, ""), so it never shows in ListQueues
// and no SQS or native call reaches it; the front hands the webhook
// dispatcher a handle on it (broker.Broker.WebhookOutbox).
func WebhookOutbox() model.QueueRef {
	return model.QueueRef{Account: "sluice", Name: "dead-letter-webhooks"}
}

// The outbox's settings (WebhookOutboxConfig).
const (
	// WebhookRetryBase and WebhookRetryMax bound the backoff of a failed
	// delivery: min(2 s * 2^(n-1), 300 s), full jitter.
	WebhookRetryBase = 2 * time.Second
	WebhookRetryMax  = 300 * time.Second
	// WebhookRetention is how long an undelivered event is kept (14 days,
	// the longest retention): past it the event is dropped.
	WebhookRetention = model.MaxRetention
)

// WebhookOutboxConfig is the outbox queue's settings: a standard queue,
// retention WebhookRetention, a RetryPolicy (the backoff of failed
// deliveries) and no RedrivePolicy (an event is retried until it is
// delivered or expires).
func WebhookOutboxConfig() model.QueueConfig {
	c := model.DefaultQueueConfig(false)
	c.Retention = WebhookRetention
	c.VisibilityTimeout = time.Minute
	c.Retry = &model.RetryPolicy{Base: WebhookRetryBase, Max: WebhookRetryMax, Jitter: model.JitterFull}
	return c
}

// WebhookEvent is the event of a dead-letter move of message m (as it is in
// the dead-letter queue: its counts after the move) from queue source to
// queue dlq at now, with its reason; ok is false when source has no
// DeadLetterWebhook (no event is written). A backend calls it inside the
// move's atomic step and inserts the event's Body into WebhookOutbox.
func WebhookEvent(source model.QueueConfig, sourceName, dlqName, messageID, reason string, attempts, receiveCount int, now time.Time) (model.DeadLetterEvent, bool) {
	if source.DeadLetterWebhook == "" {
		return model.DeadLetterEvent{}, false
	}
	return model.DeadLetterEvent{Queue: sourceName, DeadLetterQueue: dlqName, MessageID: messageID, Reason: reason,
		Attempts: attempts, ReceiveCount: receiveCount, At: now}, true
}
