package embedded

import (
	"context"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
)

// Send implements storage.Backend.
func (b *Backend) Send(ctx context.Context, queueName model.QueueRef, entries []model.SendEntry) ([]model.SendResult, error) {
	if err := b.enter(ctx); err != nil {
		return nil, err
	}
	defer b.life.Done()
	if err := b.space.check(); err != nil { // refused at once when the disk is already full
		return nil, err
	}

	b.mu.Lock()
	q := b.queues[queueName]
	if q == nil {
		b.mu.Unlock()
		return nil, model.QueueNotFoundError()
	}
	cfg := q.Config // read-only copy: the maps inside are never mutated in place
	depth := q.admitDepth(b.now())
	b.mu.Unlock()
	plans, err := plan.Send(cfg, queueName.Name, depth, entries)
	if err != nil {
		return nil, err
	}

	// Encode bodies without the lock.
	results := make([]model.SendResult, len(entries))
	bodies := make([][]byte, len(entries))
	for i := range entries {
		results[i].ID, results[i].Err, results[i].MessageID = entries[i].ID, plans[i].Err, plans[i].MessageID
		if plans[i].Err == nil {
			bodies[i] = encodeBody(plans[i].MessageID, &entries[i])
		}
	}

	// The space the send will take is reserved until its batch is in the
	// log, so that concurrent sends cannot overrun the reserve (space.go).
	release, err := b.space.admit(sendFootprint(bodies))
	if err != nil {
		return nil, err
	}
	defer release()

	batch := b.db.NewBatch()
	b.mu.Lock()
	if q.deleted {
		b.mu.Unlock()
		_ = batch.Close()
		return nil, model.QueueNotFoundError()
	}
	// b.mu was dropped since plan.Send read the depth: admit the send again
	// against the depth and limits of now, so that MaxDepth is exact.
	n, low := 0, 0
	for i := range plans {
		if plans[i].Err == nil {
			n++
			if plans[i].Priority < 0 {
				low++
			}
		}
	}
	now := b.now()
	if err := plan.AdmitSend(q.Config, queueName.Name, q.admitDepth(now), n, low); err != nil {
		b.mu.Unlock()
		_ = batch.Close()
		return nil, err
	}
	b.storeLocked(q, batch, entries, plans, bodies, results, now)
	syncEarlierToo(batch) // a duplicate's original may still be syncing
	err = b.applyLocked(batch)
	b.mu.Unlock()
	if err := b.wait(batch, err); err != nil {
		return nil, err
	}
	return results, nil
}

// storeLocked writes the planned entries of a send to queue q (those with
// a body: the others failed their plan) into batch and the index, filling
// in results: a duplicate (plan.Original) gets its original's message id
// (and FIFO sequence number) and is not stored. b.mu must be held, and the
// send admitted (plan.AdmitSend) against q's depth of now.
func (b *Backend) storeLocked(q *queue, batch *pebble.Batch, entries []model.SendEntry, plans []plan.SendPlan, bodies [][]byte, results []model.SendResult, now int64) {
	q.gcDedupLocked(batch, now)
	for i := range entries {
		if bodies[i] == nil {
			continue
		}
		e, p := &entries[i], &plans[i]
		if p.DedupKey != "" {
			// A duplicate (plan.Original) is answered with the original
			// message id (and FIFO sequence number), and not stored (also
			// when the original is in this same batch).
			if id, seq, dup := q.originalLocked(p.DedupKey, p.DedupID, now); dup {
				results[i].MessageID = id
				if q.fifo != nil {
					results[i].SequenceNumber = model.FormatSequenceNumber(seq)
				}
				continue
			}
		}
		m := &msg{
			key: b.allocKey(batch), state: stateReady, visibleAt: now, sentAt: now,
			priority: int32(p.Priority), size: int32(model.MessageSize(e.Body, e.Attributes)),
			pos: -1, agePos: -1, maxAttempts: int32(p.MaxAttempts),
		}
		m.setID(p.MessageID)
		m.setGroupID(e.GroupID)
		m.setDedupID(p.DedupID)
		if q.fifo != nil {
			m.setSeq(m.key) // keys are the queue's send order and never reused
			results[i].SequenceNumber = model.FormatSequenceNumber(m.key)
		}
		if p.DedupKey != "" {
			q.rememberLocked(batch, p.DedupKey, results[i].MessageID, m.seq(), now)
		}
		if p.Delay > 0 {
			m.state, m.visibleAt = stateDelayed, now+int64(p.Delay)
		}
		if p.TTL > 0 {
			m.setExpiresAt(now + int64(p.TTL)) // ttl.go
		}
		_ = batch.Set(msgKey(q.ID, kindBody, m.key), bodies[i], nil)
		_ = batch.Set(msgKey(q.ID, kindMeta, m.key), encodeMeta(m), nil)
		q.add(m, now)
		b.noteExpiryLocked(q, m)
	}
}

// lookupLease resolves a receipt of queue q to its message: LeaseOtherQueue
// for a receipt of another queue, LeaseStale with m == nil when the message
// is gone, was leased again, or is delayed after a failure (backing off or
// snoozed), LeaseApplied with the message otherwise.
func lookupLease(q *queue, r model.Receipt) (*msg, model.LeaseOutcome) {
	if r.QueueID != q.ID {
		return nil, model.LeaseOtherQueue
	}
	m := q.msgs[r.Key]
	if m == nil || r.Lease == 0 || m.lease != r.Lease || m.state == stateBackoff {
		return nil, model.LeaseStale
	}
	return m, model.LeaseApplied
}

// Delete implements storage.Backend. A receipt whose lease version matches
// deletes the message even if the lease expired (and it was not received
// again), except on a FIFO queue (LeaseEnded).
func (b *Backend) Delete(ctx context.Context, queueName model.QueueRef, receipts []model.Receipt, results []*string) ([]model.LeaseOutcome, error) {
	out := make([]model.LeaseOutcome, len(receipts))
	err := b.update(ctx, queueName, func(q *queue, batch *pebble.Batch) error {
		// A FIFO lease that ended must be seen as ended, and a lease that
		// ended into a backoff (or a dead letter) as such.
		now := b.now()
		b.promoteLocked(q, batch, now)
		for i, r := range receipts {
			m, o := lookupLease(q, r)
			if m == nil {
				out[i] = o
				continue
			}
			if q.fifo != nil {
				if m.state != stateInflight {
					// The lease, and with it the group lock, has ended.
					out[i] = model.LeaseEnded
					continue
				}
				q.invalidateAttemptLocked(m, batch)
			}
			q.remove(m)
			deleteMessageRecords(batch, q.ID, m.key)
			var result *string
			if results != nil {
				result = results[i]
			}
			b.putRecordLocked(q, m, batch, now, model.JobCompleted, result, "")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ChangeVisibility implements storage.Backend.
func (b *Backend) ChangeVisibility(ctx context.Context, queueName model.QueueRef, changes []model.VisibilityChange) ([]model.LeaseOutcome, error) {
	out := make([]model.LeaseOutcome, len(changes))
	err := b.update(ctx, queueName, func(q *queue, batch *pebble.Batch) error {
		now := b.now()
		b.promoteLocked(q, batch, now)
		for i, c := range changes {
			m, o := lookupLease(q, c.Receipt)
			switch {
			case m == nil:
				out[i] = plan.VisibilityOutcome(q.Config, o)
				continue
			case m.state != stateInflight:
				out[i] = model.LeaseEnded
				continue
			}
			b.changeLeaseLocked(q, m, c, batch, now)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
