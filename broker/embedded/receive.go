package embedded

import (
	"context"
	"errors"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
)

// Receive implements storage.Backend.
//
// Waiting: a receive that finds nothing registers on its queue's wake
// channel and arms one clock timer for the earliest of its wait deadline,
// the queue's earliest timed deadline (a delay ending or a lease expiring)
// and, on a queue with a MaxReceivesPerSecond that left no room, when the
// rate lets the next message go. Sends, visibility changes to 0 and
// promotions close the wake channel, and so does a message leaving flight
// on a queue with a MaxInFlight; a new earlier deadline does too, so the
// waiter re-arms. There is no polling tick: with a FakeClock, Advance alone
// releases the waiter.
func (b *Backend) Receive(ctx context.Context, req model.ReceiveRequest) ([]model.Delivery, error) {
	if err := b.enter(ctx); err != nil {
		return nil, err
	}
	defer b.life.Done()
	b.mu.Lock()
	q := b.queues[req.Ref()]
	if q == nil {
		b.mu.Unlock()
		return nil, model.QueueNotFoundError()
	}
	rp, err := plan.Receive(q.Config, req)
	if err != nil {
		b.mu.Unlock()
		return nil, err
	}
	deadline := b.now() + int64(rp.Wait)
	if rp.AttemptID != "" {
		if claims, ok, err := q.replayAttemptLocked(rp.AttemptID, b.now()); ok {
			b.mu.Unlock()
			if err != nil {
				return nil, err
			}
			// The leases being replayed may still be syncing: answer once
			// they are durable.
			if err := b.syncEarlier(); err != nil {
				return nil, err
			}
			return b.deliver(b.db, q.ID, claims)
		}
	}
	for {
		switch {
		case q.deleted:
			b.mu.Unlock()
			return nil, model.QueueNotFoundError()
		case b.refusal() != nil:
			err := b.refusal()
			b.mu.Unlock()
			return nil, err
		case ctx.Err() != nil:
			b.mu.Unlock()
			return nil, ctx.Err()
		}
		now := b.now()
		batch := b.db.NewBatch()
		b.promoteLocked(q, batch, now) // leases that ended on their last attempt move now
		var room plan.Room
		if !q.Config.Paused { // a paused queue waits as an empty one
			room, err = plan.ClaimRoom(q.Config, q.Name, plan.ClaimFacts{Max: rp.Max, InFlight: q.inflight,
				Cap: req.InFlightCap, RateAt: fromNanos(q.rateAt), Now: fromNanos(now)})
			if err != nil {
				// The dead-letter moves already made in the index must
				// still be written.
				applyErr := b.applyLocked(batch)
				b.mu.Unlock()
				if werr := b.wait(batch, applyErr); werr != nil {
					return nil, werr
				}
				return nil, err
			}
		}
		var claims []claimed
		var snap *pebble.Snapshot
		switch {
		case room.N == 0:
			// Paused, a FIFO queue at the front's in-flight cap, or a
			// queue at its own limits: the receive waits as on an empty
			// queue (ClaimRoom).
		case q.fifo == nil:
			claims = b.claimLocked(q, batch, room.N, int64(rp.Visibility), now)
		default:
			claims = b.claimFifoLocked(q, batch, room.N, int64(rp.Visibility), now, rp.AttemptID)
		}
		if len(claims) > 0 && q.Config.ReceiveRate > 0 {
			// The rate's instant moves by what was leased, under the lock
			// (memory only: a restart forgets at most one burst).
			q.rateAt = nanos(plan.RateTaken(q.Config, fromNanos(q.rateAt), fromNanos(now), len(claims)))
		}
		if len(claims) > 0 {
			// The bodies are read after the sync, without the lock, from a
			// snapshot taken now: by then the claimed messages may be gone
			// from the queue (at-most-once deletes them in this batch; a
			// lease that ends at once, or during a long sync, on the last
			// attempt is moved to the dead-letter queue by the next holder
			// of the lock), yet this receive delivers what it leased.
			snap = b.db.NewSnapshot()
		}
		if !batch.Empty() {
			err := b.applyLocked(batch)
			b.mu.Unlock()
			if err := b.wait(batch, err); err != nil {
				closeSnap(snap)
				return nil, err
			}
			if len(claims) > 0 {
				out, err := b.deliver(snap, q.ID, claims)
				closeSnap(snap)
				return out, err
			}
			// Only dead-letter moves or expirations: look again.
			b.mu.Lock()
			continue
		}
		_ = batch.Close()
		if now >= deadline {
			b.mu.Unlock()
			return nil, nil
		}
		wakeAt := deadline
		if next, ok := q.nextTimed(); ok && next < wakeAt {
			wakeAt = next
		}
		if !room.Next.IsZero() && nanos(room.Next) < wakeAt {
			wakeAt = nanos(room.Next) // the rate lets the next message go then
		}
		ch := q.wake
		q.waiters++
		b.mu.Unlock()
		t := model.NewTimerAt(b.clock, fromNanos(wakeAt)) // for the instant: the clock may have moved since now
		select {
		case <-ch:
		case <-t.C():
		case <-ctx.Done():
		case <-b.life.Closing():
		}
		t.Stop()
		if err := b.space.stalledRefusal(); err != nil {
			// A write stalled on a full disk may hold the lock until the
			// disk has room: answer now, and count this waiter out once
			// the lock is free.
			go func() {
				b.mu.Lock()
				q.waiters--
				b.mu.Unlock()
			}()
			return nil, err
		}
		b.mu.Lock()
		q.waiters--
	}
}

// claimed is what a receive took under the lock: the message's metadata as
// of its new lease (the body is read after the sync).
type claimed struct {
	key   uint64
	lease uint64
	msg   model.Message
	// receipt is the handle when it was made under the lock (FIFO: the
	// attempt cache replays it); "" means deliver encodes one.
	receipt string
}

// claimLocked leases up to n ready messages of q (b.mu held), writing their
// new metadata into batch (see leaseLocked). On an at-most-once queue the
// claimed messages are deleted in batch instead (the caller reads their
// bodies from a snapshot taken before batch is applied).
func (b *Backend) claimLocked(q *queue, batch *pebble.Batch, n int, vis, now int64) []claimed {
	var out []claimed
	var leased []*msg
	for len(out) < n && len(q.ready) > 0 {
		m := q.ready[0]
		q.unplace(m)
		if !b.leaseLocked(q, m, batch, vis, now) {
			continue
		}
		q.fairClaimed(m)
		out = append(out, claimed{key: m.key, lease: m.lease, msg: messageOf(m)})
		if q.Config.AtMostOnce() {
			q.forget(m)
			deleteMessageRecords(batch, q.ID, m.key)
			continue
		}
		leased = append(leased, m)
	}
	// Placed only now, so that a lease of 0 s (visible at once) is not taken
	// twice by this receive.
	for _, m := range leased {
		q.place(m, now)
	}
	return out
}

// leaseLocked takes m (ready, unplaced) for a receive (b.mu held): a message
// past its time to live expires (expireLocked), also when it is past
// retention too (the time to live goes first, as in the sweeper: a
// MessageTimeToLive equal to the retention dead-letters); one past
// retention is deleted; one whose receive would start an attempt past
// its limit (plan.ShouldDeadLetterOnReceive) moves to the dead-letter queue
// (when that exists); any other gets a new lease version, one more receive
// and attempt, and is in flight until now+vis. The caller places a leased m
// in the index once its claim is complete. It reports whether m was leased.
func (b *Backend) leaseLocked(q *queue, m *msg, batch *pebble.Batch, vis, now int64) bool {
	if m.ttlPassed(now) {
		b.expireLocked(q, m, batch, now, now) // never handed out (ttl.go)
		return false
	}
	if q.expired(m, now) {
		q.forget(m)
		deleteMessageRecords(batch, q.ID, m.key)
		return false
	}
	if rp := q.Config.Redrive; plan.ShouldDeadLetterOnReceive(rp, int(m.attempts), int(m.maxAttempts)) {
		if dlq := b.dlqLocked(q); dlq != nil && b.moveLocked(q, dlq, m, batch, now, model.ReasonMaxAttempts, now) {
			return false
		}
	}
	m.lease++
	m.receiveCount++
	m.attempts++
	first := m.firstReceiveAt()
	if first == 0 {
		first = now
	}
	m.setReceiveTimes(first, now)
	m.state = stateInflight
	m.visibleAt = now + vis
	_ = batch.Set(msgKey(q.ID, kindMeta, m.key), encodeMeta(m), nil)
	b.noteLeaseLocked(q, m)
	return true
}

// dlqLocked is q's live dead-letter queue, nil when q has no RedrivePolicy,
// its dead-letter queue is gone, or it is q itself.
func (b *Backend) dlqLocked(q *queue) *queue {
	rp := q.Config.Redrive
	if rp == nil {
		return nil
	}
	if dlq := b.queues[model.QueueRef{Account: q.Account, Name: rp.DeadLetterQueue}]; dlq != q {
		return dlq
	}
	return nil
}

// moveLocked moves m (unplaced) from q to its dead-letter queue dlq in batch
// (plan.DeadLetter): same message id, body, attributes, SentAt, counts,
// first and last receive time, the failure reason reason, a new key in dlq,
// DeadLetterSource set; the move is logged (b.dlLog), and its webhook event
// written in batch when q has a DeadLetterWebhook. It never asks dlq's
// MaxDepth. It reports false (m untouched) if the body cannot be read.
// failAt, when not 0, is the instant of the failure the move is for, one
// more in the dead letter's history (its attempts used at a receive, its
// time to live passed); 0 when m's history holds it already (a nack's, a
// lease end's, which planned the move).
func (b *Backend) moveLocked(q, dlq *queue, m *msg, batch *pebble.Batch, now int64, reason string, failAt int64) bool {
	body, closer, err := b.db.Get(msgKey(q.ID, kindBody, m.key))
	if err != nil {
		b.log.Error("dead-letter move: read body", "queue", q.Name, "key", m.key, "err", err)
		return false
	}
	nm := *m
	if m.x != nil {
		x := *m.x // nm's own extra fields, not m's
		nm.x = &x
	}
	nm.key = b.allocKey(batch)
	nm.state = stateReady
	nm.visibleAt = now
	nm.setDeadLetterSource(q.Name)
	if failAt != 0 {
		// Told, not guessed from m's last reason: a nack may have given
		// "expired" as its reason, and the failure a move is for is one
		// more all the same (as on PostgreSQL, which always pushes it).
		nm.addFailure(reason, failAt)
	} else {
		nm.setFailureReason(reason)
	}
	nm.setExpiresAt(0) // a dead letter leaves its time to live behind (ttl.go)
	if nm.x != nil {
		nm.x.ttlPos = 0
	}
	nm.pos, nm.agePos = -1, -1
	deadLetter(&nm, body, dlq.fifo != nil, now)
	_ = batch.Set(msgKey(dlq.ID, kindBody, nm.key), body, nil)
	_ = closer.Close()
	_ = batch.Set(msgKey(dlq.ID, kindMeta, nm.key), encodeMeta(&nm), nil)
	deleteMessageRecords(batch, q.ID, m.key)
	q.forget(m)
	dlq.add(&nm, now)
	b.noteExpiryLocked(dlq, &nm) // it keeps its SentAt: it may expire soon under dlq's retention
	b.dlLog.Moved(nm.id(), q.ref(), dlq.ref(), reason, int(nm.attempts))
	b.webhookEventLocked(q, dlq, &nm, reason, batch, now)
	return true
}

// deliver reads the bodies of the claimed messages (after their leases are
// durable) and builds the deliveries. A body that is gone (the queue was
// purged or deleted meanwhile) drops that message. A body that cannot be
// read (on-disk corruption) sets its message aside (damage.go); the receive
// fails with errDamagedOnly only when nothing else was readable.
func (b *Backend) deliver(r pebble.Reader, qid uint64, claims []claimed) ([]model.Delivery, error) {
	out := make([]model.Delivery, 0, len(claims))
	var damaged []damagedBody
	for _, c := range claims {
		v, closer, err := r.Get(msgKey(qid, kindBody, c.key))
		if err != nil {
			switch {
			case errors.Is(err, pebble.ErrNotFound):
			case pebble.IsCorruptionError(err):
				damaged = append(damaged, damagedBody{key: c.key, lease: c.lease, file: corruptFile(err), err: err})
			default:
				// Not known to be damaged (an I/O error): the message
				// stays leased and comes back when its lease ends.
				b.log.Error("receive: read body", "key", c.key, "err", err)
			}
			continue
		}
		d := model.Delivery{Message: c.msg}
		err = decodeBody(v, &d.Message)
		_ = closer.Close()
		if err != nil {
			damaged = append(damaged, damagedBody{key: c.key, lease: c.lease, err: err})
			continue
		}
		d.Receipt = c.receipt
		if d.Receipt == "" {
			d.Receipt = b.receipts.Encode(model.Receipt{QueueID: qid, Key: c.key, Lease: c.lease})
		}
		out = append(out, d)
	}
	b.setAside(qid, damaged)
	if len(out) == 0 && len(damaged) > 0 {
		return nil, errDamagedOnly
	}
	return out, nil
}

// syncEarlier returns once every change already handed to the store is
// durable: it writes and syncs an empty log record (a WAL sync covers all
// earlier records).
func (b *Backend) syncEarlier() error {
	batch := b.db.NewBatch()
	_ = batch.LogData(nil, nil)
	b.mu.Lock()
	err := b.applyLocked(batch)
	b.mu.Unlock()
	return b.wait(batch, err)
}

func closeSnap(s *pebble.Snapshot) {
	if s != nil {
		_ = s.Close()
	}
}
