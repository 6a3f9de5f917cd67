package embedded

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
)

// CreateQueue implements storage.Backend.
func (b *Backend) CreateQueue(ctx context.Context, spec storage.QueueSpec) (model.Queue, bool, error) {
	if err := b.enter(ctx); err != nil {
		return model.Queue{}, false, err
	}
	defer b.life.Done()
	name := spec.QueueRef
	b.mu.Lock()
	if q := b.queues[name]; q != nil {
		info := q.info().Queue
		b.mu.Unlock()
		// The create that made it may still be syncing.
		if err := b.syncEarlier(); err != nil {
			return model.Queue{}, false, err
		}
		return info, false, nil
	}
	now := b.clock.Now()
	rec := queueRecord{ID: b.nextQID, Account: name.Account, Name: name.Name, Config: spec.Config, Tags: copyTags(spec.Tags), CreatedAt: now, ModifiedAt: now}
	b.nextQID++
	batch := b.db.NewBatch()
	_ = batch.Set(keyNextQueueID, u64Bytes(b.nextQID), nil)
	_ = batch.Set(queueKey(name), rec.encode(), nil)
	q := newQueue(rec)
	b.queues[name] = q
	b.byID[rec.ID] = q
	info := q.info().Queue
	err := b.applyLocked(batch)
	b.mu.Unlock()
	if err := b.wait(batch, err); err != nil {
		return model.Queue{}, false, err
	}
	b.log.Info("queue created", "queue", name, "queue_id", rec.ID)
	return info, true, nil
}

// GetQueue implements storage.Backend. The counts are the maintained
// counters, brought up to the clock (ended delays and expired leases are
// promoted first: amortised, never a scan).
func (b *Backend) GetQueue(ctx context.Context, name model.QueueRef) (model.QueueInfo, error) {
	if err := ctx.Err(); err != nil {
		return model.QueueInfo{}, err
	}
	if err := b.space.stalledRefusal(); err != nil { // the lock may be held by a stalled write
		return model.QueueInfo{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.refusal(); err != nil {
		return model.QueueInfo{}, err
	}
	q := b.queues[name]
	if q == nil {
		return model.QueueInfo{}, model.QueueNotFoundError()
	}
	b.promoteLocked(q, nil, b.now())
	return q.info(), nil
}

// ListQueues implements storage.Backend.
func (b *Backend) ListQueues(ctx context.Context, account, prefix, after string, limit int) ([]model.Queue, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := b.space.stalledRefusal(); err != nil { // the lock may be held by a stalled write
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.refusal(); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(b.queues))
	for r := range b.queues {
		if r.Account == account && strings.HasPrefix(r.Name, prefix) && r.Name > after {
			names = append(names, r.Name)
		}
	}
	sort.Strings(names)
	if limit > 0 && len(names) > limit {
		names = names[:limit]
	}
	out := make([]model.Queue, len(names))
	for i, n := range names {
		out[i] = b.queues[model.QueueRef{Account: account, Name: n}].info().Queue
	}
	return out, nil
}

// UpdateQueue implements storage.Backend: a read-modify-write of the queue
// record under b.mu. The change is applied to a deep copy of the
// configuration, so that configurations handed out by info() never see a
// change in place.
func (b *Backend) UpdateQueue(ctx context.Context, name model.QueueRef, change model.QueueChange) error {
	err := b.update(ctx, name, func(q *queue, batch *pebble.Batch) error {
		u := plan.QueueUpdate{Queue: name, Config: q.Config.Clone(), Tags: copyTags(q.Tags)}
		if err := u.Apply(change); err != nil {
			return err
		}
		q.Config, q.Tags = u.Config, copyTags(u.Tags)
		if u.Modified {
			q.ModifiedAt = b.clock.Now()
		}
		_ = batch.Set(queueKey(name), q.queueRecord.encode(), nil)
		// Waiting receives look again under the new settings (a resumed
		// queue delivers at once).
		q.notify()
		return nil
	})
	// The retention, the redrive policy or the limits may have changed: the
	// sweeper computes its deadlines again.
	b.sweeper.Kick()
	return err
}

// DeleteQueue implements storage.Backend: the queue record goes at once (in
// the same batch as a range delete of its data); the space is reclaimed by a
// background compaction.
func (b *Backend) DeleteQueue(ctx context.Context, name model.QueueRef) error {
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
				t.Status = model.MoveTaskFailed // an active one stops at once
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

// PurgeQueue implements storage.Backend: a range delete of the queue's
// metadata and bodies, and an emptied index.
func (b *Backend) PurgeQueue(ctx context.Context, name model.QueueRef, minInterval time.Duration) error {
	var n int
	var lo, hi []byte
	err := b.update(ctx, name, func(q *queue, batch *pebble.Batch) error {
		now := b.clock.Now()
		if err := plan.AllowPurge(name.Name, minInterval, q.LastPurge, now); err != nil {
			return err
		}
		q.LastPurge = now
		n = len(q.msgs)
		q.msgs = map[uint64]*msg{}
		q.ready, q.timed, q.age = nil, nil, nil
		q.readyAge = readyAges{}
		q.inflight, q.delayed, q.doomed = 0, 0, nil
		if q.fifo != nil {
			q.fifo = newFifoState() // the attempt cache goes too
		}
		q.window, q.live = dedupWindow{}, nil // and the dedup window
		q.fair = newFairState(q.Config)
		q.ttl, q.ttlCount = nil, 0 // and the expiries
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

// ListQueueStats implements storage.Backend: every queue of account with
// its counts, in name order, under one hold of the lock.
func (b *Backend) ListQueueStats(ctx context.Context, account string) ([]model.QueueInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := b.space.stalledRefusal(); err != nil { // the lock may be held by a stalled write
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.refusal(); err != nil {
		return nil, err
	}
	now := b.now()
	out := make([]model.QueueInfo, 0, len(b.queues))
	for r, q := range b.queues {
		if r.Account == account {
			b.promoteLocked(q, nil, now)
			out = append(out, q.info())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
