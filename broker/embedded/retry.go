package embedded

import (
	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
)

// Failures, backoff and dead-lettering of the embedded backend: where the
// pure planners of broker/internal/plan/retry.go are applied.
//
//   - A receive adds one to a message's receive count and attempts
//     (leaseLocked); a receive that would start an attempt past the limit
//     moves the message instead (plan.ShouldDeadLetterOnReceive).
//   - A lease that ends unsettled is planned by promote with
//     plan.LeaseExpiry when the clock passes its end: visible,
//     backing off (stateBackoff; not written, see stateBackoff), or doomed
//     (stateDoomed): moved to the dead-letter queue by the next holder of a
//     write batch for the queue (promoteLocked: a receive, a delete, a
//     visibility change, a move-task step) or by the sweeper, which wakes
//     for the lease ends of messages on their last attempt (noteLeaseLocked).
//   - ChangeVisibility plans each change with plan.LeaseChange
//     (changeLeaseLocked).
//   - A message whose time to live passed expires instead of failing
//     (plan.FateExpired; ttl.go).

// promoteLocked brings q up to now (promote) and, with batch, moves the
// doomed messages to the dead-letter queue in it and expires the messages
// whose time to live passed (expireDueLocked, up to sweepBudget: the
// sweeper does the rest, and a receive checks what it claims); without one
// (a read), it leaves them to the sweeper, which it kicks. b.mu must be
// held.
func (b *Backend) promoteLocked(q *queue, batch *pebble.Batch, now int64) {
	q.promote(now)
	due := len(q.doomed) > 0
	if t, ok := q.nextTTL(); ok && t <= now {
		due = true
	}
	if !due {
		return
	}
	if batch == nil {
		b.sweeper.Kick()
		return
	}
	b.flushDoomedLocked(q, batch, now, -1)
	if _, more := b.expireDueLocked(q, batch, now, sweepBudget); more {
		b.sweeper.Kick()
	}
}

// flushDoomedLocked moves up to limit (< 0: all) of q's doomed messages to
// its dead-letter queue in batch, with their reason (ReasonLeaseExpired),
// or expires them (expireLocked) when their time to live had passed at
// their lease's end (plan.LeaseExpiry's FateExpired, which leaves their
// reason as it was). When the dead-letter queue is gone (or the body
// cannot be read), a message that did not expire is left visible instead.
// It returns how many it handled. b.mu must be held.
func (b *Backend) flushDoomedLocked(q *queue, batch *pebble.Batch, now int64, limit int) int {
	n := 0
	for len(q.doomed) > 0 && (limit < 0 || n < limit) {
		m := q.doomed[0]
		q.unplace(m)
		n++
		if model.Expired(fromNanos(m.expiresAt()), fromNanos(m.visibleAt)) {
			// plan.LeaseExpiry's FateExpired (promote): it expired at its
			// lease's end, which promote left out of its reason and history.
			b.expireLocked(q, m, batch, now, m.visibleAt)
			continue
		}
		if dlq := b.dlqLocked(q); dlq != nil && b.moveLocked(q, dlq, m, batch, now, m.failureReason(), 0) {
			continue
		}
		// Visible from its lease's end (m.visibleAt), as plan.LeaseExpiry
		// would have made it without a dead-letter queue.
		m.state = stateReady
		q.place(m, now)
	}
	return n
}

// noteLeaseLocked makes the sweeper wake when m's new lease ends, if that
// end would dead-letter it (its last attempt) or expire it (its time to
// live passes by then), so that the move is prompt even when no one calls.
// b.mu must be held.
func (b *Backend) noteLeaseLocked(q *queue, m *msg) {
	if limit := model.MaxAttempts(q.Config.Redrive, int(m.maxAttempts)); (limit > 0 && int(m.attempts) >= limit) || m.ttlPassed(m.visibleAt) {
		b.noteDeadlineLocked(m.visibleAt)
	}
}

// noteDeadlineLocked kicks the sweeper when at is before its deadline.
// b.mu must be held.
func (b *Backend) noteDeadlineLocked(at int64) {
	if b.sweepAt == 0 || at < b.sweepAt {
		b.sweepAt = at
		b.sweeper.Kick()
	}
}

// changeLeaseLocked applies one planned visibility change to m, a message of
// q in flight under the receipt's lease, in batch (b.mu held).
func (b *Backend) changeLeaseLocked(q *queue, m *msg, c model.VisibilityChange, batch *pebble.Batch, now int64) {
	q.invalidateAttemptLocked(m, batch)
	lp := plan.LeaseChange(q.Config, m.facts(), c, fromNanos(now))
	m.attempts = int32(lp.Attempts)
	if lp.SetReason && lp.Fate != plan.FateExpired {
		// An expiry's reason and failure are the dead letter's alone
		// (expireLocked): a dropped message's expired record keeps its
		// last failure reason, as on PostgreSQL.
		m.addFailure(lp.Reason, now)
	}
	q.unplace(m)
	switch lp.Fate {
	case plan.FateInFlight:
		m.state, m.visibleAt = stateInflight, nanos(lp.At)
		q.place(m, now)
		b.noteLeaseLocked(q, m)
	case plan.FateDelayed:
		m.state, m.visibleAt = stateBackoff, nanos(lp.At)
		q.place(m, now)
	case plan.FateExpired:
		b.expireLocked(q, m, batch, now, now)
		return // expireLocked wrote (or deleted) the records
	case plan.FateDeadLetter:
		if dlq := b.dlqLocked(q); dlq != nil && b.moveLocked(q, dlq, m, batch, now, lp.Reason, 0) {
			return // moveLocked wrote the records
		}
		// No dead-letter queue to move it to: visible at once.
		m.state, m.visibleAt = stateReady, now
		q.place(m, now)
	default: // FateVisible
		m.state, m.visibleAt = stateReady, nanos(lp.At)
		q.place(m, now)
	}
	_ = batch.Set(msgKey(q.ID, kindMeta, m.key), encodeMeta(m), nil)
}
