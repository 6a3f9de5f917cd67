package embedded

import (
	"context"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/broker"
)

// Send implements broker.Backend.
func (b *Backend) Send(ctx context.Context, queueName string, entries []broker.SendEntry) ([]broker.SendResult, error) {
	if err := broker.ValidateSendBatch(entries); err != nil {
		return nil, err
	}
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.ops.Done()
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	b.mu.Lock()
	q := b.queues[queueName]
	if q == nil {
		b.mu.Unlock()
		return nil, errNoQueue()
	}
	cfg := q.Config // read-only copy: the maps inside are never mutated in place
	b.mu.Unlock()
	if err := broker.ValidateSendGroupParams(cfg, entries); err != nil {
		return nil, err
	}

	// Validate and encode bodies without the lock.
	results := make([]broker.SendResult, len(entries))
	bodies := make([][]byte, len(entries))
	dedupIDs := make([]string, len(entries)) // FIFO: the resolved dedup id
	for i := range entries {
		e := &entries[i]
		results[i].ID = e.ID
		if err := broker.ValidateSendEntry(cfg, e); err != nil {
			results[i].Err = err
			continue
		}
		results[i].MessageID = broker.NewMessageID()
		bodies[i] = encodeBody(results[i].MessageID, e)
		dedupIDs[i] = broker.DedupID(cfg, e)
	}

	batch := b.db.NewBatch()
	b.mu.Lock()
	if q.deleted {
		b.mu.Unlock()
		_ = batch.Close()
		return nil, errNoQueue()
	}
	now := b.now()
	if q.fifo != nil {
		b.gcFifoLocked(q, batch, now)
	}
	for i := range entries {
		if bodies[i] == nil {
			continue
		}
		e := &entries[i]
		var dedupKey string
		if q.fifo != nil {
			// A duplicate within the window is answered with the original
			// message id and sequence number, and not stored (also when the
			// original is in this same batch).
			dedupKey = broker.DedupKey(q.Config, e.GroupID, dedupIDs[i])
			if d := q.fifo.duplicateLocked(dedupKey, now); d != nil {
				results[i].MessageID = d.messageID
				results[i].SequenceNumber = broker.FormatSequenceNumber(d.seq)
				continue
			}
		}
		delay := broker.MessageDelay(q.Config, e)
		m := &msg{
			key: b.allocKey(batch), state: stateReady, visibleAt: now, sentAt: now,
			priority: e.Priority, size: broker.MessageSize(e.Body, e.Attributes),
			groupID: e.GroupID, dedupID: dedupIDs[i], pos: -1, agePos: -1,
		}
		if q.fifo != nil {
			m.seq = m.key // keys are the queue's send order and never reused
			results[i].SequenceNumber = broker.FormatSequenceNumber(m.seq)
			q.rememberLocked(batch, dedupKey, results[i].MessageID, m.seq, now)
		}
		if delay > 0 {
			m.state, m.visibleAt = stateDelayed, now+int64(delay)
		}
		_ = batch.Set(msgKey(q.ID, kindBody, m.key), bodies[i], nil)
		_ = batch.Set(msgKey(q.ID, kindMeta, m.key), encodeMeta(m), nil)
		q.add(m, now)
		b.noteExpiryLocked(q, m)
	}
	syncEarlierToo(batch) // a duplicate's original may still be syncing
	err := b.applyLocked(batch)
	b.mu.Unlock()
	if err := b.wait(batch, err); err != nil {
		return nil, err
	}
	return results, nil
}

// lookupLease resolves a receipt handle to its message. It returns an error
// for a handle that does not decode or names another queue, and m == nil
// when the message is gone or was leased again (a stale handle).
func lookupLease(q *queue, handle string) (*msg, error) {
	r, err := broker.DecodeReceipt(handle)
	if err != nil {
		return nil, err
	}
	if r.QueueID != q.ID {
		return nil, broker.Errorf(broker.ErrReceiptHandleInvalid, "The input receipt handle %q is not a valid receipt handle.", handle)
	}
	m := q.msgs[r.Key]
	if m == nil || r.Lease == 0 || m.lease != r.Lease {
		return nil, nil
	}
	return m, nil
}

// Delete implements broker.Backend. A handle whose lease version matches
// deletes the message even if the lease expired (and it was not received
// again), except on a FIFO queue (broker.ReceiptExpiredError); a stale one
// succeeds without effect.
func (b *Backend) Delete(ctx context.Context, queueName string, entries []broker.DeleteEntry) ([]error, error) {
	if err := broker.ValidateBatch(entries, func(e broker.DeleteEntry) string { return e.ID }); err != nil {
		return nil, err
	}
	errs := make([]error, len(entries))
	err := b.update(ctx, queueName, func(q *queue, batch *pebble.Batch) error {
		if q.fifo != nil {
			q.promote(b.now()) // a FIFO lease that ended must be seen as ended
		}
		for i, e := range entries {
			m, err := lookupLease(q, e.Receipt)
			if err != nil || m == nil {
				errs[i] = err
				continue
			}
			if q.fifo != nil {
				if m.state != stateInflight {
					// The lease, and with it the group lock, has ended.
					errs[i] = broker.ReceiptExpiredError(e.Receipt)
					continue
				}
				q.invalidateAttemptLocked(m, batch)
			}
			q.remove(m)
			_ = batch.Delete(msgKey(q.ID, kindMeta, m.key), nil)
			_ = batch.Delete(msgKey(q.ID, kindBody, m.key), nil)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

// ChangeVisibility implements broker.Backend.
func (b *Backend) ChangeVisibility(ctx context.Context, queueName string, entries []broker.VisibilityEntry) ([]error, error) {
	if err := broker.ValidateBatch(entries, func(e broker.VisibilityEntry) string { return e.ID }); err != nil {
		return nil, err
	}
	errs := make([]error, len(entries))
	err := b.update(ctx, queueName, func(q *queue, batch *pebble.Batch) error {
		now := b.now()
		q.promote(now)
		for i, e := range entries {
			if err := broker.ValidateVisibility(e.Timeout); err != nil {
				errs[i] = err
				continue
			}
			m, err := lookupLease(q, e.Receipt)
			switch {
			case err != nil:
				errs[i] = err
				continue
			case m == nil:
				errs[i] = broker.Errorf(broker.ErrInvalidParameterValue,
					"Value %s for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.", e.Receipt)
				continue
			case m.state != stateInflight:
				errs[i] = broker.Errorf(broker.ErrMessageNotInflight, "The message referred to is not in flight.")
				continue
			}
			q.invalidateAttemptLocked(m, batch)
			q.unplace(m)
			m.state = stateInflight
			m.visibleAt = now + int64(e.Timeout)
			q.place(m, now) // timeout 0: ready at once, waiters woken
			_ = batch.Set(msgKey(q.ID, kindMeta, m.key), encodeMeta(m), nil)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}
