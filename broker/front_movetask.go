package broker

import (
	"context"
	"errors"
)

// The front of message move tasks (MoveTasker): the checks that need no
// atomicity, then the backend's capability.

func (b *Broker) movers(action string) (MoveTasker, error) {
	mt, ok := b.backend.(MoveTasker)
	if !ok {
		return nil, unsupportedError(action)
	}
	return mt, nil
}

// unsupportedError is the answer to an action the backend does not provide.
func unsupportedError(action string) error {
	return Errorf(ErrUnsupportedOperation, "The action %s is not supported by this broker's backend.", action)
}

// sourceErr maps a missing source queue to the move tasks' own error.
func sourceErr(err error) error {
	if errors.Is(err, ErrQueueDoesNotExist) {
		return MoveSourceNotFoundError()
	}
	return err
}

// StartMoveTask starts a task moving the messages of a dead-letter queue
// (MoveTasker). Errors: the source does not exist (ErrResourceNotFound,
// MoveSourceNotFoundError); it is no queue's dead-letter queue, it already
// has a RUNNING task, or the rate is out of range (ErrInvalidParameterValue);
// the destination does not exist (ErrResourceNotFound,
// MoveDestinationNotFoundError), is the source, or has another type.
func (b *Broker) StartMoveTask(ctx context.Context, req MoveTaskRequest) (MoveTask, error) {
	mt, err := b.movers("StartMessageMoveTask")
	if err != nil {
		return MoveTask{}, err
	}
	if err := ValidateMoveRate(req.MaxPerSecond); err != nil {
		return MoveTask{}, err
	}
	src, err := b.backend.GetQueue(ctx, own(req.Source))
	if err != nil {
		return MoveTask{}, sourceErr(err)
	}
	isDLQ, err := b.isDeadLetterQueue(ctx, req.Source)
	if err != nil {
		return MoveTask{}, err
	}
	if !isDLQ {
		return MoveTask{}, MoveSourceNotDLQError()
	}
	req.Account, req.SourceID, req.DestinationID = "", src.ID, 0
	if req.Destination != "" {
		dst, err := b.backend.GetQueue(ctx, own(req.Destination))
		switch {
		case errors.Is(err, ErrQueueDoesNotExist):
			return MoveTask{}, MoveDestinationNotFoundError()
		case err != nil:
			return MoveTask{}, err
		case dst.ID == src.ID:
			return MoveTask{}, Errorf(ErrInvalidParameterValue, "Source and destination queues must be different.")
		case dst.Config.Fifo != src.Config.Fifo:
			return MoveTask{}, Errorf(ErrInvalidParameterValue, "The destination queue must be of the same type as the source queue (FIFO or standard).")
		}
		req.DestinationID = dst.ID
	}
	return mt.StartMoveTask(ctx, req)
}

// isDeadLetterQueue reports whether some other queue's RedrivePolicy names
// the queue name. (A scan of the queues: starting a task is rare.)
func (b *Broker) isDeadLetterQueue(ctx context.Context, name string) (bool, error) {
	queues, err := b.backend.ListQueues(ctx, "", "", "", 0)
	if err != nil {
		return false, err
	}
	for _, q := range queues {
		if r := q.Config.Redrive; r != nil && r.DeadLetterQueue == name && q.Name != name {
			return true, nil
		}
	}
	return false, nil
}

// ListMoveTasks returns the most recent tasks of source, newest first, at
// most limit (1..MaxListMoveTasks; 0 means DefaultListMoveTasks). A missing
// source gives ErrResourceNotFound (MoveSourceNotFoundError).
func (b *Broker) ListMoveTasks(ctx context.Context, source string, limit int) ([]MoveTask, error) {
	mt, err := b.movers("ListMessageMoveTasks")
	if err != nil {
		return nil, err
	}
	if limit == 0 {
		limit = DefaultListMoveTasks
	}
	if limit < 1 || limit > MaxListMoveTasks {
		return nil, invalidParam(limit, "MaxResults", "must be between 1 and 10.")
	}
	tasks, err := mt.ListMoveTasks(ctx, own(source), limit)
	return tasks, sourceErr(err)
}

// CancelMoveTask cancels the RUNNING task id of source and returns it
// (CANCELLING, or already CANCELLED) with its moved count; messages moved so
// far stay moved. A missing source gives MoveSourceNotFoundError, an unknown
// task MoveTaskNotFoundError (both ErrResourceNotFound), a task that is not
// RUNNING ErrInvalidParameterValue.
func (b *Broker) CancelMoveTask(ctx context.Context, source, id string) (MoveTask, error) {
	mt, err := b.movers("CancelMessageMoveTask")
	if err != nil {
		return MoveTask{}, err
	}
	t, err := mt.CancelMoveTask(ctx, own(source), id)
	return t, sourceErr(err)
}
