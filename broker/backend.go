package broker

import (
	"context"
	"log/slog"
)

// Backend stores queues and messages. The embedded (Pebble) and PostgreSQL
// backends implement it; broker/brokertest holds the conformance suite every
// implementation passes.
//
// Every method that changes state returns only after the change is durable.
// Batch methods take 1..MaxBatchEntries entries with distinct ids (ValidateBatch)
// and return one result per entry, in order; an error returned beside the
// results concerns the whole call (no entry was applied). Errors are *Error
// values wrapping the sentinels of errors.go.
type Backend interface {
	// CreateQueue creates a queue with the given SQS attributes and tags, or
	// returns the existing queue when every given attribute equals the existing
	// value (ErrQueueExists otherwise). Names follow ValidateQueueName.
	CreateQueue(ctx context.Context, name string, attrs, tags map[string]string) (Queue, error)
	// GetQueue returns a queue and its approximate counts.
	GetQueue(ctx context.Context, name string) (QueueInfo, error)
	// ListQueues returns queues whose names start with prefix and sort after
	// `after`, in name order, at most limit of them (limit <= 0: all).
	ListQueues(ctx context.Context, prefix, after string, limit int) ([]Queue, error)
	// SetQueueAttributes changes the given attributes (ApplyAttributes rules).
	SetQueueAttributes(ctx context.Context, name string, attrs map[string]string) error
	// DeleteQueue deletes a queue: waiting receives end with ErrQueueDoesNotExist,
	// its receipts stop working, and its messages are reclaimed in the background.
	DeleteQueue(ctx context.Context, name string) error
	// PurgeQueue deletes every message of the queue (ready, delayed and in flight).
	PurgeQueue(ctx context.Context, name string) error

	// Send stores messages. Per-entry validation failures are in the results.
	Send(ctx context.Context, queue string, entries []SendEntry) ([]SendResult, error)
	// Receive leases up to req.MaxMessages messages. It waits up to the wait
	// time for a first message and returns as soon as one is available. A
	// cancelled ctx ends the wait with ctx.Err() and claims nothing. A message
	// whose receive would exceed its queue's maxReceiveCount moves to the
	// dead-letter queue instead of being returned.
	Receive(ctx context.Context, req ReceiveRequest) ([]Delivery, error)
	// Delete deletes leased messages. A stale but well-formed receipt (the
	// message was since deleted or leased again) succeeds without effect.
	Delete(ctx context.Context, queue string, entries []DeleteEntry) ([]error, error)
	// ChangeVisibility sets leases' remaining time, counted from now; 0 makes
	// the message visible at once. A stale receipt fails with
	// ErrInvalidParameterValue; an expired lease with ErrMessageNotInflight.
	ChangeVisibility(ctx context.Context, queue string, entries []VisibilityEntry) ([]error, error)

	// Close stops background work, syncs and releases the store. Idempotent.
	Close() error
}

// Options are what every backend takes besides its store location.
type Options struct {
	// Clock drives leases, delays and retention. Default RealClock.
	Clock Clock
	// Logger receives structured logs. Default slog.Default() is NOT used: nil
	// means discard.
	Logger *slog.Logger
	// MaxInFlight caps leased messages per queue (receives past it get
	// ErrOverLimit). Default DefaultMaxInFlight; must be >= 1.
	MaxInFlight int
	// StrictPurge enforces AWS's one purge per queue per 60 s. Default off.
	StrictPurge bool
}

// WithDefaults returns o with zero fields set to their defaults.
func (o Options) WithDefaults() Options {
	if o.Clock == nil {
		o.Clock = RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	return o
}
