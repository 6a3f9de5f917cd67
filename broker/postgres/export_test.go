package postgres

import "context"

// SweepOnce runs one sweep of b's sweeper now (retention, expired dedup and
// attempt rows, deleted queues, empty FIFO group rows).
func (b *Backend) SweepOnce(ctx context.Context) error {
	_, _, err := b.sweepOnce(ctx)
	return err
}
