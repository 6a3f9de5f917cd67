package broker

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/sluicemq/sluice/broker/model"
)

// The front of message move tasks (storage.Backend.StartMoveTask and the
// others): the checks that need no
// atomicity, then the backend's capability.

// sourceErr maps a missing source queue to the move tasks' own error.
func sourceErr(err error) error {
	if errors.Is(err, model.ErrQueueDoesNotExist) {
		return model.MoveSourceNotFoundError()
	}
	return err
}

// StartMoveTask starts a task moving the messages of a dead-letter queue
// (storage.Backend.StartMoveTask). Errors: the source does not exist (ErrResourceNotFound,
// MoveSourceNotFoundError); it is no queue's dead-letter queue, it already
// has a RUNNING task, or the rate is out of range (ErrInvalidParameterValue);
// the destination does not exist (ErrResourceNotFound,
// MoveDestinationNotFoundError), is the source, or has another type.
func (b *Broker) StartMoveTask(ctx context.Context, req model.MoveTaskRequest) (model.MoveTask, error) {
	if err := model.ValidateMoveRate(req.MaxPerSecond); err != nil {
		return model.MoveTask{}, err
	}
	ref, err := b.resolve(ctx, model.ActionStartMoveTask, req.Source)
	if err != nil {
		return model.MoveTask{}, sourceErr(err)
	}
	src, err := b.backend.GetQueue(ctx, ref)
	if err != nil {
		return model.MoveTask{}, sourceErr(err)
	}
	isDLQ, err := b.isDeadLetterQueue(ctx, ref)
	if err != nil {
		return model.MoveTask{}, err
	}
	if !isDLQ {
		return model.MoveTask{}, model.MoveSourceNotDLQError()
	}
	req.Account, req.SourceID, req.DestinationID = ref.Account, src.ID, 0
	if req.Destination != "" {
		dst, err := b.backend.GetQueue(ctx, model.QueueRef{Account: ref.Account, Name: req.Destination})
		switch {
		case errors.Is(err, model.ErrQueueDoesNotExist):
			return model.MoveTask{}, model.MoveDestinationNotFoundError()
		case err != nil:
			return model.MoveTask{}, err
		case dst.ID == src.ID:
			return model.MoveTask{}, model.Errorf(model.ErrInvalidParameterValue, "Source and destination queues must be different.")
		case dst.Config.Fifo != src.Config.Fifo:
			return model.MoveTask{}, model.Errorf(model.ErrInvalidParameterValue, "The destination queue must be of the same type as the source queue (FIFO or standard).")
		}
		req.DestinationID = dst.ID
	}
	t, err := b.backend.StartMoveTask(ctx, req)
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
func (b *Broker) isDeadLetterQueue(ctx context.Context, ref model.QueueRef) (bool, error) {
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
func (b *Broker) ListMoveTasks(ctx context.Context, source string, limit int) ([]model.MoveTask, error) {
	if limit == 0 {
		limit = model.DefaultListMoveTasks
	}
	if limit < 1 || limit > model.MaxListMoveTasks {
		return nil, model.InvalidParameterError(limit, "MaxResults", "must be between 1 and 10.")
	}
	ref, err := b.resolve(ctx, model.ActionListMoveTasks, source)
	if err != nil {
		return nil, sourceErr(err)
	}
	tasks, err := b.backend.ListMoveTasks(ctx, ref, limit)
	return tasks, sourceErr(err)
}

// CancelMoveTask cancels the RUNNING task id of source and returns it
// (CANCELLING, or already CANCELLED) with its moved count; messages moved so
// far stay moved. A missing source gives MoveSourceNotFoundError, an unknown
// task MoveTaskNotFoundError (both ErrResourceNotFound), a task that is not
// RUNNING ErrInvalidParameterValue.
func (b *Broker) CancelMoveTask(ctx context.Context, source, id string) (model.MoveTask, error) {
	ref, err := b.resolve(ctx, model.ActionCancelMoveTask, source)
	if err != nil {
		return model.MoveTask{}, sourceErr(err)
	}
	t, err := b.backend.CancelMoveTask(ctx, ref, id)
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
	Edit *model.MessageEdit
	// MaxPerSecond caps the rate (0: the default).
	MaxPerSecond int
}

// Replay starts a move task that replays dead letters from queue dlq (listed
// by ListMoveTasks, rate-limited, with progress): all of them, or the chosen
// ids, optionally with an edited body or attributes. A replayed message is
// new (a new id, its attempts reset); its attributes (the correlation id
// among them) travel with it unless edited. Logged as an audit line.
func (b *Broker) Replay(ctx context.Context, dlq string, req ReplayRequest) (model.MoveTask, error) {
	if len(req.IDs) > MaxDeleteByID {
		return model.MoveTask{}, model.InvalidParameterError(len(req.IDs), "ids", "give at most 100 message ids (or none, to replay every dead letter).")
	}
	if req.Edit != nil {
		if len(req.IDs) == 0 {
			return model.MoveTask{}, model.InvalidParameterError("edit", "edit", "an edit-and-replay needs the ids of the messages it edits.")
		}
		if err := validateEdit(req.Edit); err != nil {
			return model.MoveTask{}, err
		}
	}
	return b.StartMoveTask(ctx, model.MoveTaskRequest{Source: dlq, Destination: req.Destination,
		MaxPerSecond: req.MaxPerSecond, MessageIDs: req.IDs, Edit: req.Edit})
}

// validateEdit checks an edit's body and attributes as a send checks them
// (the queue's size limit is checked when the message moves). An edit that
// gives a Sluice.TimeToLive is refused: a replayed message leaves its
// expiry behind (model/config_ttl.go), so the attribute would claim a time
// to live that nothing applies.
func validateEdit(e *model.MessageEdit) error {
	if e.Body != nil {
		if *e.Body == "" {
			return model.Errorf(model.ErrMissingParameter, "An edited body must not be empty.")
		}
		if !model.ValidBodyChars(*e.Body) {
			return model.Errorf(model.ErrInvalidMessageContents, "Invalid characters found. %s", model.ValidCharacters)
		}
	}
	if e.Attributes != nil {
		if a, ok := e.Attributes[model.MsgAttrTimeToLive]; ok {
			return model.InvalidParameterError(a.StringValue, model.MsgAttrTimeToLive,
				"an edit-and-replay takes no time to live: a replayed message has none (it left its expiry behind); remove the attribute.")
		}
		return model.ValidateMessageAttributes(e.Attributes)
	}
	return nil
}
