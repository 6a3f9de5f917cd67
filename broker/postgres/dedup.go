package postgres

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
)

// Deduplication on standard queues: a send whose entries carry a
// MessageDeduplicationId (plan.SendPlan.DedupKey) runs in one transaction
// that first decides each of those entries (dedupSQL), then stores the
// others with the one insert of every standard send (insertStandard). FIFO
// sends deduplicate in sendFifo, on the same dedup table.
//
// # Where the state lives
//
//   - Window: table dedup, one row per (queue mid, DedupKey), as FIFO
//     queues' (migration 2): its message id (seq 0 on a standard queue) and
//     its expiry, fixed at the send that introduced it
//     (model.QueueConfig.DedupWindowOf). A send upserts the row and
//     overwrites only an expired one, so of two concurrent sends of one key
//     (on any brokers) exactly one stores a message; the sweeper deletes
//     expired rows, and lookups check the expiry.
//   - Live carriers (DeduplicationUntil=settled): the messages rows
//     themselves, whose dedup_id a standard send now stores. The partial
//     index messages_dedup (migration 11) finds the rows of a queue that
//     carry an id and no FIFO sequence number (plan.LiveCarrier). A row
//     leaves the queue's mid when the message is deleted, dead-lettered,
//     expired or purged, and the id is released with it.
//
// dedupSQL spells plan.Original's "not a duplicate" in SQL: no live carrier
// (on a settled queue) and no window row, or an expired one. When it stores
// nothing, dedupAnswerSQL reads what the backend found and plan.Original
// picks the answer.

// carrierStaysSQL is plan.CarrierStays on a messages row, in a statement
// whose $1 is the instant and whose argument n is the queue's retention in
// µs: within its retention, and not expired unless a live lease holds it.
func carrierStaysSQL(n string) string {
	return `sent_at > ` + nowSQL + ` - ` + n + ` * interval '1 microsecond'
		AND (coalesce(expires_at > ` + nowSQL + `, true) OR (state = 'i' AND visible_at > ` + nowSQL + `))`
}

// dedupSQL claims dedup key $3 of queue mid $2 for message id $4, for $5
// µs from the instant ($1), unless the key's window row has not expired or
// ($6: the queue is settled) a message of the queue carries dedup id $7 and
// stays (carrierStaysSQL; $8 is the queue's retention in µs). It returns
// one row when the entry is to be stored.
var dedupSQL = `
	WITH live AS (
		SELECT 1 FROM messages WHERE $6 AND queue_id = $2 AND dedup_id = $7 AND seq IS NULL
			AND ` + carrierStaysSQL("$8") + ` LIMIT 1),
	d AS (
		INSERT INTO dedup AS x (queue_id, key, message_id, seq, expires_at)
		SELECT $2, $3, $4, 0, ` + nowSQL + ` + $5 * interval '1 microsecond'
		WHERE NOT EXISTS (SELECT 1 FROM live)
		ON CONFLICT (queue_id, key) DO UPDATE SET message_id = excluded.message_id,
			seq = excluded.seq, expires_at = excluded.expires_at
		WHERE x.expires_at <= ` + nowSQL + `
		RETURNING 1)
	SELECT 1 FROM d`

// dedupAnswerSQL reads, for a duplicate of key $3 (dedup id $5) of queue
// mid $2, the key's window row (its message id and expiry), the message
// id of a live carrier that stays ($4: the queue is settled; $6 is its
// retention in µs), and the instant: the facts plan.Original answers from.
// Its statement sees what committed before it, the concurrent send that won
// the key included.
var dedupAnswerSQL = `
	SELECT (SELECT message_id::text FROM dedup WHERE queue_id = $2 AND key = $3),
		(SELECT expires_at FROM dedup WHERE queue_id = $2 AND key = $3),
		(SELECT message_id::text FROM messages WHERE $4 AND queue_id = $2 AND dedup_id = $5 AND seq IS NULL
			AND ` + carrierStaysSQL("$6") + ` ORDER BY id LIMIT 1),
		` + nowSQL

// sendDeduped stores the valid entries of a send to standard queue q, some
// of which carry a dedup id, in one transaction (in a caller's transaction,
// a savepoint): each entry with a dedup id is decided (a later entry of the
// batch with the same id is a duplicate of the earlier one),
// then the others are inserted in one statement. A duplicate's result takes
// the original's message id. It returns the delay after which the first
// stored message becomes ready (-1: none stored).
func (s sendOn) sendDeduped(ctx context.Context, q queueRow, entries []model.SendEntry, plans []plan.SendPlan, results []model.SendResult) (time.Duration, error) {
	settled := q.cfg.DedupUntilSettled()
	window := micros(q.cfg.DedupWindowOf())
	delay := time.Duration(-1)
	err := s.run(func() error {
		return pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
			skip := make([]bool, len(entries))
			var order []int // the entries with a dedup id, by key
			for i := range entries {
				results[i].MessageID = plans[i].MessageID // again, if run retries
				if plans[i].Err == nil && plans[i].DedupKey != "" {
					order = append(order, i)
				}
			}
			// In key order, so that two sends never wait on each other's
			// keys (no deadlock); stable, so that of one key's entries the
			// first sent is the one stored.
			slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(plans[a].DedupKey, plans[b].DedupKey) })
			for _, i := range order {
				p := &plans[i]
				orig, err := decideDedup(ctx, tx, s.now, q, p, settled, window)
				if err != nil {
					return err
				}
				if orig != "" {
					results[i].MessageID, skip[i] = orig, true
				}
			}
			in := sendOn{db: tx, now: s.now, run: once, txShard: s.txShard}
			var err error
			_, _, delay, err = in.insertStandard(ctx, q, false, entries, plans, results, skip)
			return err
		})
	})
	return delay, err
}

// decideDedup runs dedupSQL for entry p of a send to q in tx: "" when the
// entry is to be stored (its window row is written), else the message id a
// duplicate is answered with (plan.Original, on what dedupAnswerSQL read).
// When what made it a duplicate went away between the two statements (an
// expiry, a delete), it decides again, at most a few times; then the key's
// last owner answers.
func decideDedup(ctx context.Context, tx pgx.Tx, at any, q queueRow, p *plan.SendPlan, settled bool, window int64) (string, error) {
	key := []byte(p.DedupKey)
	var f plan.DedupFound
	for range 3 {
		var one int
		err := tx.QueryRow(ctx, dedupSQL, at, q.mid, key, p.MessageID, window, settled, p.DedupID, micros(q.cfg.Retention)).Scan(&one)
		if err == nil {
			return "", nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return "", err
		}
		var windowID, liveID *string
		var until *time.Time
		var now time.Time
		if err := tx.QueryRow(ctx, dedupAnswerSQL, at, q.mid, key, settled, p.DedupID, micros(q.cfg.Retention)).
			Scan(&windowID, &until, &liveID, &now); err != nil {
			return "", err
		}
		f = plan.DedupFound{}
		if windowID != nil && until != nil {
			f.WindowID, f.WindowUntil = *windowID, *until
		}
		if liveID != nil {
			f.LiveID = *liveID
		}
		if orig := plan.Original(q.cfg, f, now); orig != "" {
			return orig, nil
		}
	}
	if f.WindowID != "" {
		return f.WindowID, nil
	}
	return f.LiveID, nil
}

// carryDedupIDs reports whether a send's entries carry a dedup id.
func carryDedupIDs(entries []model.SendEntry) bool {
	for i := range entries {
		if entries[i].DedupID != "" {
			return true
		}
	}
	return false
}
