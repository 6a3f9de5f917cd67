package broker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"maps"
	"slices"
	"time"
)

// Message move tasks (SQS's StartMessageMoveTask, ListMessageMoveTasks,
// CancelMessageMoveTask): moving the messages of a dead-letter queue back to
// their source queues, or to a given destination, at a bounded rate.

// MoveTaskStatus is the state of a move task, as SQS names it.
type MoveTaskStatus string

// The move task states. A task goes RUNNING → COMPLETED, or RUNNING →
// CANCELLING → CANCELLED after a cancel, or RUNNING → FAILED when a queue it
// needs disappears. Only a RUNNING task is active; at most one task per
// source queue is active.
const (
	MoveTaskRunning    MoveTaskStatus = "RUNNING"
	MoveTaskCompleted  MoveTaskStatus = "COMPLETED"
	MoveTaskCancelling MoveTaskStatus = "CANCELLING"
	MoveTaskCancelled  MoveTaskStatus = "CANCELLED"
	MoveTaskFailed     MoveTaskStatus = "FAILED"
)

// Limits of move tasks.
const (
	// MaxMoveRate is the largest MaxNumberOfMessagesPerSecond.
	MaxMoveRate = 500
	// DefaultMoveRate is the rate of a task started without one.
	DefaultMoveRate = MaxMoveRate
	// MaxListMoveTasks is the most tasks ListMoveTasks returns; DefaultListMoveTasks
	// is how many it returns when the caller gives no limit.
	MaxListMoveTasks     = 10
	DefaultListMoveTasks = 1
)

// MoveTaskFailureNoQueue is the FailureReason of a task whose destination (or
// source) queue was deleted while it ran, as SQS reports it.
const MoveTaskFailureNoQueue = "AWS.SimpleQueueService.NonExistentQueue"

// MoveTaskRequest starts a move task.
type MoveTaskRequest struct {
	// Source is the name of the queue to move messages from. It must be the
	// dead-letter queue of at least one queue (some queue's RedrivePolicy
	// names it).
	Source string
	// Destination is the name of the queue to move every message to; "" means
	// each message goes back to the queue it was dead-lettered from
	// (Message.DeadLetterSource).
	Destination string
	// MaxPerSecond caps the rate, 1..MaxMoveRate; 0 lets the backend choose
	// (DefaultMoveRate).
	MaxPerSecond int
	// Account owns the source and destination queues (see QueueRef), set
	// by the front.
	Account string
	// SourceID and DestinationID are the internal ids of the queues the
	// front checked (set by the front): a backend refuses the task when the
	// live queue of that name is another one by then (deleted and re-created).
	SourceID, DestinationID uint64
	// MessageIDs, when not empty, limits the task to these messages of the
	// source (a replay of chosen dead letters; Broker.Replay). Only a
	// backend that is a SelectiveMover is given it.
	MessageIDs []string
	// Edit, when not nil, changes each moved message (an edit-and-replay).
	// Only a backend that is a SelectiveMover is given it.
	Edit *MessageEdit
}

// MessageEdit changes the content of replayed messages.
type MessageEdit struct {
	// Body, when not nil, replaces the body.
	Body *string
	// Attributes, when not nil, replace the user message attributes.
	Attributes map[string]MessageAttribute
}

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

// MoveTask is the state of one move task.
type MoveTask struct {
	// ID is the task id (a UUID); with the source it makes the task handle
	// (EncodeTaskHandle).
	ID          string
	Source      string
	Destination string // "" = each message's original source queue
	// MaxPerSecond is the rate asked for (0: not given, DefaultMoveRate used).
	MaxPerSecond int
	Status       MoveTaskStatus
	// Moved counts the messages moved so far; ToMove the messages the source
	// held when the task started (approximate, as in SQS).
	Moved, ToMove int64
	// Skipped counts the messages an edit-and-replay left in the source
	// because their edited form does not fit their destination (ApplyEdit);
	// they are not counted in Moved.
	Skipped int64
	// FailureReason says why a FAILED task failed (MoveTaskFailureNoQueue).
	FailureReason string
	StartedAt     time.Time
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
	StartMoveTask(ctx context.Context, req MoveTaskRequest) (MoveTask, error)
	// ListMoveTasks returns the most recent tasks of source, newest first, at
	// most limit (1..MaxListMoveTasks, checked by the front). A missing
	// source gives ErrQueueDoesNotExist.
	ListMoveTasks(ctx context.Context, source QueueRef, limit int) ([]MoveTask, error)
	// CancelMoveTask cancels the RUNNING task id of source and returns it
	// (CANCELLING, or already CANCELLED) with its moved count; messages moved
	// so far stay moved. A missing source gives ErrQueueDoesNotExist, an
	// unknown task MoveTaskNotFoundError, a task that is not RUNNING
	// MoveTaskNotRunningError.
	CancelMoveTask(ctx context.Context, source QueueRef, id string) (MoveTask, error)
}

// ValidateMoveRate checks MaxNumberOfMessagesPerSecond (0 = not given).
func ValidateMoveRate(n int) error {
	if n < 0 || n > MaxMoveRate {
		return invalidParam(n, "MaxNumberOfMessagesPerSecond", "must be between 1 and 500, if provided.")
	}
	return nil
}

// MoveRate is the effective rate of a task: MaxPerSecond, or DefaultMoveRate.
func (t MoveTask) MoveRate() int {
	if t.MaxPerSecond <= 0 {
		return DefaultMoveRate
	}
	return t.MaxPerSecond
}

// Active reports whether the task still runs (RUNNING or CANCELLING).
func (t MoveTask) Active() bool { return t.Status.Active() }

// Active reports whether a task in state s still runs: s is one of
// ActiveMoveTaskStatuses.
func (s MoveTaskStatus) Active() bool { return slices.Contains(ActiveMoveTaskStatuses, s) }

// ActiveMoveTaskStatuses are the states of a task that still runs: at most
// one task per source queue is in one of them.
var ActiveMoveTaskStatuses = []MoveTaskStatus{MoveTaskRunning, MoveTaskCancelling}

// The errors of move tasks, in SQS's words.

// MoveSourceNotFoundError: the source queue of a task does not exist.
func MoveSourceNotFoundError() error {
	return Errorf(ErrResourceNotFound, "The resource that you specified for the SourceArn parameter doesn't exist.")
}

// MoveDestinationNotFoundError: the destination queue of a task does not exist.
func MoveDestinationNotFoundError() error {
	return Errorf(ErrResourceNotFound, "The resource that you specified for the DestinationArn parameter doesn't exist.")
}

// MoveTaskNotFoundError: no task of the source has the id.
func MoveTaskNotFoundError() error {
	return Errorf(ErrResourceNotFound, "Task does not exist.")
}

// MoveSourceNotDLQError: the source is no queue's dead-letter queue.
func MoveSourceNotDLQError() error {
	return Errorf(ErrInvalidParameterValue, "Source queue must be configured as a Dead Letter Queue.")
}

// MoveTaskRunningError: the source already has a RUNNING task.
func MoveTaskRunningError() error {
	return Errorf(ErrInvalidParameterValue, "There is already a task running. Only one active task is allowed for a source queue arn at a given time.")
}

// MoveTaskNotRunningError: cancelling a task that already ended.
func MoveTaskNotRunningError(status MoveTaskStatus) error {
	return Errorf(ErrInvalidParameterValue, "Only active tasks can be cancelled. The task is %s.", status)
}

// invalidTaskHandle is CancelMessageMoveTask's answer to a handle that does not decode.
func invalidTaskHandle() error {
	return Errorf(ErrInvalidParameterValue, "Value for parameter TaskHandle is invalid.")
}

// taskHandle is the JSON inside a task handle, as AWS encodes it.
type taskHandle struct {
	TaskID    string `json:"taskId"`
	SourceARN string `json:"sourceArn"`
}

// EncodeTaskHandle returns the TaskHandle of task id on the queue sourceARN:
// base64 of {"taskId":"<id>","sourceArn":"<arn>"}, as AWS makes them.
func EncodeTaskHandle(id, sourceARN string) string {
	b, _ := json.Marshal(taskHandle{TaskID: id, SourceARN: sourceARN})
	return base64.StdEncoding.EncodeToString(b)
}

// DecodeTaskHandle parses a TaskHandle into the task id and the source queue
// ARN. A handle that does not decode, or lacks either part, gives
// ErrInvalidParameterValue "Value for parameter TaskHandle is invalid."
func DecodeTaskHandle(h string) (id, sourceARN string, err error) {
	if len(h) > 2048 {
		return "", "", invalidTaskHandle()
	}
	b, err := base64.StdEncoding.DecodeString(h)
	if err != nil {
		if b, err = base64.RawStdEncoding.DecodeString(h); err != nil {
			return "", "", invalidTaskHandle()
		}
	}
	var th taskHandle
	if json.Unmarshal(b, &th) != nil || th.TaskID == "" || th.SourceARN == "" {
		return "", "", invalidTaskHandle()
	}
	return th.TaskID, th.SourceARN, nil
}

// MovePace is how long a move task waits after moving n messages at rate
// messages per second (rate <= 0: DefaultMoveRate), so that over any whole
// number of steps it moves at most rate messages per second.
func MovePace(n, rate int) time.Duration {
	if rate <= 0 {
		rate = DefaultMoveRate
	}
	return time.Duration(n) * time.Second / time.Duration(rate)
}

// MoveChunk is how many messages a move task moves in one step (one store
// write) at rate messages per second: a tenth of a second's worth at most
// 100 and at least 1, so progress shows often and a write stays small.
func MoveChunk(rate int) int {
	if rate <= 0 {
		rate = DefaultMoveRate
	}
	return max(1, min(100, rate/10))
}

// MoveWaitRetry is how long a move task whose next message's destination is
// full (MoveWait) waits before its next step.
const MoveWaitRetry = time.Second

// MoveItem is one message of a move task's source as a step of the task
// sees it, under the backend's lock or in its transaction.
type MoveItem struct {
	// Gone: deleted since the task started, or past the source's retention
	// (the sweeper's, not the task's).
	Gone bool
	// Group is the message's FIFO group ("" on a standard queue).
	Group string
	// Held: in flight under a live lease.
	Held bool
	// DeadLetterSource is the queue the message was dead-lettered from.
	DeadLetterSource string
	// Low: the moved message will be of priority below 0 (EditedPriority),
	// which LowPriorityMaxDepth limits.
	Low bool
}

// MoveAction is what a step does with one MoveItem.
type MoveAction uint8

// The move actions.
const (
	// MoveSkip: leave the message in the source (gone, or behind a held
	// message of its group) and go on.
	MoveSkip MoveAction = iota
	// MoveHold: the message is held by a consumer: it stays, and so does
	// every later message of its group (the walk remembers the group).
	MoveHold
	// MoveOut: move the message to the target the walk names.
	MoveOut
	// MoveFail: the message has no live target: end the task FAILED with
	// MoveTaskFailureNoQueue after the messages moved before it.
	MoveFail
	// MoveWait: the message's target is full (AdmitSend refuses one more):
	// end this step before it; the message and every later one stay for a
	// later step, MoveWaitRetry from now, so the move order holds.
	MoveWait
)

// MoveWalk is the rule of a move step, shared by every backend: it decides,
// message by message in move order (oldest first), what happens to each. It
// holds the FIFO groups blocked so far, which a backend keeps with the task
// (durably) so that a later step, even after a restart, keeps them blocked.
type MoveWalk struct {
	// Source is the task's source queue and Destination its fixed
	// destination ("" = each message's DeadLetterSource).
	Source, Destination string
	// Blocked are the groups with a message that stayed (MoveHold).
	Blocked map[string]bool
	// Live reports whether a live queue of the given name exists (only
	// asked for a message's DeadLetterSource when Destination is "").
	Live func(name string) bool
	// Depth, when not nil, gives a target's settings and its depth
	// (QueueStats.Depth) counting the messages this step already moved
	// there; a MoveOut that AdmitSend would refuse becomes MoveWait.
	Depth func(target string) (QueueConfig, int64)
}

// Next decides what happens to it and, for MoveOut, names the target queue.
func (w *MoveWalk) Next(it MoveItem) (MoveAction, string) {
	switch {
	case it.Gone:
		return MoveSkip, ""
	case it.Group != "" && w.Blocked[it.Group]:
		return MoveSkip, ""
	case it.Held:
		if it.Group != "" {
			if w.Blocked == nil {
				w.Blocked = map[string]bool{}
			}
			w.Blocked[it.Group] = true
		}
		return MoveHold, ""
	case w.Destination != "":
		return w.admit(it, w.Destination)
	case it.DeadLetterSource == "" || it.DeadLetterSource == w.Source || w.Live == nil || !w.Live(it.DeadLetterSource):
		return MoveFail, ""
	}
	return w.admit(it, it.DeadLetterSource)
}

// admit is the backpressure check of a MoveOut to target.
func (w *MoveWalk) admit(it MoveItem, target string) (MoveAction, string) {
	if w.Depth != nil {
		c, depth := w.Depth(target)
		low := 0
		if it.Low {
			low = 1
		}
		if AdmitSend(c, target, depth, 1, low) != nil {
			return MoveWait, target
		}
	}
	return MoveOut, target
}

// ApplyEdit is what an edit-and-replay (MoveTaskRequest.Edit) makes of one
// moved message bound for a queue with settings c: its body and attributes
// with e applied, and its Sluice options (MessageOptions: the ones it had,
// opts, unless its attributes are replaced, when they are read from the new
// ones; a Sluice.CorrelationId the new ones do not name is kept). A nil e
// changes nothing and checks nothing, as a plain move. An
// edited message larger than c's MaximumMessageSize, or whose new Sluice.*
// attributes c refuses (Sluice.MaxAttempts without a RedrivePolicy), gives
// an error: the message is not moved; it stays in the source and the task
// counts it in MoveTask.Skipped (it goes on with the other messages).
func ApplyEdit(e *MessageEdit, c QueueConfig, body string, attrs map[string]MessageAttribute, opts MessageOptions) (string, map[string]MessageAttribute, MessageOptions, error) {
	if e == nil {
		return body, attrs, opts, nil
	}
	if e.Body != nil {
		body = *e.Body
	}
	if e.Attributes != nil {
		// A replayed message keeps its correlation id: an edit that does
		// not name one carries the original's over.
		cid, had := attrs[MsgAttrCorrelationID]
		attrs = e.Attributes
		if _, named := attrs[MsgAttrCorrelationID]; had && !named {
			attrs = maps.Clone(attrs)
			attrs[MsgAttrCorrelationID] = cid
		}
		var err error
		if opts, err = ParseMessageOptions(c, attrs); err != nil {
			return "", nil, MessageOptions{}, err
		}
	}
	if size := MessageSize(body, attrs); c.MaxMessageSize > 0 && size > c.MaxMessageSize {
		return "", nil, MessageOptions{}, Errorf(ErrInvalidParameterValue, "The edited message is %d bytes; its destination's MaximumMessageSize is %d.", size, c.MaxMessageSize)
	}
	return body, attrs, opts, nil
}

// EditedPriority is the priority a message of priority old has after the
// edit e: the edited attributes' Sluice.Priority (0 without one), or old
// when e does not replace the attributes. An invalid value reads as old (the
// message is skipped anyway: ApplyEdit refuses it).
func EditedPriority(e *MessageEdit, old int) int {
	if e == nil || e.Attributes == nil {
		return old
	}
	a, ok := e.Attributes[MsgAttrPriority]
	if !ok {
		return 0
	}
	n, err := optInt(MsgAttrPriority, a, MinPriority, MaxPriority)
	if err != nil {
		return old
	}
	return n
}
