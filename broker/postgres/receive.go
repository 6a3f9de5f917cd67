package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

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
	if err := b.enter(ctx); err != nil {
		return nil, err
	}
	defer b.life.Done()
	q, err := b.getQueue(ctx, b.pool, req.Ref())
	if err != nil {
		return nil, err
	}
	plan, err := broker.PlanReceive(q.cfg, req)
	if err != nil {
		return nil, err
	}
	vis, attemptID := plan.Visibility, plan.AttemptID
	if attemptID != "" {
		if ds, ok, err := b.replayAttempt(ctx, q, attemptID); ok || err != nil {
			return ds, err
		}
	}
	deadline := b.clock.Now().Add(plan.Wait)
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
		case <-b.life.Closing():
			return nil, broker.ClosedError()
		default:
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		inflight, err := b.promoteForReceive(ctx, q.mid)
		if err != nil {
			return nil, err
		}
		n, err := broker.ClaimRoom(q.name, q.cfg.Fifo, plan.Max, inflight, req.InFlightCap)
		if err != nil {
			return nil, err
		}
		// The claim is not cancelled with ctx: once sent it either commits
		// and its messages are returned, or fails; a cancel mid-statement
		// would leave it unknown whether leases were taken.
		var ds []broker.Delivery
		var moved int64
		switch {
		case n == 0:
			// A FIFO queue at its in-flight cap: the receive waits as on an
			// empty queue (ClaimRoom).
		case !q.cfg.Fifo:
			var to claimTo
			if to, err = b.claimTarget(ctx, q); err == nil {
				ds, moved, err = b.claim(context.WithoutCancel(ctx), b.pool, q, to, n, vis, nil, "")
			}
		default:
			ds, moved, err = b.claimFifo(context.WithoutCancel(ctx), q, n, vis, attemptID)
		}
		if err != nil {
			return nil, err
		}
		if moved > 0 && q.cfg.Redrive != nil {
			if dlq, err := b.getQueue(ctx, b.pool, broker.QueueRef{Account: q.account, Name: q.cfg.Redrive.DeadLetterQueue}); err == nil {
				b.changed(dlq.id, time.Time{}, false)
			}
			b.sweeper.Kick() // a dead letter may expire sooner under its new queue's retention
		}
		if len(ds) > 0 {
			b.changed(q.id, b.clock.Now().Add(vis), false)
			return ds, nil
		}
		if moved > 0 {
			continue // the moved messages made room: look again at once
		}
		now := b.clock.Now()
		if !now.Before(deadline) {
			return nil, nil
		}
		wakeAt, real, err := b.nextWake(ctx, q, now, deadline)
		if err != nil {
			return nil, err
		}
		var fire <-chan time.Time
		var rt *time.Timer
		if real > 0 {
			rt = time.NewTimer(real)
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
		case <-b.life.Closing():
			return nil, broker.ClosedError()
		}
		if rt != nil {
			rt.Stop()
		}
		b.waiters.arm(w, time.Time{}) // wake on anything while attempting
		// The queue may have been deleted (and re-created) or changed.
		nq, err := b.getQueue(ctx, b.pool, req.Ref())
		if err != nil {
			return nil, err
		}
		if nq.id != q.id {
			return nil, broker.QueueNotFoundError()
		}
		q = nq
	}
}

// nextWake decides how a receive that found nothing waits: until wakeAt on
// the clock (the earliest of deadline, the queue's next delay or lease end,
// and now+PollInterval), or, when ready messages exist that a concurrent
// receive holds locked or a deadline passed but its row is locked, for a
// short real time (real > 0).
//
// On a FIFO queue ready messages behind locked groups are normal, not
// contention: only deadlines count (a group unlock wakes the waiters).
func (b *Backend) nextWake(ctx context.Context, q queueRow, now, deadline time.Time) (wakeAt time.Time, real time.Duration, err error) {
	var readyLeft bool
	var dueIn *int64 // µs from the statement's now to the next delay or lease end
	err = b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM messages WHERE queue_id = $2 AND state = 'r'),
		(SELECT (extract(epoch FROM min(visible_at) - `+nowSQL+`) * 1000000)::bigint
		 FROM messages WHERE queue_id = $2 AND state <> 'r')`, b.tnow(), q.mid).Scan(&readyLeft, &dueIn)
	if err != nil {
		return time.Time{}, 0, dbErr("next deadline", err)
	}
	if (readyLeft && !q.cfg.Fifo) || (dueIn != nil && *dueIn <= 0) {
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

// claimSQL leases up to @limit ready messages of queue @queue (its mid) in
// one statement, with named arguments (see claim):
//
//   - c locks the rows to claim: on a standard queue the first ready rows in
//     receive order, skipping rows that other transactions hold (another
//     broker's claim, a delete); on a FIFO queue the rows @ids chosen under
//     the group locks (claimFifo), in that order;
//   - exp deletes those past retention (@retention µs after sent_at);
//   - red moves those whose receive would exceed maxReceiveCount
//     (@max_receives; broker.ShouldDeadLetter, spelled in SQL, with the
//     fields of broker.PlanDeadLetter) to the dead-letter queue @dlq (NULL: none), ready
//     there, named after @source; into a FIFO dead-letter queue (@dlq_fifo)
//     with a new sequence number, its message id as dedup id and a new SentAt
//     (as SQS resets a FIFO dead letter's enqueue time), and a group row
//     there (locked: created again if the sweeper is pruning it, see
//     lockGroupsSQL; claimFifo has locked it already, before this statement
//     takes the sequence number);
//   - up leases the rest until now + @visibility µs, bumping the lease
//     version (the receipts' compare-and-set token) and the receive count,
//     and records the receive attempt @attempt (FIFO; NULL otherwise);
//   - cnt moves them between counters (shard @shard): every claimed row
//     leaves ready; the leased ones enter in flight, the moved ones enter
//     the DLQ's ready.
//
// @now is the statement's instant (see nowSQL). The final SELECT has one row
// even when nothing was leased (id -1), to report how many were moved.
func claimSQL(fifo bool) string {
	const now = "coalesce(@now::timestamptz, now())"
	const live = "c.sent_at > " + now + " - @retention * interval '1 microsecond'"
	const toDLQ = "@dlq::bigint IS NOT NULL AND c.receive_count >= @max_receives"
	c := `SELECT id, priority, visible_at, receive_count, sent_at FROM messages
	WHERE queue_id = @queue AND state = 'r'
	ORDER BY priority DESC, visible_at, id LIMIT @limit FOR UPDATE SKIP LOCKED`
	if fifo {
		c = `SELECT id, priority, visible_at, receive_count, sent_at FROM messages
	WHERE id = ANY(@ids::bigint[]) AND queue_id = @queue AND state = 'r' LIMIT @limit FOR UPDATE`
	}
	return `
WITH c AS (` + c + `),
exp AS (
	DELETE FROM messages m USING c
	WHERE m.id = c.id AND NOT (` + live + `) RETURNING m.id),
red AS (
	UPDATE messages m SET queue_id = @dlq, visible_at = ` + now + `, dl_source = @source, attempt = NULL,
		seq = CASE WHEN @dlq_fifo THEN nextval('fifo_seq') ELSE m.seq END,
		dedup_id = CASE WHEN @dlq_fifo THEN m.message_id::text ELSE m.dedup_id END,
		sent_at = CASE WHEN @dlq_fifo THEN ` + now + ` ELSE m.sent_at END
	FROM c
	WHERE m.id = c.id AND ` + toDLQ + ` AND ` + live + ` RETURNING m.id, m.group_id),
grp AS (
	INSERT INTO groups (queue_id, group_id) SELECT DISTINCT @dlq::bigint, group_id FROM red
	WHERE @dlq_fifo AND group_id IS NOT NULL ORDER BY 2
	ON CONFLICT (queue_id, group_id) DO UPDATE SET group_id = excluded.group_id WHERE false),
up AS (
	UPDATE messages m SET state = 'i', lease = m.lease + 1, receive_count = m.receive_count + 1,
		first_receive_at = coalesce(m.first_receive_at, ` + now + `),
		visible_at = ` + now + ` + @visibility * interval '1 microsecond', attempt = @attempt
	FROM c
	WHERE m.id = c.id AND NOT (` + toDLQ + `) AND ` + live + `
	RETURNING ` + msgCols("m") + `),
cnt AS (
	INSERT INTO counts AS k (queue_id, shard, ready, inflight, delayed)
	SELECT q, @shard, r, i, 0 FROM (VALUES
		(@queue::bigint, -(SELECT count(*) FROM c), (SELECT count(*) FROM up)),
		(@dlq::bigint, (SELECT count(*) FROM red), 0)) v (q, r, i)
	WHERE q IS NOT NULL AND (r <> 0 OR i <> 0) ORDER BY q
	ON CONFLICT (queue_id, shard) DO UPDATE SET ready = k.ready + excluded.ready,
		inflight = k.inflight + excluded.inflight)
SELECT s.moved, coalesce(u.id, -1), coalesce(u.lease, 0), coalesce(u.receive_count, 0), u.first_receive_at,
	coalesce(u.sent_at, 'epoch'), coalesce(u.priority, 0), u.seq, coalesce(u.message_id, ''),
	coalesce(u.group_id, ''), coalesce(u.dedup_id, ''), coalesce(u.dl_source, ''), coalesce(u.sender_id, ''),
	u.attrs, coalesce(u.body, '')
FROM (SELECT (SELECT count(*) FROM red) AS moved) s
LEFT JOIN (SELECT up.*, c.priority AS cp, c.visible_at AS cv FROM up JOIN c USING (id)) u ON true
ORDER BY array_position(@ids::bigint[], u.id), u.cp DESC, u.cv, u.id`
}

var (
	claimStandardSQL = claimSQL(false)
	claimFifoSQL     = claimSQL(true)
)

// msgCols are the columns of a delivery, in scanDelivery's order, of the
// messages row alias t.
func msgCols(t string) string {
	return t + ".id, " + t + ".lease, " + t + ".receive_count, " + t + ".first_receive_at, " + t + ".sent_at, " +
		t + ".priority, " + t + ".seq, " + t + ".message_id::text AS message_id, coalesce(" + t + ".group_id, '') AS group_id, " +
		"coalesce(" + t + ".dedup_id, '') AS dedup_id, coalesce(" + t + ".dl_source, '') AS dl_source, " +
		t + ".sender_id, " + t + ".attrs, " + t + ".body"
}

// scanDelivery reads the msgCols of one row into a delivery of queue q
// (the receipt is left to the caller); id is the message key.
func (b *Backend) scanDelivery(scan func(dest ...any) error, prefix []any, q queueRow) (id, lease int64, d broker.Delivery, err error) {
	var (
		rc                int
		firstAt           *time.Time
		sentAt            time.Time
		prio              int
		seq               *int64
		attrs             []byte
		group, dedup, src string
	)
	dest := append(prefix, &id, &lease, &rc, &firstAt, &sentAt, &prio, &seq, &d.ID,
		&group, &dedup, &src, &d.SenderID, &attrs, &d.Body)
	if err := scan(dest...); err != nil {
		return 0, 0, d, err
	}
	d.ReceiveCount, d.SentAt, d.Priority = rc, sentAt, prio
	d.GroupID, d.DedupID, d.DeadLetterSource = group, dedup, src
	if firstAt != nil {
		d.FirstReceiveAt = *firstAt
	}
	if seq != nil {
		d.SequenceNumber = broker.FormatSequenceNumber(uint64(*seq))
	}
	if len(attrs) > 0 {
		var sa storedAttrs
		if err := json.Unmarshal(attrs, &sa); err != nil {
			b.log.Error("receive: corrupt attributes", "queue", q.name, "message_id", d.ID, "err", err)
		}
		d.Attributes, d.SystemAttributes = sa.A, sa.S
	}
	return id, lease, d, nil
}

// claimTo is where a claim moves messages past their maxReceiveCount: the
// dead-letter queue's mid (nil: none), whether it is FIFO, and the limit.
type claimTo struct {
	dlq     any
	dlqFifo bool
	maxRC   int64
}

// claimTarget is where a claim of queue q moves messages past their
// maxReceiveCount.
func (b *Backend) claimTarget(ctx context.Context, q queueRow) (claimTo, error) {
	if rp := q.cfg.Redrive; rp != nil {
		d, err := b.getQueue(ctx, b.pool, broker.QueueRef{Account: q.account, Name: rp.DeadLetterQueue})
		if err == nil && d.id != q.id {
			return claimTo{d.mid, d.cfg.Fifo, int64(rp.MaxReceiveCount)}, nil
		}
		if err != nil && !errors.Is(err, broker.ErrQueueDoesNotExist) {
			return claimTo{}, err
		}
	}
	return claimTo{maxRC: int64(math.MaxInt32)}, nil
}

// claim runs claimSQL for queue q on db (the pool, or a FIFO claim's
// transaction) and builds the deliveries, in receive order; to is
// claimTarget's answer for q. ids and attemptID are the FIFO claim's rows
// and receive attempt (nil, "" on standard queues).
func (b *Backend) claim(ctx context.Context, db querier, q queueRow, to claimTo, n int, vis time.Duration, ids []int64, attemptID string) ([]broker.Delivery, int64, error) {
	var err error
	sql, idArg, attempt := claimStandardSQL, any(nil), any(nil)
	if q.cfg.Fifo {
		sql, idArg = claimFifoSQL, ids
	}
	if attemptID != "" {
		attempt = attemptID
	}
	var out []broker.Delivery
	var moved int64
	run := func() error {
		out, moved = nil, 0
		rows, err := db.Query(ctx, sql, pgx.NamedArgs{
			"now": b.tnow(), "queue": q.mid, "limit": n, "retention": micros(q.cfg.Retention),
			"dlq": to.dlq, "source": q.name, "max_receives": to.maxRC, "visibility": micros(vis),
			"shard": shard(), "ids": idArg, "dlq_fifo": to.dlqFifo, "attempt": attempt,
		})
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			id, lease, d, err := b.scanDelivery(rows.Scan, []any{&moved}, q)
			if err != nil {
				return err
			}
			if id < 0 {
				continue
			}
			d.Receipt = broker.Receipt{QueueID: uint64(q.id), Key: uint64(id), Lease: uint64(lease)}.Encode()
			out = append(out, d)
		}
		return rows.Err()
	}
	if q.cfg.Fifo {
		err = run() // inside claimFifo's transaction, which retries as a whole
	} else {
		err = retry(run)
	}
	if err != nil {
		return nil, 0, dbErr("receive", err)
	}
	return out, moved, nil
}
