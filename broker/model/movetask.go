package model

import (
	"encoding/base64"
	"encoding/json"
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
	// source (a replay of chosen dead letters; Broker.Replay). Every
	// backend honours it (storage.Backend).
	MessageIDs []string
	// Edit, when not nil, changes each moved message (an edit-and-replay).
	// Every backend honours it (storage.Backend).
	Edit *MessageEdit
}

// MessageEdit changes the content of replayed messages.
type MessageEdit struct {
	// Body, when not nil, replaces the body.
	Body *string
	// Attributes, when not nil, replace the user message attributes.
	Attributes map[string]MessageAttribute
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

// ValidateMoveRate checks MaxNumberOfMessagesPerSecond (0 = not given).
func ValidateMoveRate(n int) error {
	if n < 0 || n > MaxMoveRate {
		return InvalidParameterError(n, "MaxNumberOfMessagesPerSecond", "must be between 1 and 500, if provided.")
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
func InvalidTaskHandleError() error {
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
		return "", "", InvalidTaskHandleError()
	}
	b, err := base64.StdEncoding.DecodeString(h)
	if err != nil {
		if b, err = base64.RawStdEncoding.DecodeString(h); err != nil {
			return "", "", InvalidTaskHandleError()
		}
	}
	var th taskHandle
	if json.Unmarshal(b, &th) != nil || th.TaskID == "" || th.SourceARN == "" {
		return "", "", InvalidTaskHandleError()
	}
	return th.TaskID, th.SourceARN, nil
}
