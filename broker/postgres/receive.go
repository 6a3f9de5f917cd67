package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/broker"
)

// contendedRetry is the real-time pause before a waiting receive looks again
// when ready messages exist but were all locked by other receives (SKIP
// LOCKED returned none): they are being claimed and will be gone or leased
// within a transaction's time.
const contendedRetry = 2 * time.Millisecond

// Receive implements broker.Backend.
//
// One attempt is two statements, each its own short transaction: promote
// (due delays and leases become ready; it also reads the in-flight count
// for the cap) and claim. No transaction is open while the receive waits.
//
// Waiting: the receive registers as a local waiter of its queue before its
// first attempt (so no wake-up between an attempt and the wait is lost), then
// sleeps on one clock timer armed for the earliest of its wait deadline, the
// queue's next delay or lease end (computed in SQL), and PollInterval. A
// commit on this broker that makes a message ready (or moves a deadline
// earlier) wakes it directly; one on another broker wakes it through
// LISTEN/NOTIFY. Polling stays the source of truth: a lost notification
// delays a receive by at most PollInterval.
func (b *Backend) Receive(ctx context.Context, req broker.ReceiveRequest) ([]broker.Delivery, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.ops.Done()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	q, err := b.getQueue(ctx, b.pool, req.Queue)
	if err != nil {
		return nil, err
	}
	max, vis, wait, err := broker.NormalizeReceive(q.cfg, req)
	if err != nil {
		return nil, err
	}
	deadline := b.clock.Now().Add(wait)
	w := b.waiters.add(q.id)
	defer b.waiters.remove(q.id, w)
	var timer broker.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-b.closing:
			return nil, errClosed()
		default:
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		inflight, err := b.promoteForReceive(ctx, q.id)
		if err != nil {
			return nil, err
		}
		room := int64(b.cfg.MaxInFlight) - inflight
		if room <= 0 {
			return nil, broker.Errorf(broker.ErrOverLimit,
				"Too many messages in flight on queue %s (the limit is %d).", q.name, b.cfg.MaxInFlight)
		}
		// The claim is not cancelled with ctx: once sent it either commits
		// and its messages are returned, or fails; a cancel mid-statement
		// would leave it unknown whether leases were taken.
		ds, moved, err := b.claim(context.WithoutCancel(ctx), q, int(min(int64(max), room)), vis)
		if err != nil {
			return nil, err
		}
		if moved > 0 && q.cfg.Redrive != nil {
			if dlq, err := b.getQueue(ctx, b.pool, q.cfg.Redrive.DeadLetterQueue); err == nil {
				b.changed(dlq.id, time.Time{}, false)
			}
		}
		if len(ds) > 0 {
			b.changed(q.id, b.clock.Now().Add(vis), false)
			return ds, nil
		}
		now := b.clock.Now()
		if !now.Before(deadline) {
			return nil, nil
		}
		wakeAt, real, err := b.nextWake(ctx, q.id, now, deadline)
		if err != nil {
			return nil, err
		}
		var fire <-chan time.Time
		if real > 0 {
			rt := time.NewTimer(real)
			defer rt.Stop()
			fire = rt.C
		} else {
			b.waiters.arm(w, wakeAt)
			if timer == nil {
				timer = b.clock.NewTimer(wakeAt.Sub(now))
			} else {
				timer.Reset(wakeAt.Sub(now))
			}
			fire = timer.C()
		}
		select {
		case <-w.ch:
		case <-fire:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-b.closing:
			return nil, errClosed()
		}
		b.waiters.arm(w, time.Time{}) // wake on anything while attempting
		// The queue may have been deleted (and re-created) or changed.
		nq, err := b.getQueue(ctx, b.pool, req.Queue)
		if err != nil {
			return nil, err
		}
		if nq.id != q.id {
			return nil, errNoQueue()
		}
		q = nq
	}
}

// nextWake decides how a receive that found nothing waits: until wakeAt on
// the clock (the earliest of deadline, the queue's next delay or lease end,
// and now+PollInterval), or, when ready messages exist that a concurrent
// receive holds locked or a deadline passed but its row is locked, for a
// short real time (real > 0).
func (b *Backend) nextWake(ctx context.Context, qid int64, now, deadline time.Time) (wakeAt time.Time, real time.Duration, err error) {
	var readyLeft bool
	var dueIn *int64 // µs from the statement's now to the next delay or lease end
	err = b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM messages WHERE queue_id = $2 AND state = 'r'),
		(SELECT (extract(epoch FROM min(visible_at) - `+nowSQL+`) * 1000000)::bigint
		 FROM messages WHERE queue_id = $2 AND state <> 'r')`, b.tnow(), qid).Scan(&readyLeft, &dueIn)
	if err != nil {
		return time.Time{}, 0, dbErr("next deadline", err)
	}
	if readyLeft || (dueIn != nil && *dueIn <= 0) {
		return time.Time{}, contendedRetry, nil
	}
	wakeAt = deadline
	if p := now.Add(b.cfg.PollInterval); p.Before(wakeAt) {
		wakeAt = p
	}
	if dueIn != nil {
		if d := now.Add(time.Duration(*dueIn) * time.Microsecond); d.Before(wakeAt) {
			wakeAt = d
		}
	}
	return wakeAt, 0, nil
}

// promoteForReceive promotes the queue's due messages and returns its
// in-flight count after the promotion (for the in-flight cap).
func (b *Backend) promoteForReceive(ctx context.Context, qid int64) (int64, error) {
	fromInflight, err := b.promote(ctx, qid)
	if err != nil {
		return 0, err
	}
	var inflight int64
	if err := b.pool.QueryRow(ctx, "SELECT coalesce(sum(inflight), 0) FROM counts WHERE queue_id = $1", qid).Scan(&inflight); err != nil {
		return 0, dbErr("read counts", err)
	}
	_ = fromInflight // already subtracted by the committed promotion
	return inflight, nil
}

// claimSQL leases up to $3 ready messages of queue $2 in one statement:
//
//   - c locks the first ready rows in receive order, skipping rows that
//     other transactions hold (another broker's claim, a delete);
//   - exp deletes those past retention ($4 µs after sent_at);
//   - red moves those whose receive would exceed maxReceiveCount ($7) to the
//     dead-letter queue $5 (NULL: none), ready there, named after $6;
//   - up leases the rest until now + $8 µs, bumping the lease version (the
//     receipts' compare-and-set token) and the receive count;
//   - cnt moves them between counters: every claimed row leaves ready; the
//     leased ones enter in flight, the moved ones enter the DLQ's ready.
//
// The final SELECT has one row even when nothing was leased (id -1), to
// report how many were moved.
const claimSQL = `
WITH c AS (
	SELECT id, priority, visible_at, receive_count, sent_at FROM messages
	WHERE queue_id = $2 AND state = 'r'
	ORDER BY priority DESC, visible_at, id LIMIT $3 FOR UPDATE SKIP LOCKED),
exp AS (
	DELETE FROM messages m USING c
	WHERE m.id = c.id AND c.sent_at <= ` + nowSQL + ` - $4 * interval '1 microsecond' RETURNING m.id),
red AS (
	UPDATE messages m SET queue_id = $5, visible_at = ` + nowSQL + `, dl_source = $6 FROM c
	WHERE m.id = c.id AND $5::bigint IS NOT NULL AND c.receive_count >= $7
		AND c.sent_at > ` + nowSQL + ` - $4 * interval '1 microsecond' RETURNING m.id),
up AS (
	UPDATE messages m SET state = 'i', lease = m.lease + 1, receive_count = m.receive_count + 1,
		first_receive_at = coalesce(m.first_receive_at, ` + nowSQL + `),
		visible_at = ` + nowSQL + ` + $8 * interval '1 microsecond'
	FROM c
	WHERE m.id = c.id AND NOT ($5::bigint IS NOT NULL AND c.receive_count >= $7)
		AND c.sent_at > ` + nowSQL + ` - $4 * interval '1 microsecond'
	RETURNING m.id, m.lease, m.receive_count, m.first_receive_at, m.sent_at, m.priority, m.seq,
		m.message_id, m.group_id, m.dedup_id, m.dl_source, m.sender_id, m.attrs, m.body),
cnt AS (
	INSERT INTO counts AS k (queue_id, shard, ready, inflight, delayed)
	SELECT q, $9, r, i, 0 FROM (VALUES
		($2::bigint, -(SELECT count(*) FROM c), (SELECT count(*) FROM up)),
		($5::bigint, (SELECT count(*) FROM red), 0)) v (q, r, i)
	WHERE q IS NOT NULL AND (r <> 0 OR i <> 0) ORDER BY q
	ON CONFLICT (queue_id, shard) DO UPDATE SET ready = k.ready + excluded.ready,
		inflight = k.inflight + excluded.inflight)
SELECT s.moved, coalesce(u.id, -1), coalesce(u.lease, 0), coalesce(u.receive_count, 0), u.first_receive_at,
	coalesce(u.sent_at, 'epoch'), coalesce(u.priority, 0), u.seq, coalesce(u.message_id::text, ''),
	coalesce(u.group_id, ''), coalesce(u.dedup_id, ''), coalesce(u.dl_source, ''), coalesce(u.sender_id, ''),
	u.attrs, coalesce(u.body, '')
FROM (SELECT (SELECT count(*) FROM red) AS moved) s
LEFT JOIN (SELECT up.*, c.priority AS cp, c.visible_at AS cv FROM up JOIN c USING (id)) u ON true
ORDER BY u.cp DESC, u.cv, u.id`

// claim runs claimSQL for queue q and builds the deliveries, in receive order.
func (b *Backend) claim(ctx context.Context, q queueRow, n int, vis time.Duration) ([]broker.Delivery, int64, error) {
	var dlq any // SQL NULL: no dead-letter queue
	maxRC := int64(math.MaxInt32)
	if rp := q.cfg.Redrive; rp != nil {
		if d, err := b.getQueue(ctx, b.pool, rp.DeadLetterQueue); err == nil && d.id != q.id {
			dlq, maxRC = d.id, int64(rp.MaxReceiveCount)
		} else if err != nil && !errors.Is(err, broker.ErrQueueDoesNotExist) {
			return nil, 0, err
		}
	}
	var out []broker.Delivery
	var moved int64
	err := retry(func() error {
		out, moved = nil, 0
		rows, err := b.pool.Query(ctx, claimSQL, b.tnow(), q.id, n, micros(q.cfg.Retention),
			dlq, q.name, maxRC, micros(vis), shard())
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				id, lease         int64
				rc                int
				firstAt           *time.Time
				sentAt            time.Time
				prio              int
				seq               *int64
				attrs             []byte
				d                 broker.Delivery
				group, dedup, src string
			)
			if err := rows.Scan(&moved, &id, &lease, &rc, &firstAt, &sentAt, &prio, &seq, &d.ID,
				&group, &dedup, &src, &d.SenderID, &attrs, &d.Body); err != nil {
				return err
			}
			if id < 0 {
				continue
			}
			d.ReceiveCount, d.SentAt, d.Priority = rc, sentAt, prio
			d.GroupID, d.DedupID, d.DeadLetterSource = group, dedup, src
			if firstAt != nil {
				d.FirstReceiveAt = *firstAt
			}
			if seq != nil {
				d.SequenceNumber = strconv.FormatInt(*seq, 10)
			}
			if len(attrs) > 0 {
				var sa storedAttrs
				if err := json.Unmarshal(attrs, &sa); err != nil {
					b.log.Error("receive: corrupt attributes", "queue", q.name, "message_id", d.ID, "err", err)
				}
				d.Attributes, d.SystemAttributes = sa.A, sa.S
			}
			d.Receipt = broker.Receipt{QueueID: uint64(q.id), Key: uint64(id), Lease: uint64(lease)}.Encode()
			out = append(out, d)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, 0, dbErr("receive", err)
	}
	return out, moved, nil
}
