package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker/model"
)

// Time to live (model/config_ttl.go) in the PostgreSQL backend.
//
//   - A message's expiry is messages.expires_at (migration 14), the send's
//     instant plus its time to live (plan.SendPlan.TTL); NULL when it has
//     none. A move to another queue (a dead letter, a move task) leaves it
//     behind (NULL).
//   - A claim never leases an expired row: claimSQL drops it or moves it
//     to the dead-letter queue with the reason "expired" instead.
//   - A lease that ends, or changes, after the expiry is planned as an
//     expiry (plan.LeaseExpiry, plan.LeaseChange: FateExpired;
//     leaseApply.expire). A lease that is still live is left alone: its
//     holder may still delete it.
//   - The promotion of due delays and ended leases (promoteSQL) skips the
//     rows whose expiry has passed: expireDue removes them instead, with
//     the expired ready rows that no claim reached. look runs it when its
//     statement found such rows (after the planning of ended leases, whose
//     plans come first: a lease that ended before the expiry may have
//     dead-lettered its message), and so does the sweeper (sweepTTL), which
//     wakes at the next expiry (nextExpirySQL).

// expireDueSQL locks up to $3 rows of queue $2 whose expiry has passed and
// that no live lease holds (ready, delayed, or in flight under an ended
// lease), in expiry order through messages_expiry, skipping rows other
// transactions hold, and only rows of the FIFO groups $4 unless it is NULL;
// its columns are readLeaseSQL's.
const expireDueSQL = `SELECT id, state::text, false, visible_at, message_id::text,
		coalesce(attempts, receive_count), max_attempts, sent_at, seq, attempt, expires_at, ` + nowSQL + `
	FROM messages WHERE queue_id = $2 AND expires_at <= ` + nowSQL + ` AND (state <> 'i' OR visible_at <= ` + nowSQL + `)
		AND ($4::text[] IS NULL OR group_id = ANY($4::text[]))
	ORDER BY expires_at LIMIT $3 FOR UPDATE SKIP LOCKED`

// expireDueGroupsSQL is the FIFO groups of the rows expireDueSQL would
// lock (without $4), read without locking them, sorted.
const expireDueGroupsSQL = `SELECT DISTINCT group_id FROM (SELECT group_id FROM messages
		WHERE queue_id = $2 AND expires_at <= ` + nowSQL + ` AND (state <> 'i' OR visible_at <= ` + nowSQL + `)
		ORDER BY expires_at LIMIT $3) m
	WHERE group_id IS NOT NULL ORDER BY 1`

// ttlDueSQL is whether queue mid has rows for expireDue (expireDueSQL's
// condition), in a statement whose $1 is the instant. It reads
// messages_expiry up to the instant: one probe when no row has expired;
// else it reads the expired entries that live leases hold (at most the
// queue's messages in flight whose time to live passed) until it finds one
// that none holds.
func ttlDueSQL(mid string) string {
	return `EXISTS (SELECT 1 FROM messages WHERE queue_id = ` + mid + ` AND expires_at <= ` + nowSQL + `
		AND (state <> 'i' OR visible_at <= ` + nowSQL + `))`
}

// readExpiredDue is how many rows of queue mid expireDue would remove now
// (expireDueSQL's condition), counting up to expireBatch of them: a send
// refused for its queue's depth does not count them (the sweeper removes
// them at the next occasion, but they are gone already). at is the $1 of
// the statement (Backend.tnow).
//
// It reads queue mid's depth (as readDepth) in the same statement, so from
// the same snapshot: read apart, a sweep that removed expired messages
// between the two reads left them counted in the depth and not in the
// expired, and a send was refused for a depth the queue no longer had.
func readExpiredDue(ctx context.Context, db querier, at any, mid int64) (depth, due int64, err error) {
	if err := db.QueryRow(ctx, `SELECT
		(SELECT coalesce(sum(ready + inflight + delayed), 0) FROM counts WHERE queue_id = $2),
		(SELECT count(*) FROM (SELECT 1 FROM messages WHERE queue_id = $2
			AND expires_at <= `+nowSQL+` AND (state <> 'i' OR visible_at <= `+nowSQL+`) LIMIT $3) d)`,
		at, mid, expireBatch).Scan(&depth, &due); err != nil {
		return 0, 0, dbErr("read the depth and the expired messages", err)
	}
	return depth, due, nil
}

// expireDue removes up to expireBatch rows of queue q whose time to live
// passed (expireDueSQL) in one transaction: to its dead-letter queue with
// the reason "expired" when q dead-letters its expired messages and that
// queue exists, else deleted (leaseApply.expire). It returns the messages
// moved and whether more may be due (a full batch).
//
// Into a FIFO dead-letter queue the move locks that queue's group rows
// (moveToDLQ). A FIFO claim (claimFifo) locks them before the message rows
// it claims, so expireDue locks them first too: the groups of the rows it
// is about to lock, read without a lock (expireDueGroupsSQL), then only the
// rows of those groups. In the other order a claim and an expiry of one
// group could each wait for the other's lock until PostgreSQL broke the
// deadlock (after its deadlock_timeout; retry would run the loser again).
// The visibility changes and ended leases that dead-letter (leases.go) still
// lock message rows first, as before the time to live: they recover so.
func (b *Backend) expireDue(ctx context.Context, q queueRow) ([]movedLetter, bool, error) {
	var res leaseResult
	var full bool
	err := retry(func() error {
		res, full = leaseResult{}, false
		return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			var to claimTo
			if q.cfg.ExpiredToDeadLetter() {
				var err error
				if to, err = b.claimTarget(ctx, tx, q); err != nil {
					return err
				}
			}
			var groups []string // nil: every group (the rows lock no group row)
			if to.dlq != nil && to.dlq.cfg.Fifo {
				rows, err := tx.Query(ctx, expireDueGroupsSQL, b.tnow(), q.mid, expireBatch)
				if err != nil {
					return err
				}
				if groups, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
					return err
				}
				if len(groups) == 0 {
					return nil
				}
				if _, err := tx.Exec(ctx, lockGroupsSQL, to.dlq.mid, groups); err != nil {
					return err
				}
			}
			rows, err := tx.Query(ctx, expireDueSQL, b.tnow(), q.mid, expireBatch, groups)
			if err != nil {
				return err
			}
			due, now, err := scanLeases(rows)
			if err != nil {
				return err
			}
			if len(due) == 0 {
				return nil
			}
			full = len(due) == expireBatch
			var a leaseApply
			for _, r := range due {
				a.expire(r, r.facts.Attempts, to.dlq != nil, now)
			}
			if err := b.apply(ctx, tx, q, to, &a, now); err != nil {
				return err
			}
			for _, d := range a.dead {
				res.moved = append(res.moved, movedLetter{d.messageID, d.attempts, d.reason})
			}
			res.expired = a.expired
			return nil
		})
	})
	if err != nil {
		return nil, false, txErr("expire messages", err)
	}
	if res.expired > 0 && q.cfg.Fifo {
		b.changed(q.id, time.Time{}, false) // an expired head, or lease, freed its group
	}
	b.countExpired(q, res.expired)
	return res.moved, full, nil
}

// countExpired counts n messages of q expired (model.CountExpired), once
// their change is committed.
func (b *Backend) countExpired(q queueRow, n int) {
	if o := b.cfg.Observer; o != nil && n > 0 {
		o.Count(model.QueueRef{Account: q.account, Name: q.name}.String(), model.CountExpired, n)
	}
}

// expiredIn is how many of the moved messages moved for their time to live.
func expiredIn(moved []movedLetter) int {
	n := 0
	for _, m := range moved {
		if m.reason == model.ReasonExpired {
			n++
		}
	}
	return n
}

// sweepTTLQueues bounds the queues one sweep expires messages of.
const sweepTTLQueues = 100

// sweepTTL expires the messages whose time to live passed in the queues
// that have any (expireDue), after their due promotions and ended leases
// (promote), so that they go without waiting for a receive or GetQueue of
// their queue. It reports whether more is due.
func (b *Backend) sweepTTL(ctx context.Context) (bool, error) {
	rows, err := b.pool.Query(ctx, `SELECT `+queueCols+` FROM queues q
		WHERE NOT q.deleted AND `+ttlDueSQL("q.mid")+`
		ORDER BY q.id LIMIT $2`, b.tnow(), sweepTTLQueues)
	if err != nil {
		return false, dbErr("sweep expiries", err)
	}
	var queues []queueRow
	for rows.Next() {
		q, err := scanQueue(rows)
		if err != nil {
			rows.Close()
			return false, dbErr("sweep expiries", err)
		}
		queues = append(queues, q)
	}
	if err := rows.Err(); err != nil {
		return false, dbErr("sweep expiries", err)
	}
	more := len(queues) == sweepTTLQueues
	for _, q := range queues {
		moved, _, err := b.promote(ctx, q)
		if err != nil {
			return false, err
		}
		b.deadLettered(ctx, q, moved)
		moved, full, err := b.expireDue(ctx, q)
		if err != nil {
			return false, err
		}
		b.deadLettered(ctx, q, moved)
		more = more || full
	}
	return more, nil
}

// nextExpirySQL is the time, in µs from the statement's instant, until the
// sweeper runs next for expiries (NULL: no message has one; 0 or less: at
// once): the earliest, over the queues, of
//
//   - the next expiry after $2, the instant the sweep's sweepTTL started
//     from, held or not: a message not held then expires; one held then
//     keeps its lease, and is counted by the second term from then on. An
//     expiry between $2 and the instant passed while the sweep ran, maybe
//     after sweepTTL read its queue: it counts, and the sweeper runs again
//     at once (counting only those after the instant, such an expiry waited
//     for sweepIdle; a test that moved its clock during a sweep saw it);
//   - the earliest end of a live or ended lease whose message's expiry has
//     passed: that end expires it.
//
// Both read messages_expiry: the first is its first entry after the
// instant, the second walks the entries up to the instant, which past a
// sweep are the messages held by leases (at most the queue's messages in
// flight whose time to live passed). The messages whose expiry passed
// before $2 and that no lease holds are not counted: the sweep that
// computes this has just expired them (sweepTTL: it reports when more are
// due), or another transaction held them, and counting them would run the
// sweeper again and again while it does.
const nextExpirySQL = `SELECT (extract(epoch FROM min(least(
		(SELECT expires_at FROM messages WHERE queue_id = q.mid AND expires_at IS NOT NULL
			AND expires_at > $2 ORDER BY expires_at LIMIT 1),
		(SELECT min(visible_at) FROM messages WHERE queue_id = q.mid AND expires_at IS NOT NULL
			AND expires_at <= ` + nowSQL + ` AND state = 'i'))) - ` + nowSQL + `) * 1000000)::bigint
	FROM queues q WHERE NOT q.deleted`
