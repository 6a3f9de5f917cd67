package embedded

import (
	"context"
	"time"
)

// sweepBudget bounds the messages the retention sweeper deletes per batch,
// so that it holds Backend.mu briefly; it loops at once while more are due.
const sweepBudget = 1000

// sweepIdle is how long the sweeper sleeps when no message exists (a send
// that needs an earlier sweep kicks it).
const sweepIdle = time.Hour

// noteExpiryLocked kicks the sweeper when m, just added to q, expires (by
// its queue's retention or its time to live) before the sweeper's current
// deadline. b.mu must be held.
func (b *Backend) noteExpiryLocked(q *queue, m *msg) {
	exp := m.sentAt + int64(q.Config.Retention)
	if t := m.expiresAt(); t != 0 && t < exp {
		exp = t
	}
	if b.sweepAt == 0 || exp < b.sweepAt {
		b.sweepAt = exp
		b.sweeper.Kick()
	}
}

// sweepStep is the retention sweeper's step (b.sweeper, a lifecycle.Duty): it
// moves the messages whose lease ended on their last attempt to their
// dead-letter queue (retry.go), expires the messages whose time to live
// passed (ttl.go), deletes messages whose SentAt + the queue's Retention has
// passed, whatever their state (ready, in flight, delayed, dead-lettered),
// sweepBudget at a time, and asks to run again at the next expiry or lease
// end that may dead-letter or expire a message. All state it touches is
// under Backend.mu.
func (b *Backend) sweepStep(context.Context) (time.Time, error) {
	next, more := b.sweepOnce()
	rnext, rmore := b.sweepRecords() // records.go
	if rnext != 0 && (next == 0 || rnext < next) {
		next = rnext
	}
	more = more || rmore
	switch {
	case more:
		return b.clock.Now(), nil
	case next == 0:
		return time.Time{}, nil
	}
	return fromNanos(next), nil
}

// sweepOnce moves and deletes up to sweepBudget messages in one synced batch.
// It returns its next deadline (Unix ns, 0 if none) and whether more are due.
func (b *Backend) sweepOnce() (next int64, more bool) {
	b.mu.Lock()
	if b.refusal() != nil {
		b.mu.Unlock()
		return 0, false
	}
	now := b.now()
	batch := b.db.NewBatch()
	n := 0
	// The archive's part (archive.go): the lines of the messages of
	// ArchiveExpired queues that this sweep removes by retention.
	as := archiveSweep{on: b.archive != nil && b.archive.Available(fromNanos(now))}
	for _, q := range b.queues {
		// Leases that ended on their last attempt, or past their
		// message's time to live: their messages move to the dead-letter
		// queue (or are dropped) now, even when no one calls.
		if q.Config.Redrive != nil || len(q.doomed) > 0 || q.ttlCount > 0 {
			q.promote(now)
			if len(q.doomed) > 0 {
				k := b.flushDoomedLocked(q, batch, now, max(sweepBudget-n, 0))
				n += k
				if len(q.doomed) > 0 {
					more = true
				}
			}
		}
		// Messages whose time to live passed (after promote: see ttl.go).
		k, due := b.expireDueLocked(q, batch, now, max(sweepBudget-n, 0))
		n += k
		more = more || due
		if t, ok := q.nextTTL(); ok && (next == 0 || t < next) {
			next = t
		}
		for len(q.age) > 0 && q.expired(q.age[0], now) {
			if n >= sweepBudget {
				more = true
				break
			}
			m := q.age[0]
			if q.Config.ArchiveExpired && b.takeArchiveLocked(&as, q, m, now) {
				more = true
				break
			}
			q.remove(m)
			deleteMessageRecords(batch, q.ID, m.key)
			n++
		}
		if exp, ok := q.nextExpiry(); ok && (next == 0 || exp < next) {
			next = exp
		}
		// The next lease end that may dead-letter or expire a message (an
		// earlier delay's end, at worst, makes a spare step).
		if t, ok := q.nextTimed(); ok && (q.Config.Redrive != nil || q.ttlCount > 0) && q.inflight > 0 && (next == 0 || t < next) {
			next = t
		}
	}
	b.sweepAt = next
	// The archive is synced before the batch that removes its messages
	// and moves its cursor.
	cur, fault := b.writeArchiveLocked(&as, batch)
	if fault != nil {
		b.fail(fault)
		_ = batch.Close()
		b.mu.Unlock()
		return 0, false
	}
	err := b.applyLocked(batch)
	b.mu.Unlock()
	err = b.wait(batch, err)
	b.archiveDone(&as, cur, err)
	if err != nil {
		b.log.Error("retention sweep failed", "err", err)
	} else if n > 0 {
		b.log.Debug("retention sweep", "handled", n)
	}
	return next, more
}

// reclaimRange asks the reclaimer to compact a range whose data was range
// deleted (a deleted or purged queue). Never blocks: if the queue of
// requests is full, Pebble's own compactions reclaim the space later.
func (b *Backend) reclaimRange(lo, hi []byte) {
	select {
	case b.reclaim <- [2][]byte{lo, hi}:
	default:
	}
}

// reclaimLoop compacts deleted ranges that reached sstables, so that their
// space is freed soon (data still in the memtable is dropped by its flush).
func (b *Backend) reclaimLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-b.reclaim:
			size, err := b.db.EstimateDiskUsage(r[0], r[1])
			if err != nil || size == 0 {
				continue
			}
			if err := b.db.Compact(ctx, r[0], r[1], false); err != nil && ctx.Err() == nil {
				b.log.Warn("reclaim compaction failed", "err", err)
			} else if err == nil {
				b.log.Debug("reclaimed deleted range", "bytes", size)
			}
		}
	}
}
