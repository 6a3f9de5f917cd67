package broker

import (
	"testing"
	"time"
)

func TestDeadLetterEventJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2024, 6, 1, 12, 0, 0, 123456789, time.FixedZone("x", 3600))
	ev, ok := WebhookEvent(QueueConfig{DeadLetterWebhook: "https://h/"}, "src", "dlq", "id-1", "lease expired", 3, 4, at)
	if !ok {
		t.Fatal("WebhookEvent of a queue with a webhook: no event")
	}
	const want = `{"queue":"src","deadLetterQueue":"dlq","messageId":"id-1","reason":"lease expired","attempts":3,"receiveCount":4,"at":"2024-06-01T11:00:00.123456Z"}`
	if got := ev.Body(); got != want {
		t.Fatalf("Body() = %s\nwant     %s", got, want)
	}
	back, err := ParseDeadLetterEvent(want)
	if err != nil {
		t.Fatal(err)
	}
	if back.Queue != "src" || back.Attempts != 3 || back.ReceiveCount != 4 || !back.At.Equal(at.Truncate(time.Microsecond)) {
		t.Fatalf("ParseDeadLetterEvent = %+v", back)
	}
	// PostgreSQL's json_build_object spacing decodes the same.
	if _, err := ParseDeadLetterEvent(`{"queue" : "src", "at" : "2024-06-01T11:00:00.123456Z"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseDeadLetterEvent(`{"at":"yesterday"}`); err == nil {
		t.Fatal("a bad at decoded")
	}
	if _, ok := WebhookEvent(QueueConfig{}, "src", "dlq", "id", "r", 1, 1, at); ok {
		t.Fatal("WebhookEvent of a queue without a webhook made an event")
	}
}

func TestWebhookHost(t *testing.T) {
	t.Parallel()
	for u, want := range map[string]string{
		"https://Hooks.Example.com/x?y=1": "hooks.example.com:443",
		"http://hooks.example.com/":       "hooks.example.com:80",
		"http://hooks.example.com:8080/":  "hooks.example.com:8080",
		"https://[::1]:9/x":               "[::1]:9",
		"https://[::1]/x":                 "[::1]:443",
	} {
		if got, err := WebhookHost(u); err != nil || got != want {
			t.Errorf("WebhookHost(%q) = %q, %v; want %q", u, got, err, want)
		}
	}
	for _, u := range []string{"ftp://x/", "/relative", "https://"} {
		if _, err := WebhookHost(u); err == nil {
			t.Errorf("WebhookHost(%q) succeeded", u)
		}
	}
}

func TestWebhookOutboxConfig(t *testing.T) {
	t.Parallel()
	c := WebhookOutboxConfig()
	if c.Fifo || c.Redrive != nil || c.Retry == nil || c.Retry.Base != 2*time.Second || c.Retry.Max != 300*time.Second ||
		c.Retry.Jitter != JitterFull || c.Retention != MaxRetention {
		t.Fatalf("WebhookOutboxConfig() = %+v", c)
	}
	if err := ValidateQueueName(WebhookOutbox.Name); err != nil {
		t.Fatalf("the outbox's name: %v", err)
	}
}
