package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
)

// FIFO queues.
//
// # Where the state lives (all in PostgreSQL, see migration 2)
//
//   - Order: messages.seq, from the sequence fifo_seq. A sequence hands out
//     numbers at call time, not commit time, so two sends of one group could
//     commit out of order; a send therefore locks its groups' rows first
//     (groups table, in name order) and takes its numbers under those locks:
//     within a group, sequence order is commit order.
//   - Group lock: derived, never stored. A group is locked while one of its
//     messages is in flight ('i'). Since a receive takes at most 10
//     consecutive messages from a group's head, and only from an unlocked
//     group, in-flight messages are always among a group's first 10: the
//     check reads at most 10 index entries. A lease keeps its deadline in
//     the row, so the lock survives restarts and broker crashes.
//   - Receiving locks group rows, not message rows: the candidate groups
//     (head ready, not locked, oldest head first) are locked with FOR UPDATE
//     SKIP LOCKED, so brokers serve different groups in parallel and never
//     interleave within one (a claim that finds every receivable group
//     locked waits for the oldest one's lock instead: see claimFifo). That statement sees the groups as of its start,
//     not as of its row locks, so each locked group's head is read again by
//     a later statement (fifoGroupRun) and skipped if any of its messages is
//     in flight. The messages are then claimed by claimSQL.
//   - Dedup window: table dedup, one row per DedupKey with its expiry; a send
//     upserts it and only overwrites an expired row, so of two concurrent
//     sends of one key exactly one stores a message.
//   - Receive-attempt cache: table attempts (items: key, lease, receipt of
//     each message returned); messages.attempt names the attempt that returned
//     a message under its current lease, so a delete or visibility change
//     invalidates it.
//
// Expired dedup and attempt rows are deleted by the sweeper; lookups check
// the expiry, so a late sweep changes nothing. The sweeper also deletes the
// group rows of groups without messages (pruneGroups), so that receives,
// which read every group row of their queue, cost what the groups with
// messages cost; whoever adds a message to a group locks its row with
// lockGroupsSQL (or its upsert in claimSQL), which re-creates a pruned row.

// attemptItem is one message returned by a cached receive attempt.
type attemptItem struct {
	Key     int64  `json:"k"`
	Lease   int64  `json:"l"`
	Receipt string `json:"r"`
}

// sendFifo stores the valid entries of a FIFO send in one transaction
// (results holds the plans' errors; it is completed here).
func (s sendOn) sendFifo(ctx context.Context, q queueRow, entries []model.SendEntry, plans []plan.SendPlan, results []model.SendResult) error {
	var groups []string
	for i := range entries {
		if results[i].Err == nil {
			groups = append(groups, entries[i].GroupID)
		}
	}
	slices.Sort(groups)
	groups = slices.Compact(groups)
	if len(groups) == 0 {
		return nil
	}
	state := rowReady
	if q.cfg.Delay > 0 {
		state = rowDelayed
	}
	// In a caller's transaction (SendTx) BeginFunc makes a savepoint, which
	// a failure rolls back: the caller's transaction stays usable.
	return s.run(func() error {
		return pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, lockGroupsSQL, q.mid, groups); err != nil {
				return err
			}
			var stored int64
			for i := range entries {
				if results[i].Err != nil {
					continue
				}
				e, p := &entries[i], &plans[i]
				dedupID, key, mid := p.DedupID, []byte(p.DedupKey), p.MessageID
				// The upsert overwrites only an expired entry; no row back
				// means a duplicate within the window.
				var seq int64
				err := tx.QueryRow(ctx, `
					WITH d AS (
						INSERT INTO dedup AS x (queue_id, key, message_id, seq, expires_at)
						VALUES ($2, $3, $4, nextval('fifo_seq'), `+nowSQL+` + $5 * interval '1 microsecond')
						ON CONFLICT (queue_id, key) DO UPDATE SET message_id = excluded.message_id,
							seq = excluded.seq, expires_at = excluded.expires_at
						WHERE x.expires_at <= `+nowSQL+`
						RETURNING seq),
					m AS (
						INSERT INTO messages (queue_id, state, visible_at, sent_at, priority, seq, message_id,
							group_id, dedup_id, sender_id, attrs, body, max_attempts, expires_at)
						SELECT $2, $6::"char", `+nowSQL+` + $7 * interval '1 microsecond', `+nowSQL+`, $8, d.seq, $4,
							$9, $10, $11, $12, $13, $14,
							CASE WHEN $15::bigint > 0 THEN `+nowSQL+` + $15 * interval '1 microsecond' END FROM d)
					SELECT seq FROM d`, s.now, q.mid, key, mid, micros(q.cfg.DedupWindowOf()), state,
					micros(q.cfg.Delay), p.Priority, e.GroupID, dedupID, e.SenderID, encodeAttrs(e), e.Body, p.MaxAttempts,
					micros(p.TTL)).Scan(&seq)
				if errors.Is(err, pgx.ErrNoRows) {
					// A duplicate: the original's id and sequence number.
					err = tx.QueryRow(ctx, `SELECT message_id::text, seq FROM dedup WHERE queue_id = $1 AND key = $2`,
						q.mid, key).Scan(&mid, &seq)
					if err != nil {
						return err
					}
				} else if err != nil {
					return err
				} else {
					stored++
				}
				results[i].MessageID = mid
				results[i].SequenceNumber = model.FormatSequenceNumber(uint64(seq))
			}
			if stored == 0 {
				return nil
			}
			if state == rowDelayed {
				return addCounts(ctx, tx, q.mid, s.shard(), 0, 0, stored)
			}
			return addCounts(ctx, tx, q.mid, s.shard(), stored, 0, 0)
		})
	})
}

// lockGroupsSQL locks the group rows $2 (sorted) of queue $1, creating the
// missing ones, in one statement. An upsert, not an insert that ignores
// conflicts followed by SELECT ... FOR UPDATE: the sweeper deletes empty
// group rows, and a row deleted between those two statements would leave
// the send without its group lock. ON CONFLICT DO UPDATE locks the existing
// row (WHERE false: without writing a new version of it) and, when that row
// is deleted concurrently, inserts it again.
const lockGroupsSQL = `INSERT INTO groups (queue_id, group_id)
	SELECT $1, g FROM unnest($2::text[]) g ORDER BY g
	ON CONFLICT (queue_id, group_id) DO UPDATE SET group_id = excluded.group_id WHERE false`

// fifoCandidatesSQL locks up to $2 receivable groups of queue $1 (head
// ready, no message in flight among the first 10), oldest head first,
// skipping groups another receive holds.
const fifoCandidatesSQL = fifoCandidatesWaitSQL + ` SKIP LOCKED`

// fifoCandidatesWaitSQL is fifoCandidatesSQL waiting for the locks instead
// of skipping the locked groups; claimFifo runs it with $2 = 1 only (see
// there).
const fifoCandidatesWaitSQL = `
SELECT g.group_id FROM groups g
CROSS JOIN LATERAL (
	SELECT seq, state FROM messages m
	WHERE m.queue_id = g.queue_id AND m.group_id = g.group_id AND m.seq IS NOT NULL
	ORDER BY seq LIMIT 1) h
WHERE g.queue_id = $1 AND h.state = 'r'
	AND NOT EXISTS (
		SELECT 1 FROM (
			SELECT state FROM messages m
			WHERE m.queue_id = g.queue_id AND m.group_id = g.group_id AND m.seq IS NOT NULL
			ORDER BY seq LIMIT 10) f
		WHERE f.state = 'i')
ORDER BY h.seq LIMIT $2
FOR UPDATE OF g`

// fifoHeadSQL reads the first 10 messages of group $2 of queue $3, in
// sequence order, with whether each is past its time to live at $1 (nowSQL).
// In-flight messages are always among them (see "Group lock" above), so
// they show whether the group is locked.
const fifoHeadSQL = `SELECT id, state::text, coalesce(attempts, receive_count), max_attempts,
		coalesce(expires_at <= ` + nowSQL + `, false) FROM messages
	WHERE queue_id = $3 AND group_id = $2 AND seq IS NOT NULL ORDER BY seq LIMIT 10`

// fifoGroupRun returns the ids of up to max consecutive ready messages at the
// head of group g of queue qid, or none when a message of the group is in
// flight (the group is locked) or its head is not ready (delayed: a message
// backing off after a failure, or snoozed, keeps holding its group); moves
// tells whether one of them used its attempts, or is past its time to live
// on a queue that dead-letters its expired messages (the claim moves it to
// the dead-letter queue, claimTo.deadLetters, claimTo.expiredDL). The caller
// holds the group's row lock, so no claim can
// lease a message of the group after this statement's snapshot: what it
// sees in flight stays locked, and what it sees ready can only be deleted
// (or moved) before the claim. now is the statement's instant (tnow).
func fifoGroupRun(ctx context.Context, tx pgx.Tx, now any, qid int64, g string, max int, to claimTo) (run []int64, moves bool, err error) {
	rows, err := tx.Query(ctx, fifoHeadSQL, now, g, qid)
	if err != nil {
		return nil, false, err
	}
	var id int64
	var attempts, maxAttempts int
	var state rowState
	var expired bool
	ended, locked := false, false
	_, err = pgx.ForEachRow(rows, []any{&id, &state, &attempts, &maxAttempts, &expired}, func() error {
		switch {
		case state == rowInFlight:
			locked = true
		case state != rowReady:
			ended = true
		case !ended && len(run) < max:
			run = append(run, id)
			moves = moves || (expired && to.expiredDL) || (!expired && to.deadLetters(attempts, maxAttempts))
		default:
			ended = true
		}
		return nil
	})
	if err != nil || locked {
		return nil, false, err
	}
	return run, moves, nil
}

// claimFifo leases up to want messages of FIFO queue q in one transaction: it
// locks receivable groups, takes from each, oldest head first, the run of
// consecutive ready messages at its head (as many of one group as possible,
// then the next group), and claims them with claimSQL. With attemptID set, a
// non-empty result is recorded in the receive-attempt cache in the same
// transaction. With lc (a queue with limits), the transaction first locks
// the queue's limits row and plans the room (lockLimits), which bounds
// want, and stores the rate's instant after the claim (storeRate).
func (b *Backend) claimFifo(ctx context.Context, q queueRow, want int, lc *limitedClaim, vis time.Duration, attemptID string) ([]model.Delivery, []movedLetter, int, error) {
	to, err := b.claimTarget(ctx, b.pool, q)
	if err != nil {
		return nil, nil, 0, err
	}
	for waited := false; ; waited = true {
		out, moved, dropped, blocked, err := b.claimFifoOnce(ctx, q, want, lc, vis, attemptID, to, !waited)
		if err != nil || !blocked {
			return out, moved, dropped, err
		}
		// A limited claim found every receivable group locked (or none
		// receivable): wait for the oldest receivable one's lock here,
		// outside the claim's transaction and so without the queue's
		// limits row (the statement is its own transaction: the lock goes
		// as soon as it is taken), then claim once more if there was one.
		rows, err := b.pool.Query(ctx, fifoCandidatesWaitSQL, q.mid, 1)
		if err != nil {
			return nil, nil, 0, dbErr("receive", err)
		}
		groups, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, nil, 0, dbErr("receive", err)
		}
		if len(groups) == 0 {
			return nil, nil, 0, nil
		}
	}
}

// claimFifoOnce is one transaction of claimFifo, which has read to. When
// every receivable group is locked, an unlimited claim (lc nil) waits for
// the oldest one's lock in the transaction; a limited one, holding its
// queue's limits row, claims nothing and reports blocked when mayWait, for
// claimFifo to wait outside the transaction (a limits row held while
// waiting would hold every receive of the queue, on every broker, behind a
// group that an application's open SendTx may lock until it commits).
func (b *Backend) claimFifoOnce(ctx context.Context, q queueRow, want int, lc *limitedClaim, vis time.Duration, attemptID string, to claimTo, mayWait bool) (out []model.Delivery, moved []movedLetter, dropped int, blocked bool, err error) {
	err = retry(func() error {
		out, moved, dropped, blocked = nil, nil, 0, false
		return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			n := want
			if lc != nil {
				// The queue's limits: its limits row first (before any
				// group lock), then at most the room (limits.go).
				if err := b.lockLimits(ctx, tx, q, lc); err != nil || lc.room.N == 0 {
					return err
				}
				n = lc.room.N
			}
			rows, err := tx.Query(ctx, fifoCandidatesSQL, q.mid, n)
			if err != nil {
				return err
			}
			groups, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			if len(groups) == 0 && lc != nil {
				// Every receivable group (if any) was locked: not here,
				// under the limits row (see claimFifoOnce).
				blocked = mayWait
				return nil
			}
			if len(groups) == 0 {
				// Every receivable group (if any) was locked. Not only
				// receives lock group rows: a send to the group, the
				// sweeper's dead-letter move into it (moveToDLQ) or its
				// pruneGroups (whose snapshot may predate the group's new
				// message) hold one briefly, and skipping would have a
				// short poll of an idle queue miss a ready message. So
				// the claim waits for the oldest receivable group's lock.
				// No deadlock: the transaction holds no group lock yet
				// and takes at most one (LIMIT 1; group rows are never
				// updated, only locked, inserted and deleted, so a row
				// waited for is either locked as is or skipped as
				// deleted). Every holder is a short transaction; a group
				// that another receive held is in flight by then, which
				// fifoGroupRun sees.
				if rows, err = tx.Query(ctx, fifoCandidatesWaitSQL, q.mid, 1); err != nil {
					return err
				}
				if groups, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
					return err
				}
			}
			if b.afterFifoCandidates != nil {
				b.afterFifoCandidates(groups)
			}
			// The candidates statement saw the groups as of its start: a
			// claim of another broker may have leased a batch of one of
			// them and committed before the row lock was taken. Each
			// group is read again under its lock (a new snapshot, taken
			// after every claim that held the lock committed) and
			// skipped if any of its messages is in flight.
			var ids []int64
			var dlqGroups []string // groups with a message to move to a FIFO DLQ
			for _, g := range groups {
				if len(ids) >= n {
					break
				}
				run, moves, err := fifoGroupRun(ctx, tx, b.tnow(), q.mid, g, n-len(ids), to)
				if err != nil {
					return err
				}
				ids = append(ids, run...)
				if moves && to.dlq.cfg.Fifo {
					dlqGroups = append(dlqGroups, g)
				}
			}
			if len(ids) == 0 {
				return nil
			}
			// A message moved to a FIFO dead-letter queue takes a new
			// sequence number there; like a send, the claim locks the
			// dead-letter queue's group rows before taking it, so that
			// within a group sequence order stays commit order (claimSQL's
			// own upsert of them comes after its nextval).
			if len(dlqGroups) > 0 {
				slices.Sort(dlqGroups)
				if _, err := tx.Exec(ctx, lockGroupsSQL, to.dlq.mid, dlqGroups); err != nil {
					return err
				}
			}
			now := b.tnow()
			if lc != nil {
				now = lc.now // read under the limits row (lockLimits)
			}
			if out, moved, dropped, err = b.claim(ctx, tx, q, to, now, len(ids), vis, ids, attemptID); err != nil {
				return err
			}
			if lc != nil {
				if err := b.storeRate(ctx, tx, q, lc, len(out)); err != nil {
					return err
				}
			}
			if attemptID == "" || len(out) == 0 {
				return nil
			}
			items := make([]attemptItem, len(out))
			for i, d := range out {
				r, _ := b.receipts.Decode(d.Receipt)
				items[i] = attemptItem{Key: int64(r.Key), Lease: int64(r.Lease), Receipt: d.Receipt}
			}
			ij, _ := json.Marshal(items)
			_, err = tx.Exec(ctx, `INSERT INTO attempts AS a (queue_id, attempt_id, expires_at, items)
				VALUES ($2, $3, `+nowSQL+` + $4 * interval '1 microsecond', $5)
				ON CONFLICT (queue_id, attempt_id) DO UPDATE SET expires_at = excluded.expires_at,
					items = excluded.items, invalid = false`,
				now, q.mid, attemptID, micros(model.AttemptWindow), ij)
			return err
		})
	})
	if err != nil {
		return nil, nil, 0, false, dbErr("receive", err)
	}
	return out, moved, dropped, blocked, nil
}

// replayAttempt answers a FIFO receive whose attempt id is in the cache:
// the same messages and receipt handles, if each is still under the lease
// that receive gave it (and none was deleted or had its visibility changed);
// AttemptNotRetryableError otherwise. ok is false when the id is unknown or
// expired: the receive then proceeds as a new one.
func (b *Backend) replayAttempt(ctx context.Context, q queueRow, attemptID string) (ds []model.Delivery, ok bool, err error) {
	var invalid bool
	var ij []byte
	err = b.pool.QueryRow(ctx, `SELECT invalid, items FROM attempts
		WHERE queue_id = $2 AND attempt_id = $3 AND expires_at > `+nowSQL, b.tnow(), q.mid, attemptID).Scan(&invalid, &ij)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, dbErr("read receive attempt", err)
	}
	if invalid {
		return nil, true, model.AttemptNotRetryableError(attemptID)
	}
	var items []attemptItem
	if err := json.Unmarshal(ij, &items); err != nil {
		return nil, true, dbErr("read receive attempt", err)
	}
	for _, it := range items {
		row := b.pool.QueryRow(ctx, `SELECT `+msgCols("m")+` FROM messages m
			WHERE id = $2 AND queue_id = $3 AND lease = $4 AND state = 'i' AND visible_at > `+nowSQL,
			b.tnow(), it.Key, q.mid, it.Lease)
		_, _, d, err := b.scanDelivery(row.Scan, nil, q)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, true, model.AttemptNotRetryableError(attemptID)
		}
		if err != nil {
			return nil, true, dbErr("replay receive attempt", err)
		}
		d.Receipt = it.Receipt
		ds = append(ds, d)
	}
	return ds, true, nil
}
