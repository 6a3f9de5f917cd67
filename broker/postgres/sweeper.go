package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// sweepBudget bounds the messages one sweep statement deletes per queue, so
// that each sweep is a short transaction; the sweeper loops at once while
// more are due.
const sweepBudget = 1000

// sweepIdle is the longest the sweeper sleeps (on the clock): other brokers
// may have lowered a retention period or deleted a queue.
const sweepIdle = time.Minute

// noteExpiry kicks the sweeper when a message just sent to q expires (by
// the queue's retention, or by ttl, the shortest time to live of the send:
// 0 for none) before the sweeper's current deadline.
func (b *Backend) noteExpiry(q queueRow, ttl time.Duration) {
	d := q.cfg.Retention
	if ttl > 0 && ttl < d {
		d = ttl
	}
	exp := b.clock.Now().Add(d)
	b.mu.Lock()
	kick := b.sweepAt.IsZero() || exp.Before(b.sweepAt)
	if kick {
		b.sweepAt = exp
	}
	b.mu.Unlock()
	if kick {
		b.sweeper.Kick()
	}
}

// sweepStep is the sweeper's step (b.sweeper, a lifecycle.Duty): it deletes
// messages past their queue's retention, whatever their state, and the
// messages of deleted queues, applies the ended leases of queues with a
// retry or redrive policy (sweepLeases) and the expiries of messages' times
// to live (sweepTTL), in bounded statements, at once
// again while more is due, else at the next expiry or lease end (at most
// sweepIdle: other brokers may have lowered a retention period, deleted a
// queue or leased a message). Every broker runs
// one; SKIP LOCKED keeps them from waiting on each other.
func (b *Backend) sweepStep(ctx context.Context) (time.Time, error) {
	// next counts from the step's statements' instant: add it to the clock's
	// reading before them, not after (a clock that moved meanwhile, a fake
	// one in tests, made the sweep late by the move: the retention of an
	// in-flight message freed its MaxInFlight room after the test's end).
	now := b.clock.Now()
	next, more, err := b.sweepOnce(ctx)
	if err != nil {
		return time.Time{}, err
	}
	if more {
		return b.clock.Now(), nil
	}
	d := sweepIdle
	if next >= 0 && next < d {
		d = next
	}
	b.mu.Lock()
	b.sweepAt = now.Add(d)
	b.mu.Unlock()
	return now.Add(d), nil
}

// sweepOnce runs one retention sweep and one reclaim step. It returns the
// time until the next expiry (-1 if no message exists) and whether more work
// is due at once.
//
// The retention sweep leaves alone the messages whose time to live passed
// too and that no live lease holds (expireDueSQL's rows): their time to
// live goes first, and sweepTTL expires them (to the dead-letter queue, on
// a queue that dead-letters its expired messages: a MessageTimeToLive equal
// to the MessageRetentionPeriod is how one asks for that instead of the
// loss). A message held by a live lease is deleted, whatever its time to
// live, as the embedded store deletes it. The rows left alone are in the
// sweep's index range only until sweepTTL has run.
//
// The retention sweep's statement also returns the ids of the queues of
// which it deleted a message in flight on a FIFO queue (its group may be
// free) or a queue with a MaxInFlight (there is room): their waiting
// receives are woken, on every broker, as by a delete.
func (b *Backend) sweepOnce(ctx context.Context) (next time.Duration, more bool, err error) {
	var expired int64
	var freed []int64
	err = retry(func() error {
		return b.pool.QueryRow(ctx, `
		WITH q AS (SELECT mid AS id, id AS qid, (config->>'Retention')::bigint / 1000 AS ret,
			coalesce(config->>'Fifo', '') = 'true' OR coalesce((config->>'MaxInFlight')::bigint, 0) > 0 AS wake
			FROM queues q WHERE NOT deleted AND NOT `+archiveQueueSQL+`),
		exp AS (
			SELECT m.id, m.queue_id, m.state, q.qid, q.wake FROM q CROSS JOIN LATERAL (
				SELECT id, queue_id, state FROM messages
				WHERE queue_id = q.id AND sent_at <= `+nowSQL+` - q.ret * interval '1 microsecond'
					AND NOT (coalesce(expires_at <= `+nowSQL+`, false) AND (state <> 'i' OR visible_at <= `+nowSQL+`))
				ORDER BY sent_at LIMIT $2 FOR UPDATE SKIP LOCKED) m),
		del AS (DELETE FROM messages d USING exp WHERE d.id = exp.id RETURNING exp.queue_id, exp.state, exp.qid, exp.wake),
		cnt AS (
			INSERT INTO counts AS c (queue_id, shard, ready, inflight, delayed)
			SELECT queue_id, $3, -count(*) FILTER (WHERE state = 'r'),
				-count(*) FILTER (WHERE state = 'i'), -count(*) FILTER (WHERE state = 'd')
			FROM del GROUP BY queue_id ORDER BY queue_id
			ON CONFLICT (queue_id, shard) DO UPDATE SET ready = c.ready + excluded.ready,
				inflight = c.inflight + excluded.inflight, delayed = c.delayed + excluded.delayed)
		SELECT count(*), coalesce(array_agg(DISTINCT qid) FILTER (WHERE state = 'i' AND wake), '{}') FROM del`,
			b.tnow(), sweepBudget, shard()).Scan(&expired, &freed)
	})
	if err != nil {
		return -1, false, dbErr("retention sweep", err)
	}
	if expired > 0 {
		b.log.Debug("retention sweep", "deleted", expired)
	}
	for _, id := range freed {
		b.changed(id, time.Time{}, false)
	}
	// The FIFO dedup window and receive-attempt cache: lookups check the
	// expiry, so this is only space. The outer DELETEs check the expiry
	// again: the subqueries see the rows as of the statement's start, and a
	// send (or receive) may renew an expired row before the DELETE locks
	// it; PostgreSQL then re-checks only the DELETE's own conditions on the
	// renewed row, which must not go.
	if _, err := b.pool.Exec(ctx, `
		WITH d AS (DELETE FROM dedup WHERE (queue_id, key) IN (
			SELECT queue_id, key FROM dedup WHERE expires_at <= `+nowSQL+` LIMIT $2)
			AND expires_at <= `+nowSQL+`),
		a AS (DELETE FROM attempts WHERE (queue_id, attempt_id) IN (
			SELECT queue_id, attempt_id FROM attempts WHERE expires_at <= `+nowSQL+` LIMIT $2)
			AND expires_at <= `+nowSQL+`)
		SELECT 1`, b.tnow(), sweepBudget); err != nil {
		return -1, false, dbErr("expire dedup window", err)
	}
	// The message records past their due time (status.go).
	var records int64
	if err := b.pool.QueryRow(ctx, `
		WITH d AS (DELETE FROM message_records WHERE (queue_id, message_id) IN (
			SELECT queue_id, message_id FROM message_records WHERE due <= `+nowSQL+` ORDER BY due LIMIT $2)
			AND due <= `+nowSQL+` RETURNING 1)
		SELECT count(*) FROM d`, b.tnow(), sweepBudget).Scan(&records); err != nil {
		return -1, false, dbErr("expire message records", err)
	}
	// The retention of ArchiveExpired queues, which the retention statement
	// above leaves alone (archive.go).
	archiveMore, err := b.sweepArchive(ctx)
	if err != nil {
		return -1, false, err
	}
	leasesMore, err := b.sweepLeases(ctx)
	if err != nil {
		return -1, false, err
	}
	// The instant sweepTTL starts from: an expiry after it counts for the
	// next wake-up (nextExpirySQL's $2) even when it has passed by the time
	// that is read, so one that passes while the sweep runs is not left to
	// sweepIdle.
	var ttlFrom time.Time
	if err := b.pool.QueryRow(ctx, `SELECT `+nowSQL, b.tnow()).Scan(&ttlFrom); err != nil {
		return -1, false, dbErr("sweep expiries", err)
	}
	ttlMore, err := b.sweepTTL(ctx) // after the leases: see ttl.go
	if err != nil {
		return -1, false, err
	}
	if f := b.afterSweepTTL.Load(); f != nil {
		(*f)()
	}
	pruned, err := b.pruneGroups(ctx)
	if err != nil {
		return -1, false, err
	}
	reclaimed, err := b.reclaim(ctx)
	if err != nil {
		return -1, false, err
	}
	var dueIn *int64
	err = b.pool.QueryRow(ctx, `
		SELECT (extract(epoch FROM min(m.sent_at + q.ret * interval '1 microsecond') - `+nowSQL+`) * 1000000)::bigint
		FROM (SELECT mid AS id, (config->>'Retention')::bigint / 1000 AS ret FROM queues WHERE NOT deleted) q
		CROSS JOIN LATERAL (SELECT sent_at FROM messages WHERE queue_id = q.id ORDER BY sent_at LIMIT 1) m`,
		b.tnow()).Scan(&dueIn)
	if err != nil {
		return -1, false, dbErr("next expiry", err)
	}
	// The next lease end of a queue with a policy (see sweepLeases).
	var leaseIn *int64
	err = b.pool.QueryRow(ctx, `
		SELECT (extract(epoch FROM min(m.visible_at) - `+nowSQL+`) * 1000000)::bigint
		FROM queues q CROSS JOIN LATERAL (SELECT visible_at FROM messages
			WHERE queue_id = q.mid AND state = 'i' ORDER BY visible_at LIMIT 1) m
		WHERE NOT q.deleted AND `+policySQL, b.tnow()).Scan(&leaseIn)
	if err != nil {
		return -1, false, dbErr("next lease end", err)
	}
	// The next expiry of a message's time to live (ttl.go).
	var ttlIn *int64
	if err := b.pool.QueryRow(ctx, nextExpirySQL, b.tnow(), ttlFrom).Scan(&ttlIn); err != nil {
		return -1, false, dbErr("next time to live", err)
	}
	// The next message record's due time.
	var recordIn *int64
	if err := b.pool.QueryRow(ctx, `SELECT (extract(epoch FROM min(due) - `+nowSQL+`) * 1000000)::bigint FROM message_records`,
		b.tnow()).Scan(&recordIn); err != nil {
		return -1, false, dbErr("next message record", err)
	}
	next = -1
	for _, in := range []*int64{dueIn, leaseIn, ttlIn, recordIn} {
		if in != nil {
			if d := max(time.Duration(*in)*time.Microsecond, 0); next < 0 || d < next {
				next = d
			}
		}
	}
	return next, expired > 0 || archiveMore || reclaimed || pruned >= sweepBudget || leasesMore || ttlMore || records >= sweepBudget, nil
}

// policySQL selects the queues (alias q) whose ended leases are planned in
// Go (hasRetryOrRedrive): a RetryPolicy or a RedrivePolicy in their settings.
const policySQL = `(jsonb_typeof(q.config->'Retry') = 'object' OR jsonb_typeof(q.config->'Redrive') = 'object')`

// sweepLeasesQueues bounds the queues one sweep plans ended leases of.
const sweepLeasesQueues = 100

// sweepLeases applies the ended leases of queues with a policy
// (expireLeases), so that a message whose last attempt ended moves to the
// dead-letter queue, and a failed one starts its backoff, without waiting
// for a receive or GetQueue of its queue. It reports whether more is due.
func (b *Backend) sweepLeases(ctx context.Context) (bool, error) {
	rows, err := b.pool.Query(ctx, `SELECT `+queueCols+` FROM queues q
		WHERE NOT q.deleted AND `+policySQL+` AND EXISTS (SELECT 1 FROM messages m
			WHERE m.queue_id = q.mid AND m.state = 'i' AND m.visible_at <= `+nowSQL+`)
		ORDER BY q.id LIMIT $2`, b.tnow(), sweepLeasesQueues)
	if err != nil {
		return false, dbErr("sweep leases", err)
	}
	var queues []queueRow
	for rows.Next() {
		q, err := scanQueue(rows)
		if err != nil {
			rows.Close()
			return false, dbErr("sweep leases", err)
		}
		queues = append(queues, q)
	}
	if err := rows.Err(); err != nil {
		return false, dbErr("sweep leases", err)
	}
	more := len(queues) == sweepLeasesQueues
	for _, q := range queues {
		moved, full, err := b.expireLeases(ctx, q)
		if err != nil {
			return false, err
		}
		b.deadLettered(ctx, q, moved)
		more = more || full
	}
	return more, nil
}

// pruneGroups deletes up to sweepBudget FIFO group rows whose group has no
// message, and returns how many. The rows are locked first (SKIP LOCKED:
// a send or receive holding one is using it) and checked for messages again
// by a second statement, whose snapshot is taken after the locks are held:
// a send that added a message to a group held the row's lock until its
// commit, so that snapshot sees the message. Whoever adds a message later
// locks the row with an upsert that re-creates it (lockGroupsSQL).
func (b *Backend) pruneGroups(ctx context.Context) (int64, error) {
	var n int64
	err := retry(func() error {
		return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `SELECT queue_id, group_id FROM groups g
				WHERE NOT EXISTS (SELECT 1 FROM messages m
					WHERE m.queue_id = g.queue_id AND m.group_id = g.group_id AND m.seq IS NOT NULL)
				LIMIT $1 FOR UPDATE SKIP LOCKED`, sweepBudget)
			if err != nil {
				return err
			}
			var qids []int64
			var gids []string
			var qid int64
			var gid string
			if _, err := pgx.ForEachRow(rows, []any{&qid, &gid}, func() error {
				qids, gids = append(qids, qid), append(gids, gid)
				return nil
			}); err != nil {
				return err
			}
			if len(qids) == 0 {
				n = 0
				return nil
			}
			tag, err := tx.Exec(ctx, `DELETE FROM groups g USING unnest($1::bigint[], $2::text[]) c (queue_id, group_id)
				WHERE g.queue_id = c.queue_id AND g.group_id = c.group_id
					AND NOT EXISTS (SELECT 1 FROM messages m
						WHERE m.queue_id = g.queue_id AND m.group_id = g.group_id AND m.seq IS NOT NULL)`, qids, gids)
			n = tag.RowsAffected()
			return err
		})
	})
	if err != nil {
		return 0, dbErr("prune FIFO groups", err)
	}
	return n, nil
}

// reclaimBudget bounds the messages of deleted queues and purges one reclaim step deletes.
const reclaimBudget = 5000

// reclaim deletes a batch of the messages of deleted queues and of purged
// message spaces (the old mids recorded by PurgeQueue); a deleted queue
// left with none loses its counters, fair-queue cursors, FIFO state, limits row and ended move tasks (an
// active one is failed by its next step, and pruned by a later start on a
// queue of the same name) and is marked reclaimed; a purged mid left with
// none loses its counters, cursors and FIFO state and its purged row. Both wait a
// minute after the deletion or purge, so that a send that read the old mid
// just before cannot leave a message behind unseen. It reports whether it
// deleted any message.
func (b *Backend) reclaim(ctx context.Context) (bool, error) {
	var n, done int64
	err := b.pool.QueryRow(ctx, `
		WITH q AS (SELECT mid AS id, id AS qid, deleted_at FROM queues WHERE deleted AND NOT reclaimed
			UNION ALL SELECT mid, NULL, purged_at FROM purged),
		d AS (DELETE FROM messages WHERE id IN (
			SELECT m.id FROM q CROSS JOIN LATERAL (
				SELECT id FROM messages WHERE queue_id = q.id LIMIT $2 FOR UPDATE SKIP LOCKED) m
			LIMIT $2) RETURNING queue_id),
		empty AS (SELECT id, qid FROM q WHERE deleted_at < `+nowSQL+` - interval '1 minute'
			AND NOT EXISTS (SELECT 1 FROM messages WHERE queue_id = q.id)),
		c AS (DELETE FROM counts WHERE queue_id IN (SELECT id FROM empty)),
		cu AS (DELETE FROM cursors WHERE queue_id IN (SELECT id FROM empty)),
		g AS (DELETE FROM groups WHERE queue_id IN (SELECT id FROM empty)),
		x AS (DELETE FROM dedup WHERE queue_id IN (SELECT id FROM empty)),
		a AS (DELETE FROM attempts WHERE queue_id IN (SELECT id FROM empty)),
		l AS (DELETE FROM queue_limits WHERE queue_id IN (SELECT qid FROM empty)),
		rc AS (DELETE FROM message_records WHERE queue_id IN (SELECT qid FROM empty)),
		mt AS (DELETE FROM move_tasks WHERE source_id IN (SELECT qid FROM empty) AND NOT `+activeSQL+`),
		p AS (DELETE FROM purged WHERE mid IN (SELECT id FROM empty WHERE qid IS NULL) RETURNING mid),
		r AS (UPDATE queues SET reclaimed = true WHERE id IN (SELECT qid FROM empty) RETURNING id)
		SELECT (SELECT count(*) FROM d), (SELECT count(*) FROM r) + (SELECT count(*) FROM p)`, b.tnow(), reclaimBudget).Scan(&n, &done)
	if err != nil {
		return false, dbErr("reclaim deleted queues", err)
	}
	if n > 0 || done > 0 {
		b.log.Debug("reclaimed deleted queues", "messages", n, "queues", done)
	}
	return n > 0, nil
}
