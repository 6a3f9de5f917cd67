package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicemq/sluice/broker"
)

// storedAttrs is the attrs column: the user and system message attributes.
type storedAttrs struct {
	A map[string]broker.MessageAttribute `json:"a,omitempty"`
	S map[string]broker.MessageAttribute `json:"s,omitempty"`
}

func encodeAttrs(e *broker.SendEntry) []byte {
	if len(e.Attributes) == 0 && len(e.SystemAttributes) == 0 {
		return nil
	}
	b, _ := json.Marshal(storedAttrs{A: e.Attributes, S: e.SystemAttributes})
	return b
}

// Send implements broker.Backend: one INSERT of the valid entries whose CTE
// also adds them to a counter shard, in one autocommit statement (FIFO: one
// transaction, sendFifo).
func (b *Backend) Send(ctx context.Context, queueName broker.QueueRef, entries []broker.SendEntry) ([]broker.SendResult, error) {
	if err := b.enter(ctx); err != nil {
		return nil, err
	}
	defer b.life.Done()
	s := sendOn{db: b.pool, now: b.tnow(), run: retry}
	results, q, delay, err := s.send(ctx, queueName, entries)
	if err != nil || delay < 0 {
		return results, err
	}
	b.changed(q.id, b.clock.Now().Add(delay), false)
	b.noteExpiry(q)
	return results, nil
}

// sendDB is what a send runs on: the backend's pool, or a caller's
// transaction (SendTx).
type sendDB interface {
	querier
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Begin(ctx context.Context) (pgx.Tx, error)
}

// sendOn is where and how one send runs: the one implementation of a send,
// for Backend.Send (on the pool) and SendTx (in a caller's transaction).
type sendOn struct {
	db sendDB
	// now is the $1 of every statement (see Backend.tnow).
	now any
	// run runs a statement (or a transaction) that may be run again after a
	// deadlock: retry on the pool; once in a caller's transaction, which a
	// failed statement aborts.
	run func(func() error) error
	// share reads the queue row FOR SHARE, so that the queue is not purged,
	// deleted or changed until the transaction ends (SendTx: see there).
	share bool
	// whole makes the send all or nothing: an entry that fails (its plan's
	// error) fails the call, and nothing is stored.
	whole bool
}

// send stores entries into queue ref. It returns the results, the queue,
// and the delay after which the first stored message becomes ready (-1:
// nothing stored), for the caller's wake-ups.
func (s sendOn) send(ctx context.Context, ref broker.QueueRef, entries []broker.SendEntry) ([]broker.SendResult, queueRow, time.Duration, error) {
	q, err := readQueue(ctx, s.db, ref, s.share)
	if err != nil {
		return nil, q, -1, err
	}
	var depth int64
	if q.cfg.MaxDepth > 0 || q.cfg.LowPriorityMaxDepth > 0 {
		// The depth as of this read: concurrent sends (on any broker) read
		// the same one, so the limit may be passed by the batches in flight
		// at once (docs/postgres.md).
		if depth, err = readDepth(ctx, s.db, q.mid); err != nil {
			return nil, q, -1, err
		}
	}
	plans, err := broker.PlanSend(q.cfg, ref.Name, depth, entries)
	if err != nil {
		return nil, q, -1, err
	}
	results := make([]broker.SendResult, len(entries))
	for i := range entries {
		results[i].ID, results[i].Err, results[i].MessageID = entries[i].ID, plans[i].Err, plans[i].MessageID
		if s.whole && plans[i].Err != nil {
			if len(entries) == 1 {
				return nil, q, -1, plans[i].Err
			}
			return nil, q, -1, fmt.Errorf("messages[%d]: %w", i, plans[i].Err)
		}
	}
	if q.cfg.Fifo {
		if err := s.sendFifo(ctx, q, entries, plans, results); err != nil {
			return nil, q, -1, dbErr("send", err)
		}
		return results, q, q.cfg.Delay, nil
	}

	args := []any{s.now, q.mid, shard()}
	var values []string
	var turns sendTurns
	minDelay := time.Duration(-1)
	for i := range entries {
		e := &entries[i]
		if plans[i].Err != nil {
			continue
		}
		delay := plans[i].Delay
		if minDelay < 0 || delay < minDelay {
			minDelay = delay
		}
		slot, nth := turns.add(e.GroupID, plans[i].Priority)
		n := len(args)
		// (delay µs, priority, message id, sender, attrs, body, group, max
		// attempts, tenant slot, n-th of its tenant and level)
		values = append(values, fmt.Sprintf("($%d::bigint, $%d::smallint, $%d::uuid, $%d::text, $%d::bytea, $%d::text, $%d::text, $%d::integer, %d, %d)",
			n+1, n+2, n+3, n+4, n+5, n+6, n+7, n+8, slot, nth))
		var group any
		if e.GroupID != "" {
			group = e.GroupID
		}
		args = append(args, micros(delay), plans[i].Priority, results[i].MessageID, e.SenderID, encodeAttrs(e), e.Body, group, plans[i].MaxAttempts)
	}
	if len(values) == 0 {
		return results, q, -1, nil
	}
	// Each message takes its fair-queue turn (fair.go): the n-th message of
	// a tenant and level in this batch takes max(last[p][T], cursor[p]) + n.
	turn := turns.sql("$2::bigint", "v", &args)
	sql := `WITH v (delay, priority, message_id, sender_id, attrs, body, group_id, max_attempts, slot, n) AS (VALUES ` + strings.Join(values, ", ") + `),
		ins AS (
			INSERT INTO messages (queue_id, state, visible_at, sent_at, priority, message_id, sender_id, attrs, body, group_id, max_attempts, turn)
			SELECT $2, CASE WHEN delay > 0 THEN 'd' ELSE 'r' END::"char",
				` + nowSQL + ` + delay * interval '1 microsecond', ` + nowSQL + `,
				priority, message_id, sender_id, attrs, body, group_id, max_attempts, ` + turn + `
			FROM v RETURNING state)
		INSERT INTO counts AS c (queue_id, shard, ready, delayed)
		SELECT $2, $3, count(*) FILTER (WHERE state = 'r'), count(*) FILTER (WHERE state = 'd') FROM ins
		ON CONFLICT (queue_id, shard) DO UPDATE SET ready = c.ready + excluded.ready, delayed = c.delayed + excluded.delayed`
	if err := s.run(func() error { _, err := s.db.Exec(ctx, sql, args...); return err }); err != nil {
		return nil, q, -1, dbErr("send", err)
	}
	return results, q, minDelay, nil
}

// leaseOf resolves a receipt of queue qid to the message row id and lease
// version it names, or the outcome when it can name no lease of the queue:
// LeaseOtherQueue for another queue's receipt, LeaseStale for one no row can
// match (lease 0, or numbers past bigint).
func leaseOf(qid int64, r broker.Receipt) (key, lease int64, o broker.LeaseOutcome, ok bool) {
	switch {
	case r.QueueID != uint64(qid):
		return 0, 0, broker.LeaseOtherQueue, false
	case r.Lease == 0 || r.Key >= 1<<63 || r.Lease >= 1<<63:
		return 0, 0, broker.LeaseStale, false
	}
	return int64(r.Key), int64(r.Lease), broker.LeaseApplied, true
}

// Delete implements broker.Backend: one DELETE of the rows whose lease
// version matches the receipts (a stale receipt matches nothing),
// subtracting them from the counters.
func (b *Backend) Delete(ctx context.Context, queueName broker.QueueRef, receipts []broker.Receipt) ([]broker.LeaseOutcome, error) {
	if err := b.enter(ctx); err != nil {
		return nil, err
	}
	defer b.life.Done()
	q, err := b.getQueue(ctx, b.pool, queueName)
	if err != nil {
		return nil, err
	}
	out := make([]broker.LeaseOutcome, len(receipts))
	var keys, leases []int64
	var at []int // index in receipts of each key
	for i, r := range receipts {
		key, lease, o, ok := leaseOf(q.id, r)
		out[i] = o
		if ok {
			keys, leases, at = append(keys, key), append(leases, lease), append(at, i)
		}
	}
	if len(keys) == 0 {
		return out, nil
	}
	// On a FIFO queue only a live lease deletes: an expired one has lost its
	// group lock ($5). A message backing off or snoozed ('d') is not under
	// the receipt's lease any more: stale. On a standard queue with a policy
	// ($7) an ended lease is not deleted by this statement: it is planned
	// first (broker.PlanLeaseExpiry; below), since its message may be
	// backing off or dead-lettered by now. Deleting a leased message
	// invalidates the receive attempt that returned it.
	sql := `WITH r (id, lease) AS (SELECT * FROM unnest($3::bigint[], $4::bigint[]) ORDER BY 1),
		d AS (DELETE FROM messages m USING r WHERE m.id = r.id AND m.queue_id = $2 AND m.lease = r.lease
			AND m.state <> 'd' AND (NOT $5 OR (m.state = 'i' AND m.visible_at > ` + nowSQL + `))
			AND NOT ($7 AND m.state = 'i' AND m.visible_at <= ` + nowSQL + `)
			RETURNING m.id, m.state, m.attempt),
		inv AS (UPDATE attempts SET invalid = true
			WHERE queue_id = $2 AND attempt_id IN (SELECT attempt FROM d WHERE attempt IS NOT NULL)),
		cnt AS (` + countsFromStates("d", "$2", "$6") + `)
		SELECT id FROM d`
	policy := hasPolicy(q.cfg)
	del := func(keys, leases []int64) ([]int64, error) {
		var gone []int64
		err := retry(func() error {
			rows, err := b.pool.Query(ctx, sql, b.tnow(), q.mid, keys, leases, q.cfg.Fifo, shard(), policy && !q.cfg.Fifo)
			if err != nil {
				return err
			}
			gone, err = pgx.CollectRows(rows, pgx.RowTo[int64])
			return err
		})
		if err != nil {
			return nil, dbErr("delete", err)
		}
		return gone, nil
	}
	gone, err := del(keys, leases)
	if err != nil {
		return nil, err
	}
	if policy && len(gone) < len(keys) {
		// Some receipts may name ended leases: plan them (as a receive
		// would), then delete what is still deletable.
		moved, err := b.promote(ctx, q)
		if err != nil {
			return nil, err
		}
		b.deadLettered(ctx, q, moved)
		if !q.cfg.Fifo {
			var rk, rl []int64
			for j, key := range keys {
				if !slices.Contains(gone, key) {
					rk, rl = append(rk, key), append(rl, leases[j])
				}
			}
			more, err := del(rk, rl)
			if err != nil {
				return nil, err
			}
			gone = append(gone, more...)
		}
	}
	for j, key := range keys {
		if !slices.Contains(gone, key) {
			out[at[j]] = broker.LeaseStale
		}
	}
	if q.cfg.Fifo && len(gone) < len(keys) {
		// Receipts that deleted nothing but are the latest lease of their
		// message: the lease ended (a FIFO delete needs a live one). Matched
		// by (id, lease): an older receipt of the same message is stale.
		type lease struct{ ID, Lease int64 }
		var ended []lease
		err := retry(func() error {
			rows, err := b.pool.Query(ctx, `SELECT DISTINCT m.id, m.lease FROM messages m
				JOIN unnest($2::bigint[], $3::bigint[]) r (id, lease) ON m.id = r.id AND m.lease = r.lease
				WHERE m.queue_id = $1 AND m.state <> 'd'`, q.mid, keys, leases)
			if err != nil {
				return err
			}
			ended, err = pgx.CollectRows(rows, pgx.RowToStructByPos[lease])
			return err
		})
		if err != nil {
			return nil, dbErr("delete", err)
		}
		for j := range keys {
			if slices.Contains(ended, lease{keys[j], leases[j]}) {
				out[at[j]] = broker.LeaseEnded
			}
		}
	}
	if q.cfg.Fifo && len(gone) > 0 {
		b.changed(q.id, time.Time{}, false) // group locks may have ended
	}
	return out, nil
}

// readDepth is queue mid's depth (broker.QueueStats.Depth): the sum of its
// counters, every stored message whatever its state.
func readDepth(ctx context.Context, db querier, mid int64) (int64, error) {
	var d int64
	if err := db.QueryRow(ctx, `SELECT coalesce(sum(ready + inflight + delayed), 0) FROM counts WHERE queue_id = $1`, mid).Scan(&d); err != nil {
		return 0, dbErr("read depth", err)
	}
	return d, nil
}

// addCounts adds deltas to one counter shard of queue qid (last in its
// transaction: see the package comment).
func addCounts(ctx context.Context, tx pgx.Tx, qid, ready, inflight, delayed int64) error {
	_, err := tx.Exec(ctx, `INSERT INTO counts AS c (queue_id, shard, ready, inflight, delayed) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (queue_id, shard) DO UPDATE SET ready = c.ready + excluded.ready,
			inflight = c.inflight + excluded.inflight, delayed = c.delayed + excluded.delayed`,
		qid, shard(), ready, inflight, delayed)
	return err
}

// promoteLimit bounds the messages one promotion moves (it runs again on the
// next receive or GetQueue).
const promoteLimit = 10000

// promote makes queue q's delayed and in-flight messages whose visible_at
// has passed ready, in one statement that also moves them between counters;
// an in-flight message so promoted failed by its lease's end (reason
// broker.ReasonLeaseExpired; broker.PlanLeaseExpiry's FateVisible). On a
// queue with a RetryPolicy or RedrivePolicy that statement promotes only
// the delayed messages, and the ended leases are planned one by one
// (expireLeases). Rows locked by another transaction are skipped (it is
// changing them). It returns the messages moved to the dead-letter queue.
func (b *Backend) promote(ctx context.Context, q queueRow) ([]movedLetter, error) {
	policy := hasPolicy(q.cfg)
	err := retry(func() error {
		_, err := b.pool.Exec(ctx, `
		WITH due AS (
			SELECT id, state FROM messages
			WHERE queue_id = $2 AND state <> 'r' AND visible_at <= `+nowSQL+` AND (NOT $5 OR state = 'd')
			ORDER BY visible_at LIMIT $4 FOR UPDATE SKIP LOCKED),
		up AS (UPDATE messages m SET state = 'r', reason = CASE WHEN due.state = 'i' THEN $6 ELSE m.reason END
			FROM due WHERE m.id = due.id RETURNING due.state AS old)
		INSERT INTO counts AS c (queue_id, shard, ready, inflight, delayed)
		SELECT $2, $3, count(*), -count(*) FILTER (WHERE old = 'i'), -count(*) FILTER (WHERE old = 'd')
		FROM up HAVING count(*) > 0
		ON CONFLICT (queue_id, shard) DO UPDATE SET ready = c.ready + excluded.ready,
			inflight = c.inflight + excluded.inflight, delayed = c.delayed + excluded.delayed`,
			b.tnow(), q.mid, shard(), promoteLimit, policy, broker.ReasonLeaseExpired)
		return err
	})
	if err != nil {
		return nil, dbErr("promote", err)
	}
	if !policy {
		return nil, nil
	}
	moved, _, err := b.expireLeases(ctx, q)
	return moved, err
}
