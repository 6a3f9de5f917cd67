package storage

import (
	"context"
	"github.com/sluicemq/sluice/broker/model"
)

// SelectiveMover is a MoveTasker that honours MoveTaskRequest.MessageIDs
// and Edit: the task moves only the chosen messages (in move order; ids not
// in the source when the task starts are skipped, and ToMove counts the
// others), each with the edit applied (ApplyEdit; a moved message is new: a
// new id, its counts reset, as every move does). The chosen messages and the
// edit are kept with the task, durably: a restart resumes the same
// selection. An edited message that does not fit its destination stays in
// the source and is counted in Skipped (see ApplyEdit).
type SelectiveMover interface {
	MoveTasker
	SelectiveMoves()
}

// MoveTasker is the optional capability of a Backend to run message move
// tasks. The API answers UnsupportedOperation for a backend without it.
//
// What an implementation must do (broker/brokertest/movetask.go tests it):
//   - A task moves the messages its source held when it started, oldest
//     (SentAt) first; messages that arrive later are not part of it.
//     Messages in flight when the task reaches them stay in the source.
//   - On a FIFO source, once the task passes over a message of a group
//     because it is in flight, it moves no later message of that group
//     (even if the lease ends, or the backend restarts, meanwhile): they stay
//     in the source behind it, in order, so that no group's order breaks in
//     the destination. The other groups move whole. ToMove still counts every
//     message the source held at the start, so a task that completes may
//     have Moved < ToMove.
//   - A moved message is a new message on its destination: a new message id,
//     SentAt = the move time (retention starts again), receive count 0, the
//     destination's DelaySeconds applied, body, attributes, system attributes
//     and sender kept, DeadLetterSource cleared. The copy to the destination,
//     the delete from the source and the task's progress count are one
//     durable write: a message is never lost, nor moved twice.
//   - The rate is MaxPerSecond (DefaultMoveRate if 0) on the backend's Clock,
//     so a FakeClock drives it; progress (Moved) is visible while it runs.
//   - A move into a full queue waits (MoveWalk.Depth): a step moves what
//     its destination's MaxDepth (or LowPriorityMaxDepth) admits, possibly
//     nothing, and the task, still RUNNING, tries again MoveWaitRetry later.
//     Dead-lettering never waits.
//   - When a queue the task writes to (or its source) no longer exists, the
//     task ends FAILED with FailureReason MoveTaskFailureNoQueue; a message
//     without DeadLetterSource, with no Destination given, fails it the same way.
//   - Tasks are durable backend state: they survive a restart (a RUNNING task
//     resumes, a CANCELLING one becomes CANCELLED) and are shared by every
//     broker of a shared backend. They run in goroutines the backend owns and
//     Close stops.
//
// The front (Broker) checks a start before it reaches the backend: the rate,
// that the source exists and is some queue's dead-letter queue, that the
// destination exists, differs from the source and has its type. The backend
// makes the atomic part of the decision.
type MoveTasker interface {
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
}
