package storage

import (
	"context"
	"github.com/sluicemq/sluice/broker/model"
	"time"
)

// Backend is the storage seam under the front (Broker): the embedded (Pebble)
// and PostgreSQL backends implement it, and broker/brokertest holds the
// conformance suite that every implementation passes through the front.
//
// A backend stores and makes the atomic transitions; it never decides queue
// semantics that the front or a pure rule of this package holds. Its input is
// already validated and normalized by the front: queue names are valid,
// configurations are typed and checked, batches have 1..MaxBatchEntries
// entries with distinct ids (or are a single unnamed entry), receipts are
// decoded. Where a rule needs the backend's own state inside its atomic step,
// the backend calls the pure function that holds it (PlanSend, PlanReceive,
// ClaimRoom, MoveWalk, the FIFO rules of fifo.go) or the edit function the
// front passes in (UpdateQueue, PurgeQueue).
//
// Every method that changes state returns only after the change is durable;
// an answer that changes nothing (an existing queue, a duplicate FIFO send)
// waits until the earlier change it reports is durable. Errors are *Error
// values wrapping the sentinels of errors.go; the texts come from this
// package's constructors (QueueNotFoundError, ClosedError, …).
type Backend interface {
	// CreateQueue stores a new queue, or returns the live queue of that
	// name unchanged with created == false (the front compares its
	// attributes).
	CreateQueue(ctx context.Context, spec QueueSpec) (q model.Queue, created bool, err error)
	// GetQueue returns a queue and its approximate counts (with the send
	// time of its oldest message).
	GetQueue(ctx context.Context, q model.QueueRef) (model.QueueInfo, error)
	// ListQueues returns the queues of account whose names start with prefix
	// and sort after `after` (bytewise), in name order, at most limit of them
	// (limit <= 0: all).
	ListQueues(ctx context.Context, account, prefix, after string, limit int) ([]model.Queue, error)
	// UpdateQueue applies edit to a copy of the queue's settings and tags
	// and stores the result, atomically with respect to every other update
	// of the queue (a read-modify-write under the backend's lock or in one
	// transaction). edit is pure and may run more than once (a retried
	// transaction); when it returns an error nothing is written and the
	// error is returned as it is.
	UpdateQueue(ctx context.Context, q model.QueueRef, edit func(u *QueueUpdate) error) error
	// DeleteQueue deletes a queue: waiting receives end with ErrQueueDoesNotExist,
	// its receipts stop working, its move tasks are forgotten, and its
	// messages are reclaimed in the background.
	DeleteQueue(ctx context.Context, q model.QueueRef) error
	// PurgeQueue deletes every message of the queue (ready, delayed and in
	// flight) and forgets its FIFO dedup window and receive attempts. When
	// allow is not nil it is called first, atomically with the purge, with
	// the time of the queue's last purge (zero if none) and the backend's
	// now; an error from it is returned and nothing is purged.
	PurgeQueue(ctx context.Context, q model.QueueRef, allow func(lastPurge, now time.Time) error) error

	// Send stores messages. The backend reads the queue's settings and
	// depth (QueueStats.Depth) and plans the send with PlanSend: per-entry
	// failures are in the results; a send past MaxDepth is refused whole
	// (*DepthError). Each message is stored with its plan's Priority and
	// MaxAttempts.
	Send(ctx context.Context, q model.QueueRef, entries []model.SendEntry) ([]model.SendResult, error)
	// Receive leases up to the planned number of messages (PlanReceive,
	// ClaimRoom). It waits up to the wait time for a first message and
	// returns as soon as one is available. A cancelled ctx ends the wait
	// with ctx.Err() and claims nothing. Each delivery adds one to the
	// message's ReceiveCount and Attempts and sets LastReceiveAt. A message
	// whose receive would start an attempt past its limit
	// (ShouldDeadLetterOnReceive) moves to the dead-letter queue instead of
	// being returned. A lease that ended unsettled is planned with
	// PlanLeaseExpiry when the backend finds it (it may dead-letter the
	// message or make it back off). A paused queue (QueueConfig.Paused)
	// delivers nothing: the receive waits as on an empty queue, and an
	// UpdateQueue that resumes it wakes the waiting receives on every
	// broker. On an at-most-once queue the claimed messages are deleted in
	// the same atomic step, durably before the answer.
	Receive(ctx context.Context, req model.ReceiveRequest) ([]model.Delivery, error)
	// Delete deletes leased messages, one LeaseOutcome per receipt. A FIFO
	// delete of a lease that ended is LeaseEnded (its group lock is gone);
	// on a standard queue the latest lease deletes even after it ended,
	// unless the message is backing off or snoozed (delayed after a
	// failure): that receipt is LeaseStale.
	Delete(ctx context.Context, q model.QueueRef, receipts []model.Receipt) ([]model.LeaseOutcome, error)
	// ChangeVisibility changes leases as PlanLeaseChange plans each one
	// (extend, nack with backoff, snooze, dead-letter now), counted from
	// now. A lease that ended is LeaseEnded; a receipt of a message that is
	// backing off or snoozed is LeaseStale. A FateDeadLetter moves the
	// message as a receive past its limit does (PlanDeadLetter), keeping
	// the plan's reason.
	ChangeVisibility(ctx context.Context, q model.QueueRef, changes []model.VisibilityChange) ([]model.LeaseOutcome, error)

	// Browse returns a page of the queue's messages (visible, in flight and
	// delayed) in send order (or newest first), without leasing them or
	// changing any count; req.Filter (BrowseFilter.Match) selects them.
	// Expired messages are not shown.
	Browse(ctx context.Context, q model.QueueRef, req model.BrowseRequest) (model.BrowsePage, error)
	// DeleteMessages deletes messages by id whatever their state (a lease
	// on one ends; a FIFO group it held is free), one bool per id: whether
	// it was there.
	DeleteMessages(ctx context.Context, q model.QueueRef, ids []string) ([]bool, error)

	// Receipts returns the codec of the receipt key kept in the store
	// (ReceiptCodec): the key is made once when the store is created and
	// read when it is opened, so handles survive restarts and every broker
	// sharing the store accepts the others'. The backend encodes the
	// handles of its deliveries with it, and the front decodes with it.
	// Never nil once the backend is open.
	Receipts() *model.ReceiptCodec

	// Close stops background work, syncs and releases the store. Idempotent.
	Close() error
}

// QueueSpec is a queue to create: its account and valid name, its typed
// settings and tags.
type QueueSpec struct {
	model.QueueRef
	Config model.QueueConfig
	Tags   map[string]string
}

// QueueUpdate is what UpdateQueue's edit function sees and may change.
type QueueUpdate struct {
	// Queue is the queue edited (read only).
	Queue model.QueueRef
	// Config and Tags are copies the edit may change.
	Config model.QueueConfig
	Tags   map[string]string
	// Modified moves LastModifiedTimestamp to now: attribute changes do,
	// tag changes do not.
	Modified bool
}

// The optional capabilities of a backend, each its own interface so that the
// core one never breaks.

// FailureNotifier is a backend that can fail-stop after a store write or sync
// error: Failed is closed then, every call is refused, and the process should
// restart to recover (sluice serve exits with status 1).
type FailureNotifier interface {
	Failed() <-chan struct{}
}

// SyncCounter is a backend that counts its store syncs (group commit shows
// as several changes per sync).
type SyncCounter interface {
	Syncs() uint64
}

// StatsLister is a backend that reads every queue of an account with its
// counts in one go (metrics and the dashboard read them on every scrape or
// tick). Broker.AllStats falls back to ListQueues and one GetQueue per queue.
type StatsLister interface {
	ListQueueStats(ctx context.Context, account string) ([]model.QueueInfo, error)
}

// Pinger is a backend whose store is a server: Ping checks that it answers
// (Broker.Ready calls it).
type Pinger interface {
	Ping(ctx context.Context) error
}

// PoolReporter is a backend with a connection pool (PostgreSQL), for
// metrics.
type PoolReporter interface {
	PoolStats() model.PoolStats
}
