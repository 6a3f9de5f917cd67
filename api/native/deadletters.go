package native

import (
	"net/http"

	"github.com/sluicemq/sluice/api/native/wire"
	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
)

// The dead letters of a source queue: the messages its RedrivePolicy moved
// to its dead-letter queue. Browse, replay (a move task from the
// dead-letter queue back to the source), delete, and the list of replays.
//
// A dead-letter queue may serve several source queues. Browsing a source's
// dead letters shows only the ones that came from it; a replay of all of
// them is refused while the dead-letter queue serves another source too
// (it would move that source's messages here): replay chosen ids then.

func (h *Handler) browseDeadLetters(c *call) (any, error) {
	req, err := browseQuery(c)
	if err != nil {
		return nil, err
	}
	dlq, err := h.deadLetterQueue(c)
	if err != nil {
		return nil, err
	}
	// A page filtered here may be short (even empty) with a next cursor,
	// as a page of a filtered Browse may.
	return h.browse(c, dlq, req, func(m *model.Message) bool {
		return m.DeadLetterSource == c.queue
	})
}

// toTask converts a move task.
func toTask(t model.MoveTask) wire.Task {
	return wire.Task{ID: t.ID, Source: t.Source, Destination: t.Destination, Status: string(t.Status),
		Moved: t.Moved, ToMove: t.ToMove, Skipped: t.Skipped, MaxPerSecond: t.MoveRate(), FailureReason: t.FailureReason, StartedAt: t.StartedAt.UTC()}
}

func (h *Handler) replayDeadLetters(c *call) (any, error) {
	if _, err := queryOf(c.r); err != nil {
		return nil, err
	}
	var in wire.ReplayRequest
	if err := h.decode(c, &in, true); err != nil {
		return nil, err
	}
	dlq, err := h.deadLetterQueue(c)
	if err != nil {
		return nil, err
	}
	req := broker.ReplayRequest{IDs: in.IDs, Destination: c.queue, MaxPerSecond: in.MaxPerSecond}
	if in.Body != nil || in.Attributes != nil {
		attrs, err := toBrokerAttrs("attributes", in.Attributes)
		if err != nil {
			return nil, err
		}
		req.Edit = &model.MessageEdit{Body: in.Body, Attributes: attrs}
	}
	others, err := h.otherSources(c, dlq)
	if err != nil {
		return nil, err
	}
	switch {
	case others != "" && len(in.IDs) == 0:
		return nil, errorf(model.ErrConflict, "Dead-letter queue %s also holds the dead letters of %s: replaying all of them into %s would move those too. Replay chosen ids.", dlq, others, c.queue)
	case others != "":
		// A shared dead-letter queue: each chosen dead letter goes back to
		// the queue it came from, so an id of another queue's dead letter
		// cannot pull it into this one.
		req.Destination = ""
	}
	t, err := h.broker.Replay(c.ctx, dlq, req)
	if err != nil {
		return nil, err
	}
	c.status = http.StatusAccepted
	return toTask(t), nil
}

// otherSources names a queue other than the request's whose RedrivePolicy
// targets dlq ("" when none).
func (h *Handler) otherSources(c *call, dlq string) (string, error) {
	queues, err := h.broker.ListQueues(c.ctx, "", "", 0)
	if err != nil {
		return "", err
	}
	for _, q := range queues {
		if r := q.Config.Redrive; r != nil && r.DeadLetterQueue == dlq && q.Name != c.queue && q.Name != dlq {
			return q.Name, nil
		}
	}
	return "", nil
}

func (h *Handler) deleteDeadLetters(c *call) (any, error) {
	if _, err := queryOf(c.r); err != nil {
		return nil, err
	}
	dlq, err := h.deadLetterQueue(c)
	if err != nil {
		return nil, err
	}
	return h.deleteByID(c, dlq)
}

func (h *Handler) listReplays(c *call) (any, error) {
	q, err := queryOf(c.r, "limit")
	if err != nil {
		return nil, err
	}
	limit, err := q.int("limit", 1, model.MaxListMoveTasks, model.MaxListMoveTasks)
	if err != nil {
		return nil, err
	}
	dlq, err := h.deadLetterQueue(c)
	if err != nil {
		return nil, err
	}
	ts, err := h.broker.ListMoveTasks(c.ctx, dlq, limit)
	if err != nil {
		return nil, err
	}
	out := &wire.Replays{Replays: []wire.Task{}}
	for _, t := range ts {
		// The dead-letter queue's tasks that may move messages into this
		// queue: replays here, and SQS move tasks back to each source.
		if t.Destination == c.queue || t.Destination == "" {
			out.Replays = append(out.Replays, toTask(t))
		}
	}
	return out, nil
}
