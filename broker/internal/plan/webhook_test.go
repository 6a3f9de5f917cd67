package plan

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

func TestWebhookOutboxConfig(t *testing.T) {
	t.Parallel()
	c := WebhookOutboxConfig()
	if c.Fifo || c.Redrive != nil || c.Retry == nil || c.Retry.Base != 2*time.Second || c.Retry.Max != 300*time.Second ||
		c.Retry.Jitter != model.JitterFull || c.Retention != model.MaxRetention {
		t.Fatalf("WebhookOutboxConfig() = %+v", c)
	}
	if err := model.ValidateQueueName(WebhookOutbox().Name); err != nil {
		t.Fatalf("the outbox's name: %v", err)
	}
}

func TestDeadLetterEventJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2024, 6, 1, 12, 0, 0, 123456789, time.FixedZone("x", 3600))
	ev, ok := WebhookEvent(model.QueueConfig{DeadLetterWebhook: "https://h/"}, "src", "dlq", "id-1", "lease expired", 3, 4, at)
	if !ok {
		t.Fatal("WebhookEvent of a queue with a webhook: no event")
	}
	const want = `{"queue":"src","deadLetterQueue":"dlq","messageId":"id-1","reason":"lease expired","attempts":3,"receiveCount":4,"at":"2024-06-01T11:00:00.123456Z"}`
	if got := ev.Body(); got != want {
		t.Fatalf("Body() = %s\nwant     %s", got, want)
	}
	back, err := model.ParseDeadLetterEvent(want)
	if err != nil {
		t.Fatal(err)
	}
	if back.Queue != "src" || back.Attempts != 3 || back.ReceiveCount != 4 || !back.At.Equal(at.Truncate(time.Microsecond)) {
		t.Fatalf("model.ParseDeadLetterEvent = %+v", back)
	}
	// PostgreSQL's json_build_object spacing decodes the same.
	if _, err := model.ParseDeadLetterEvent(`{"queue" : "src", "at" : "2024-06-01T11:00:00.123456Z"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := model.ParseDeadLetterEvent(`{"at":"yesterday"}`); err == nil {
		t.Fatal("a bad at decoded")
	}
	if _, ok := WebhookEvent(model.QueueConfig{}, "src", "dlq", "id", "r", 1, 1, at); ok {
		t.Fatal("WebhookEvent of a queue without a webhook made an event")
	}
}
