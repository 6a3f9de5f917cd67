package plan

import (
	"github.com/sluicemq/sluice/broker/model"
	"testing"
	"time"
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
