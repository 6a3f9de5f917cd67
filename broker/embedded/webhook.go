package embedded

import (
	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
)

// webhookEventLocked writes the dead-letter event of nm, just moved from q
// to dlq at now with reason, into the outbox queue (broker.WebhookOutbox) in
// batch, the move's own batch: the event is durable exactly when the move
// is. Nothing is written when q has no DeadLetterWebhook or the outbox does
// not exist (no dispatcher ever started). b.mu must be held.
func (b *Backend) webhookEventLocked(q, dlq *queue, nm *msg, reason string, batch *pebble.Batch, now int64) {
	ev, ok := plan.WebhookEvent(q.Config, q.Name, dlq.Name, nm.id(), reason, int(nm.attempts), int(nm.receiveCount), fromNanos(now))
	if !ok {
		return
	}
	ob := b.queues[plan.WebhookOutbox()]
	if ob == nil || ob.deleted {
		return
	}
	e := model.SendEntry{Body: ev.Body()}
	m := &msg{
		key: b.allocKey(batch), state: stateReady, visibleAt: now, sentAt: now,
		size: int32(model.MessageSize(e.Body, nil)), pos: -1, agePos: -1,
	}
	m.setID(model.NewMessageID())
	_ = batch.Set(msgKey(ob.ID, kindBody, m.key), encodeBody(m.id(), &e), nil)
	_ = batch.Set(msgKey(ob.ID, kindMeta, m.key), encodeMeta(m), nil)
	ob.add(m, now)
	b.noteExpiryLocked(ob, m)
}
