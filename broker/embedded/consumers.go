package embedded

import (
	"context"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// RecordConsumers implements storage.Backend: the embedded store serves one
// broker, whose front lists its own streams; it records nothing.
func (b *Backend) RecordConsumers(context.Context, string, []model.ConsumerRecord, time.Duration) error {
	return nil
}

// ListConsumers implements storage.Backend: nothing is recorded.
func (b *Backend) ListConsumers(context.Context, model.QueueRef) ([]model.ConsumerInfo, error) {
	return nil, nil
}
