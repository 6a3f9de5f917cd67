package broker

import (
	"context"
	"errors"
	"log/slog"
	"strings"
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
	ref, err := b.resolve(ctx, ActionStartMoveTask, req.Source)
	if err != nil {
		return MoveTask{}, sourceErr(err)
	}
	src, err := b.backend.GetQueue(ctx, ref)
	if err != nil {
		return MoveTask{}, sourceErr(err)
	}
	isDLQ, err := b.isDeadLetterQueue(ctx, ref)
	if err != nil {
		return MoveTask{}, err
	}
	if !isDLQ {
		return MoveTask{}, MoveSourceNotDLQError()
	}
	req.Account, req.SourceID, req.DestinationID = ref.Account, src.ID, 0
	if req.Destination != "" {
		dst, err := b.backend.GetQueue(ctx, QueueRef{Account: ref.Account, Name: req.Destination})
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
	t, err := mt.StartMoveTask(ctx, req)
	if err == nil {
		dst := req.Destination
		if dst == "" {
			dst = "(each message's source queue)"
		}
		b.audit(ctx, "replay", ref.String(), slog.String("destination", dst), slog.Int("ids", len(req.MessageIDs)),
			slog.String("message_ids", strings.Join(req.MessageIDs, ",")),
			slog.Bool("edited", req.Edit != nil), slog.String("task", t.ID))
	}
	return t, err
}

// isDeadLetterQueue reports whether some other queue of its account has a
// RedrivePolicy that names the queue. (A scan of the queues: starting a task
// is rare.)
func (b *Broker) isDeadLetterQueue(ctx context.Context, ref QueueRef) (bool, error) {
	name := ref.Name
	queues, err := b.backend.ListQueues(ctx, ref.Account, "", "", 0)
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
	ref, err := b.resolve(ctx, ActionListMoveTasks, source)
	if err != nil {
		return nil, sourceErr(err)
	}
	tasks, err := mt.ListMoveTasks(ctx, ref, limit)
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
	ref, err := b.resolve(ctx, ActionCancelMoveTask, source)
	if err != nil {
		return MoveTask{}, sourceErr(err)
	}
	t, err := mt.CancelMoveTask(ctx, ref, id)
	return t, sourceErr(err)
}

// ReplayRequest is a replay of dead letters (Broker.Replay).
type ReplayRequest struct {
	// IDs, when not empty, are the dead letters to replay (1..100); empty
	// replays every one.
	IDs []string
	// Destination is the queue to replay into; "" sends each message back
	// to the queue it was dead-lettered from.
	Destination string
	// Edit, when not nil, changes each replayed message (needs IDs).
	Edit *MessageEdit
	// MaxPerSecond caps the rate (0: the default).
	MaxPerSecond int
}

// Replay starts a move task that replays dead letters from queue dlq (listed
// by ListMoveTasks, rate-limited, with progress): all of them, or the chosen
// ids, optionally with an edited body or attributes. A replayed message is
// new (a new id, its attempts reset); its attributes (the correlation id
// among them) travel with it unless edited. Logged as an audit line.
func (b *Broker) Replay(ctx context.Context, dlq string, req ReplayRequest) (MoveTask, error) {
	if len(req.IDs) > MaxDeleteByID {
		return MoveTask{}, invalidParam(len(req.IDs), "ids", "give at most 100 message ids (or none, to replay every dead letter).")
	}
	if req.Edit != nil {
		if len(req.IDs) == 0 {
			return MoveTask{}, invalidParam("edit", "edit", "an edit-and-replay needs the ids of the messages it edits.")
		}
		if err := validateEdit(req.Edit); err != nil {
			return MoveTask{}, err
		}
	}
	if len(req.IDs) > 0 || req.Edit != nil {
		if _, ok := b.backend.(SelectiveMover); !ok {
			return MoveTask{}, Errorf(ErrUnsupportedOperation, "This broker's backend cannot replay chosen messages yet; replay the whole dead-letter queue.")
		}
	}
	return b.StartMoveTask(ctx, MoveTaskRequest{Source: dlq, Destination: req.Destination,
		MaxPerSecond: req.MaxPerSecond, MessageIDs: req.IDs, Edit: req.Edit})
}

// validateEdit checks an edit's body and attributes as a send checks them
// (the queue's size limit is checked when the message moves).
func validateEdit(e *MessageEdit) error {
	if e.Body != nil {
		if *e.Body == "" {
			return Errorf(ErrMissingParameter, "An edited body must not be empty.")
		}
		if !ValidBodyChars(*e.Body) {
			return Errorf(ErrInvalidMessageContents, "Invalid characters found. %s", validCharacters)
		}
	}
	if e.Attributes != nil {
		return ValidateMessageAttributes(e.Attributes)
	}
	return nil
}
