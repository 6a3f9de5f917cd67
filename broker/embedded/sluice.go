package embedded

import (
	"context"

	"github.com/sluicemq/sluice/broker"
)

// Browse implements broker.Backend.
func (b *Backend) Browse(ctx context.Context, q broker.QueueRef, req broker.BrowseRequest) (broker.BrowsePage, error) {
	return broker.BrowsePage{}, broker.Errorf(broker.ErrUnsupportedOperation, "Browse is not built yet.")
}

// DeleteMessages implements broker.Backend.
func (b *Backend) DeleteMessages(ctx context.Context, q broker.QueueRef, ids []string) ([]bool, error) {
	return nil, broker.Errorf(broker.ErrUnsupportedOperation, "DeleteMessages is not built yet.")
}
