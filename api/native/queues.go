package native

import (
	"errors"
	"math"
	"time"

	"github.com/sluicemq/sluice/api/native/wire"
	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
)

// The queue routes: list, create, get, update, delete, purge, pause,
// resume, stats, consumers.

// sluiceAttributes are the Sluice queue attributes, answered with their
// defaults when unset (model.QueueConfig.DefaultOf).
var sluiceAttributes = []string{
	model.AttrRetryPolicy, model.AttrMaxDepth, model.AttrLowPriorityMaxDepth,
	model.AttrPaused, model.AttrDeliveryMode, model.AttrDeadLetterWebhook,
	model.AttrDeduplicationWindowSeconds, model.AttrDeduplicationUntil,
	model.AttrHealthDepth, model.AttrHealthAge,
	model.AttrMaxInFlight, model.AttrMaxReceivesPerSecond,
	model.AttrMessageTimeToLive, model.AttrExpiredMessageAction,
	model.AttrArchiveExpired,
}

// arn is the ARN of queue name of account.
func (h *Handler) arn(account, name string) string { return model.ARN(h.cfg.Region, account, name) }

func (h *Handler) toStats(s broker.Stats) wire.Stats {
	out := wire.Stats{
		Visible: s.Visible, InFlight: s.InFlight, Delayed: s.Delayed, Depth: s.Depth(),
		Refused: map[string]int64{"max_depth": 0, "low_priority_max_depth": 0},
	}
	now := h.broker.Clock().Now()
	if !s.OldestSentAt.IsZero() {
		out.OldestAgeSeconds = max(int64(now.Sub(s.OldestSentAt)/time.Second), 0)
	}
	if !s.OldestVisibleSince.IsZero() {
		out.OldestVisibleAgeSeconds = max(int64(now.Sub(s.OldestVisibleSince)/time.Second), 0)
	}
	if s.DeadLetters >= 0 {
		n := s.DeadLetters
		out.DeadLetters = &n
	}
	for k, v := range s.Refused {
		out.Refused[k] = v
	}
	return out
}

// view reads a queue and its stats.
func (h *Handler) view(c *call, name string) (*wire.Queue, error) {
	q, s, err := h.broker.Stats(c.ctx, name)
	if err != nil {
		return nil, err
	}
	attrs := q.Config.Attributes()
	for _, a := range sluiceAttributes {
		if _, ok := attrs[a]; !ok {
			attrs[a] = q.Config.DefaultOf(a)
		}
	}
	v := &wire.Queue{
		Name: q.Name, ARN: h.arn(h.broker.OwnerAccount(q.Queue), q.Name), Fifo: q.Config.Fifo,
		CreatedAt: q.CreatedAt.UTC(), ModifiedAt: q.ModifiedAt.UTC(),
		Attributes: attrs, Tags: q.Tags, Stats: h.toStats(s),
	}
	if v.Tags == nil {
		v.Tags = map[string]string{}
	}
	if r := q.Config.Redrive; r != nil {
		v.DeadLetterQueue = r.DeadLetterQueue
	}
	return v, nil
}

// The list's page size.
const (
	defaultListQueues = 100
	maxListQueues     = 1000
)

func (h *Handler) listQueues(c *call) (any, error) {
	q, err := queryOf(c.r, "prefix", "limit", "after")
	if err != nil {
		return nil, err
	}
	limit, err := q.int("limit", 1, maxListQueues, defaultListQueues)
	if err != nil {
		return nil, err
	}
	// One more than the page shows whether there is a next page.
	queues, err := h.broker.ListQueues(c.ctx, q.get("prefix"), q.get("after"), limit+1)
	if err != nil {
		return nil, err
	}
	out := &wire.QueueList{Queues: []wire.QueueSummary{}}
	if len(queues) > limit {
		queues = queues[:limit]
		out.Next = queues[limit-1].Name
	}
	for _, qu := range queues {
		info, s, err := h.broker.Stats(c.ctx, qu.Name)
		if errors.Is(err, model.ErrQueueDoesNotExist) {
			continue // deleted since the list was read
		}
		if err != nil {
			return nil, err
		}
		out.Queues = append(out.Queues, wire.QueueSummary{Name: info.Name, Fifo: info.Config.Fifo, Paused: info.Config.Paused, Stats: h.toStats(s)})
	}
	return out, nil
}

func (h *Handler) createQueue(c *call) (any, error) {
	if _, err := queryOf(c.r); err != nil {
		return nil, err
	}
	var in wire.CreateQueueRequest
	if err := h.decode(c, &in, false); err != nil {
		return nil, err
	}
	if in.Name == "" {
		return nil, errorf(model.ErrMissingParameter, "Field name is required.")
	}
	c.queue = in.Name
	if _, err := h.broker.CreateQueue(c.ctx, in.Name, in.Attributes, in.Tags); err != nil {
		return nil, err
	}
	return h.view(c, in.Name)
}

func (h *Handler) getQueue(c *call) (any, error) {
	if _, err := queryOf(c.r); err != nil {
		return nil, err
	}
	return h.view(c, c.queue)
}

func (h *Handler) updateQueue(c *call) (any, error) {
	if _, err := queryOf(c.r); err != nil {
		return nil, err
	}
	var in wire.UpdateQueueRequest
	if err := h.decode(c, &in, false); err != nil {
		return nil, err
	}
	if len(in.Attributes) == 0 {
		return nil, errorf(model.ErrMissingParameter, "Field attributes is required: the attributes to change.")
	}
	if err := h.broker.SetQueueAttributes(c.ctx, c.queue, in.Attributes); err != nil {
		return nil, err
	}
	return h.view(c, c.queue)
}

func (h *Handler) deleteQueue(c *call) (any, error) {
	if _, err := queryOf(c.r); err != nil {
		return nil, err
	}
	return nil, h.broker.DeleteQueue(c.ctx, c.queue)
}

// noBody refuses a body on a route that takes none (an empty object is
// accepted).
func (h *Handler) noBody(c *call) error {
	if _, err := queryOf(c.r); err != nil {
		return err
	}
	var in struct{}
	return h.decode(c, &in, true)
}

func (h *Handler) purgeQueue(c *call) (any, error) {
	if err := h.noBody(c); err != nil {
		return nil, err
	}
	return nil, h.broker.PurgeQueue(c.ctx, c.queue)
}

func (h *Handler) pauseQueue(c *call) (any, error)  { return h.setPaused(c, true) }
func (h *Handler) resumeQueue(c *call) (any, error) { return h.setPaused(c, false) }

func (h *Handler) setPaused(c *call, paused bool) (any, error) {
	if err := h.noBody(c); err != nil {
		return nil, err
	}
	if err := h.broker.SetPaused(c.ctx, c.queue, paused); err != nil {
		return nil, err
	}
	return h.view(c, c.queue)
}

func (h *Handler) queueStats(c *call) (any, error) {
	if _, err := queryOf(c.r); err != nil {
		return nil, err
	}
	_, s, err := h.broker.Stats(c.ctx, c.queue)
	if err != nil {
		return nil, err
	}
	return h.toStats(s), nil
}

// listConsumers answers the consumer streams open on the queue: this
// broker's, and on a shared store the other brokers' (the front checks the
// queue and the caller's access as for its attributes).
func (h *Handler) listConsumers(c *call) (any, error) {
	if _, err := queryOf(c.r); err != nil {
		return nil, err
	}
	cs, err := h.broker.Consumers(c.ctx, c.queue)
	if err != nil {
		return nil, err
	}
	out := &wire.ConsumerList{Consumers: make([]wire.Consumer, 0, len(cs))}
	for _, ci := range cs {
		out.Consumers = append(out.Consumers, wire.Consumer{
			ID: ci.ID, Broker: ci.Broker, ClientName: ci.ClientName, RemoteAddress: ci.RemoteAddr,
			Credit: ci.Credit, Held: ci.Held, Acked: ci.Acked,
			AckedPerSecond: math.Round(ci.AckedPerSecond*100) / 100,
			LeaseSeconds:   int64(ci.Lease / time.Second), MaxHoldSeconds: int64(ci.MaxHold / time.Second),
			ConnectedAt: ci.ConnectedAt.UTC(), LastActiveAt: ci.LastActive.UTC(),
		})
	}
	return out, nil
}

// redriveOf returns a queue's RedrivePolicy (nil when none), for the
// envelope's attempt limit.
func (h *Handler) redriveOf(c *call, name string) (*model.RedrivePolicy, error) {
	q, err := h.broker.GetQueue(c.ctx, name)
	if err != nil {
		return nil, err
	}
	return q.Config.Redrive, nil
}

// deadLetterQueue returns the name of a queue's dead-letter queue: a queue
// without a RedrivePolicy has none (409 conflict).
func (h *Handler) deadLetterQueue(c *call) (string, error) {
	r, err := h.redriveOf(c, c.queue)
	if err != nil {
		return "", err
	}
	if r == nil {
		return "", errorf(model.ErrConflict, "Queue %s has no RedrivePolicy: it has no dead-letter queue.", c.queue)
	}
	return r.DeadLetterQueue, nil
}

// listReceivers answers GET /v1/queues/{queue}/receivers: who received
// from the queue through this broker over HTTP in the last 5 minutes.
func (h *Handler) listReceivers(c *call) (any, error) {
	if _, err := queryOf(c.r); err != nil {
		return nil, err
	}
	rs, err := h.broker.RecentReceivers(c.ctx, c.queue)
	if err != nil {
		return nil, err
	}
	out := &wire.ReceiverList{Receivers: make([]wire.Receiver, 0, len(rs)), WindowSeconds: int64(broker.ReceiverWindow / time.Second)}
	for _, r := range rs {
		out.Receivers = append(out.Receivers, wire.Receiver{AccessKey: r.AccessKey, RemoteAddress: r.Addr, UserAgent: r.UserAgent,
			Receives: r.Receives, Received: r.Received, FirstAt: r.FirstAt.UTC(), LastAt: r.LastAt.UTC()})
	}
	return out, nil
}
