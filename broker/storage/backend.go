// Package storage is the seam between the front (package broker) and the
// stores: the Backend interface every store implements, its Diagnostics,
// and the Options every backend takes. It holds no rule: the values and
// value rules are package model's, the rules a backend runs inside its
// atomic step are the planners' (broker/internal/plan), and the rest is the
// front's. Only the wiring (cmd/sluice, server, the test brokers) and the
// backends themselves name a Backend; every API reaches the store through
// the front.
package storage

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// Backend is the storage seam under the front (broker.Broker): the embedded
// (Pebble) and PostgreSQL backends implement it, and broker/brokertest holds
// the conformance suite that every implementation passes through the front.
//
// A backend stores and makes the atomic transitions; it never decides queue
// semantics that the front, a value rule of package model or a planner
// holds. Its input is already validated and normalized by the front: queue
// names are valid, configurations are typed and checked, batches have
// 1..MaxBatchEntries entries with distinct ids (or are a single unnamed
// entry), receipts are decoded, each send entry's Sluice options are parsed
// (SendEntry.Options). Where a rule needs the queue's settings or state as
// the backend reads them inside its atomic step, the backend calls the
// planner that holds it (plan.Send, plan.Receive, plan.ClaimRoom,
// plan.LeaseChange, plan.QueueUpdate.Apply, plan.AllowPurge, plan.MoveWalk,
// the FIFO and fair-queue rules): one pattern for every such rule.
//
// Every method that changes state returns only after the change is durable;
// an answer that changes nothing (an existing queue, a duplicate FIFO send)
// waits until the earlier change it reports is durable. Errors are
// *model.Error values wrapping model's sentinels; the texts come from
// model's constructors (QueueNotFoundError, ClosedError, …).
type Backend interface {
	Diagnostics

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
	// ListQueueStats reads every queue of account with its counts in one go
	// (metrics and the dashboard read them on every scrape or tick), in name
	// order.
	ListQueueStats(ctx context.Context, account string) ([]model.QueueInfo, error)
	// RecordConsumers replaces what the front named broker recorded of its
	// open consumer streams with recs, listed by ListConsumers for ttl
	// unless recorded again (the front's heartbeat), and forgets the
	// expired records of every broker (one killed stops its heartbeat). A
	// store that serves one broker only (the embedded store) records
	// nothing: its front lists its own streams.
	RecordConsumers(ctx context.Context, broker string, recs []model.ConsumerRecord, ttl time.Duration) error
	// ListConsumers returns the unexpired records of the streams open on q,
	// of every broker (none on a store that records nothing).
	ListConsumers(ctx context.Context, q model.QueueRef) ([]model.ConsumerInfo, error)
	// UpdateQueue changes the queue's settings or tags as change says
	// (plan.QueueUpdate.Apply: the rule and its errors), atomically with
	// respect to every other update of the queue (a read-modify-write under
	// the backend's lock or in one transaction). A refused change writes
	// nothing and its error is returned as it is.
	UpdateQueue(ctx context.Context, q model.QueueRef, change model.QueueChange) error
	// DeleteQueue deletes a queue: waiting receives end with ErrQueueDoesNotExist,
	// its receipts stop working, its move tasks are forgotten, and its
	// messages are reclaimed in the background.
	DeleteQueue(ctx context.Context, q model.QueueRef) error
	// PurgeQueue deletes every message of the queue (ready, delayed and in
	// flight) and forgets its FIFO dedup window and receive attempts. When
	// minInterval > 0, plan.AllowPurge refuses a purge within minInterval of
	// the queue's last one, atomically with the purge.
	PurgeQueue(ctx context.Context, q model.QueueRef, minInterval time.Duration) error

	// Send stores messages. The backend reads the queue's settings and
	// depth (QueueStats.Depth) and plans the send with plan.Send: per-entry
	// failures are in the results; a send past MaxDepth is refused whole
	// (*model.DepthError). Each message is stored with its plan's Priority
	// and MaxAttempts.
	Send(ctx context.Context, q model.QueueRef, entries []model.SendEntry) ([]model.SendResult, error)
	// Receive leases up to the planned number of messages (plan.Receive,
	// plan.ClaimRoom). It waits up to the wait time for a first message and
	// returns as soon as one is available. A cancelled ctx ends the wait
	// with ctx.Err() and claims nothing. Each delivery adds one to the
	// message's ReceiveCount and Attempts and sets LastReceiveAt. A message
	// whose receive would start an attempt past its limit
	// (plan.ShouldDeadLetterOnReceive) moves to the dead-letter queue
	// instead of being returned. A lease that ended unsettled is planned
	// with plan.LeaseExpiry when the backend finds it (it may dead-letter
	// the message or make it back off). A paused queue (QueueConfig.Paused)
	// delivers nothing: the receive waits as on an empty queue, and an
	// UpdateQueue that resumes it wakes the waiting receives on every
	// broker. On an at-most-once queue the claimed messages are deleted in
	// the same atomic step, durably before the answer.
	Receive(ctx context.Context, req model.ReceiveRequest) ([]model.Delivery, error)
	// Delete deletes leased messages, one LeaseOutcome per receipt. A FIFO
	// delete of a lease that ended is LeaseEnded (its group lock is gone);
	// on a standard queue the latest lease deletes even after it ended,
	// unless the message is backing off or snoozed (delayed after a
	// failure): that receipt is LeaseStale. On a queue with a
	// CompletedRetention, each deleted message leaves a completed record
	// (model.MessageRecord) in the same atomic step, with results[i] (an
	// ack's result, at most model.MaxResultBytes, checked by the front;
	// results is nil or has one entry per receipt, nil for none).
	Delete(ctx context.Context, q model.QueueRef, receipts []model.Receipt, results []*string) ([]model.LeaseOutcome, error)
	// ChangeVisibility changes leases as plan.LeaseChange plans each one
	// (extend, nack with backoff, snooze, dead-letter now), counted from
	// now. A lease that ended is LeaseEnded; a receipt of a message that is
	// backing off or snoozed is LeaseStale, except on an at-most-once queue
	// (plan.VisibilityOutcome), where every received message is gone and a
	// stale receipt is LeaseEnded. A FateDeadLetter moves the message as a
	// receive past its limit does (plan.DeadLetter), keeping the plan's
	// reason.
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
	// LookupMessage finds message id in q without changing anything: the
	// live message with its state as Browse shows it (an expired one is not
	// live), else the record q keeps of it (a completed, expired or
	// replayed message, for its queue's CompletedRetention), else neither.
	// Ids compare in any case. The front turns what it finds into a status
	// (broker.Broker.MessageStatus).
	LookupMessage(ctx context.Context, q model.QueueRef, id string) (model.MessageLookup, error)

	// Message move tasks (SQS's StartMessageMoveTask, ListMessageMoveTasks,
	// CancelMessageMoveTask; the native API's replays). What an
	// implementation must do (broker/brokertest/movetask.go and replay.go
	// test it):
	//   - A task moves the messages its source held when it started, oldest
	//     (SentAt) first; messages that arrive later are not part of it.
	//     Messages in flight when the task reaches them stay in the source.
	//   - On a FIFO source, once the task passes over a message of a group
	//     because it is in flight, it moves no later message of that group
	//     (even if the lease ends, or the backend restarts, meanwhile): they
	//     stay in the source behind it, in order, so that no group's order
	//     breaks in the destination. The other groups move whole. ToMove
	//     still counts every message the source held at the start, so a
	//     task that completes may have Moved < ToMove.
	//   - A moved message is a new message on its destination: a new message
	//     id, SentAt = the move time (retention starts again), receive count
	//     0, the destination's DelaySeconds applied, body, attributes, system
	//     attributes and sender kept, DeadLetterSource cleared. The copy to
	//     the destination, the delete from the source and the task's progress
	//     count are one durable write: a message is never lost, nor moved
	//     twice.
	//   - MoveTaskRequest.MessageIDs, when given, limits the task to those
	//     messages (in move order; ids not in the source when the task starts
	//     are skipped, and ToMove counts the others), and Edit changes each
	//     moved message (plan.ApplyEdit); the selection and the edit are kept
	//     with the task, durably, so a restart resumes the same selection. An
	//     edited message that does not fit its destination stays in the
	//     source and is counted in Skipped.
	//   - The rate is MaxPerSecond (DefaultMoveRate if 0) on the backend's
	//     Clock, so a fake clock drives it; progress (Moved) is visible while
	//     it runs.
	//   - A move into a full queue waits (plan.MoveWalk.Depth): a step moves
	//     what its destination's MaxDepth (or LowPriorityMaxDepth) admits,
	//     possibly nothing, and the task, still RUNNING, tries again
	//     plan.MoveWaitRetry later. Dead-lettering never waits.
	//   - When a queue the task writes to (or its source) no longer exists,
	//     the task ends FAILED with FailureReason MoveTaskFailureNoQueue; a
	//     message without DeadLetterSource, with no Destination given, fails
	//     it the same way.
	//   - Tasks are durable backend state: they survive a restart (a RUNNING
	//     task resumes, a CANCELLING one becomes CANCELLED) and are shared by
	//     every broker of a shared backend. They run in goroutines the
	//     backend owns and Close stops.
	//
	// The front checks a start before it reaches the backend: the rate,
	// that the source exists and is some queue's dead-letter queue, that the
	// destination exists, differs from the source and has its type. The
	// backend makes the atomic part of the decision.

	// StartMoveTask starts a task and returns it (RUNNING). Errors: the
	// source is gone or is another queue than req.SourceID
	// (MoveSourceNotFoundError), likewise the destination
	// (MoveDestinationNotFoundError); the source already has a RUNNING task
	// (MoveTaskRunningError).
	StartMoveTask(ctx context.Context, req model.MoveTaskRequest) (model.MoveTask, error)
	// ListMoveTasks returns the most recent tasks of source, newest first, at
	// most limit (1..MaxListMoveTasks, checked by the front). A missing
	// source gives ErrQueueDoesNotExist.
	ListMoveTasks(ctx context.Context, source model.QueueRef, limit int) ([]model.MoveTask, error)
	// CancelMoveTask cancels the RUNNING task id of source and returns it
	// (CANCELLING, or already CANCELLED) with its moved count; messages moved
	// so far stay moved. A missing source gives ErrQueueDoesNotExist, an
	// unknown task MoveTaskNotFoundError, a task that is not RUNNING
	// MoveTaskNotRunningError.
	CancelMoveTask(ctx context.Context, source model.QueueRef, id string) (model.MoveTask, error)

	// Schedules (broker.Broker.CreateSchedule and the others;
	// broker/brokertest/schedule.go tests them). What an implementation
	// must do:
	//   - A schedule is durable backend state of its account, keyed by
	//     (account, name), shared by every broker of a shared backend. The
	//     front has validated it (its spec and time zone with package cron,
	//     its message as a send of it to its queue) and set its ID,
	//     CreatedAt and first NextRun (plan.ScheduleFirstRun).
	//   - The backend runs the schedules in a duty it owns (a
	//     lifecycle.Duty on its Clock, which Close stops): it wakes at the
	//     earliest NextRun, at once when a schedule is created or resumed
	//     here, and on a shared store also at most every few seconds, to
	//     see other brokers' schedules. For each schedule it steps while
	//     plan.ScheduleDue finds a step.
	//   - A step is one atomic write (one Pebble batch, one transaction):
	//     it moves NextRun from the instant it read to step.Next, counts the
	//     missed runs, and stores the run's message
	//     (Schedule.RunEntry(step.Run)) into the schedule's queue as Send
	//     stores a message (plan.Send, deduplication and MaxDepth
	//     included). It is a compare-and-set on NextRun: a step that finds
	//     NextRun moved (another broker's step), the schedule paused or
	//     deleted, stores nothing. So every run is stored once, across
	//     brokers and crashes.
	//   - A message the queue refuses (the queue is gone, full, or refuses
	//     the message as plan.Send does) is not stored; the step still
	//     moves on, and records the refusal (LastError, LastErrorAt, with
	//     model.ScheduleRunError). A store failure (a write, a connection)
	//     moves nothing: the duty retries, and the run is missed once the
	//     grace has passed.

	// CreateSchedule stores s, or returns the schedule of that name
	// unchanged with created == false (the front compares them).
	CreateSchedule(ctx context.Context, s model.Schedule) (sch model.Schedule, created bool, err error)
	// GetSchedule returns a schedule (model.ScheduleNotFoundError when
	// there is none).
	GetSchedule(ctx context.Context, ref model.ScheduleRef) (model.Schedule, error)
	// ListSchedules returns the schedules of account whose names start
	// with prefix and sort after `after` (bytewise), in name order, at
	// most limit of them (limit <= 0: all).
	ListSchedules(ctx context.Context, account, prefix, after string, limit int) ([]model.Schedule, error)
	// SetSchedulePaused pauses a schedule (it sends nothing until resumed)
	// or resumes it, and returns it. A resume plans with
	// plan.ScheduleResume in the same atomic step as a run's (it may store
	// a MissedOnce message); pausing a paused schedule, or resuming a
	// running one, changes nothing.
	SetSchedulePaused(ctx context.Context, ref model.ScheduleRef, paused bool) (model.Schedule, error)
	// DeleteSchedule deletes a schedule; a run being stored meanwhile is
	// stored whole or not at all.
	DeleteSchedule(ctx context.Context, ref model.ScheduleRef) error

	// Receipts returns the codec of the receipt key kept in the store
	// (ReceiptCodec): the key is made once when the store is created and
	// read when it is opened, so handles survive restarts and every broker
	// sharing the store accepts the others'. The backend encodes the
	// handles of its deliveries with it, and the front decodes with it.
	// Never nil once the backend is open.
	Receipts() *model.ReceiptCodec
	// Clock is the backend's clock (Options.Clock), which the front it
	// serves uses too: one clock for leases, delays, retention and the
	// front's instants.
	Clock() model.Clock

	// Close stops background work, syncs and releases the store. Idempotent.
	Close() error
}

// Diagnostics is what a backend tells about its store, for /readyz,
// metrics, backups and the process's exit (the front passes it on; see
// broker.Broker). A figure a store does not have is reported as such, not
// as a zero.
type Diagnostics interface {
	// Failed is closed when the store fail-stops after a write or sync
	// error: every call is refused from then on, and the process should
	// restart to recover (sluice serve exits with status 1). A store that
	// never fail-stops returns a channel that is never closed.
	Failed() <-chan struct{}
	// Syncs counts the store's log syncs since it opened (group commit
	// shows as several changes per sync); ok is false for a store without
	// a log of its own (PostgreSQL).
	Syncs() (n uint64, ok bool)
	// Ping checks that the store answers (a round trip to a server, a read
	// of a local store).
	Ping(ctx context.Context) error
	// PoolStats are the store's connection pool figures; ok is false for a
	// store without a pool (the embedded store).
	PoolStats() (s model.PoolStats, ok bool)
	// Backups reports whether the store takes online backups (Backup); a
	// store backed up with tools of its own (PostgreSQL) does not.
	Backups() bool
	// Backup writes a consistent copy of the store, holding every change
	// acknowledged before the call, into the new directory dir (an
	// fs.ErrExist error when it exists). A store without Backups answers
	// model.BackupsUnsupportedError.
	Backup(ctx context.Context, dir string) error
}

// QueueSpec is a queue to create: its account and valid name, its typed
// settings and tags.
type QueueSpec struct {
	model.QueueRef
	Config model.QueueConfig
	Tags   map[string]string
}

// Options are the settings every backend takes (each backend's Config
// embeds them).
type Options struct {
	// Clock drives leases, delays, retention and move-task pacing, for the
	// backend and the front that serves it (Backend.Clock). Default
	// model.RealClock; tests pass a *clocktest.FakeClock.
	Clock model.Clock
	// Logger receives structured logs. Default: discard (slog.Default() is
	// never used).
	Logger *slog.Logger
	// Observer, when not nil, is told what only the backend sees (messages
	// dead-lettered and damaged, messages sent by schedules' runs, store
	// syncs), for metrics. Default nil. Give the front the same observer in
	// its own broker.Config: it counts the rest (the other sends, received,
	// deleted, nacked, refused).
	Observer model.Observer
}

// WithDefaults returns o with zero fields set to their defaults.
func (o Options) WithDefaults() Options {
	if o.Clock == nil {
		o.Clock = model.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Sizer is an optional capability of a Backend (the front asserts it): how
// much room its store takes and has left, for the dashboard's overview
// (GET /v1/overview). A backend without it reports nothing.
type Sizer interface {
	// StoreSize reads the store's figures: one statfs and the store's own
	// accounting (the embedded store), or one query (PostgreSQL).
	StoreSize(ctx context.Context) (model.StoreSize, error)
}
