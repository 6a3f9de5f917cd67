package embedded

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/broker"
)

// purgeInterval is AWS's one purge per queue per 60 s (Options.StrictPurge).
const purgeInterval = 60 * time.Second

// CreateQueue implements broker.Backend.
func (b *Backend) CreateQueue(ctx context.Context, name string, attrs, tags map[string]string) (broker.Queue, error) {
	if err := b.enter(); err != nil {
		return broker.Queue{}, err
	}
	defer b.ops.Done()
	if err := ctx.Err(); err != nil {
		return broker.Queue{}, err
	}
	if err := broker.ValidateQueueName(name); err != nil {
		return broker.Queue{}, err
	}
	cfg, err := broker.ParseAttributes(name, attrs)
	if err != nil {
		return broker.Queue{}, err
	}
	if err := broker.ValidateTags(name, tags); err != nil {
		return broker.Queue{}, err
	}

	b.mu.Lock()
	if q := b.queues[name]; q != nil {
		if attr := q.Config.ConflictingAttribute(name, attrs); attr != "" {
			b.mu.Unlock()
			return broker.Queue{}, broker.Errorf(broker.ErrQueueExists,
				"A queue already exists with the same name and a different value for attribute %s", attr)
		}
		info := q.info().Queue
		b.mu.Unlock()
		// The create that made it may still be syncing.
		if err := b.syncEarlier(); err != nil {
			return broker.Queue{}, err
		}
		return info, nil
	}
	if err := b.checkRedriveLocked(name, cfg, attrs[broker.AttrRedrivePolicy]); err != nil {
		b.mu.Unlock()
		return broker.Queue{}, err
	}
	now := b.clock.Now()
	rec := queueRecord{ID: b.nextQID, Name: name, Config: cfg, Tags: copyTags(tags), CreatedAt: now, ModifiedAt: now}
	b.nextQID++
	batch := b.db.NewBatch()
	_ = batch.Set(keyNextQueueID, u64Bytes(b.nextQID), nil)
	_ = batch.Set(queueKey(name), rec.encode(), nil)
	q := newQueue(rec)
	b.queues[name] = q
	b.byID[rec.ID] = q
	info := q.info().Queue
	err = b.applyLocked(batch)
	b.mu.Unlock()
	if err := b.wait(batch, err); err != nil {
		return broker.Queue{}, err
	}
	b.log.Info("queue created", "queue", name, "queue_id", rec.ID)
	return info, nil
}

// checkRedriveLocked checks a RedrivePolicy against its target: the target
// exists, has the same type (FIFO or standard), and its RedriveAllowPolicy
// lets source use it. raw is the attribute as given, for the message.
func (b *Backend) checkRedriveLocked(source string, cfg broker.QueueConfig, raw string) error {
	if cfg.Redrive == nil {
		return nil
	}
	bad := func(reason string) error {
		return broker.Errorf(broker.ErrInvalidParameterValue,
			"Value %s for parameter RedrivePolicy is invalid. Reason: %s", raw, reason)
	}
	dlq := b.queues[cfg.Redrive.DeadLetterQueue]
	if dlq == nil {
		return bad("Dead letter target does not exist.")
	}
	if dlq.Config.Fifo != cfg.Fifo {
		return bad("Dead-letter queue must be of the same type as the source queue (FIFO or standard).")
	}
	if !dlq.Config.AllowsSource(source) {
		return bad("Dead letter target's RedriveAllowPolicy does not allow this queue as a source.")
	}
	return nil
}

// GetQueue implements broker.Backend. The counts are the maintained
// counters, brought up to the clock (ended delays and expired leases are
// promoted first: amortised, never a scan).
func (b *Backend) GetQueue(ctx context.Context, name string) (broker.QueueInfo, error) {
	if err := ctx.Err(); err != nil {
		return broker.QueueInfo{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.refusalLocked(); err != nil {
		return broker.QueueInfo{}, err
	}
	q := b.queues[name]
	if q == nil {
		return broker.QueueInfo{}, errNoQueue()
	}
	q.promote(b.now())
	return q.info(), nil
}

// ListQueues implements broker.Backend.
func (b *Backend) ListQueues(ctx context.Context, prefix, after string, limit int) ([]broker.Queue, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.refusalLocked(); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(b.queues))
	for n := range b.queues {
		if strings.HasPrefix(n, prefix) && n > after {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	if limit > 0 && len(names) > limit {
		names = names[:limit]
	}
	out := make([]broker.Queue, len(names))
	for i, n := range names {
		out[i] = b.queues[n].info().Queue
	}
	return out, nil
}

// SetQueueAttributes implements broker.Backend.
func (b *Backend) SetQueueAttributes(ctx context.Context, name string, attrs map[string]string) error {
	retentionChanged := false
	err := b.editQueue(ctx, name, func(q *queue) error {
		cfg, err := broker.ApplyAttributes(q.Config, attrs)
		if err == nil {
			if raw, ok := attrs[broker.AttrRedrivePolicy]; ok {
				err = b.checkRedriveLocked(name, cfg, raw)
			}
		}
		if err != nil {
			return err
		}
		retentionChanged = cfg.Retention != q.Config.Retention
		q.Config = cfg
		q.ModifiedAt = b.clock.Now()
		return nil
	})
	if retentionChanged {
		b.kickSweeper()
	}
	return err
}

// DeleteQueue implements broker.Backend: the queue record goes at once (in
// the same batch as a range delete of its data); the space is reclaimed by a
// background compaction.
func (b *Backend) DeleteQueue(ctx context.Context, name string) error {
	var q *queue
	err := b.update(ctx, name, func(dq *queue, batch *pebble.Batch) error {
		q = dq
		delete(b.queues, name)
		delete(b.byID, q.ID)
		q.deleted = true
		q.notify()
		lo, hi := queueRange(q.ID)
		_ = batch.Delete(queueKey(name), nil)
		_ = batch.DeleteRange(lo, hi, nil)
		// Its move tasks can no longer be listed or cancelled: forget them.
		var keep []*moveTask
		for _, t := range b.moves.bySource[name] {
			if t.SourceID == q.ID {
				t.Status = broker.MoveTaskFailed // an active one stops at once
				_ = batch.Delete(moveTaskKey(t.Seq), nil)
			} else {
				keep = append(keep, t)
			}
		}
		if len(keep) == 0 {
			delete(b.moves.bySource, name)
		} else {
			b.moves.bySource[name] = keep
		}
		return nil
	})
	if err != nil {
		return err
	}
	b.reclaimRange(queueRange(q.ID))
	b.log.Info("queue deleted", "queue", name, "queue_id", q.ID, "messages", len(q.msgs))
	return nil
}

// PurgeQueue implements broker.Backend: a range delete of the queue's
// metadata and bodies, and an emptied index.
func (b *Backend) PurgeQueue(ctx context.Context, name string) error {
	var n int
	var lo, hi []byte
	err := b.update(ctx, name, func(q *queue, batch *pebble.Batch) error {
		now := b.clock.Now()
		if b.opts.StrictPurge && !q.LastPurge.IsZero() && now.Sub(q.LastPurge) < purgeInterval {
			return broker.Errorf(broker.ErrPurgeInProgress,
				"Only one PurgeQueue operation on %s is allowed every 60 seconds.", name)
		}
		q.LastPurge = now
		n = len(q.msgs)
		q.msgs = map[uint64]*msg{}
		q.ready, q.timed, q.age = nil, nil, nil
		q.inflight, q.delayed = 0, 0
		if q.fifo != nil {
			q.fifo = newFifoState() // the dedup window and attempt cache go too
		}
		// Metadata, bodies, dedup and attempt records; not the queue record.
		lo, _ = kindRange(q.ID, kindMeta)
		_, hi = kindRange(q.ID, kindAttempt)
		_ = batch.Set(queueKey(name), q.queueRecord.encode(), nil)
		_ = batch.DeleteRange(lo, hi, nil)
		return nil
	})
	if err != nil {
		return err
	}
	if n > 0 {
		b.reclaimRange(lo, hi)
	}
	b.log.Debug("queue purged", "queue", name, "messages", n)
	return nil
}

func copyTags(tags map[string]string) map[string]string {
	if len(tags) == 0 {
		return nil
	}
	out := make(map[string]string, len(tags))
	for k, v := range tags {
		out[k] = v
	}
	return out
}
