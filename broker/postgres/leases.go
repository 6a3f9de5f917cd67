package postgres

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
)

// Lease changes and lease ends planned in Go (broker/internal/plan/retry.go).
//
// A visibility change (extend, nack, snooze, dead-letter now) and, on a
// queue with a RetryPolicy or RedrivePolicy, the end of a lease, are planned
// by the pure planners of package broker (plan.LeaseChange, plan.LeaseExpiry)
// on the message row as it is found under its row lock (FOR UPDATE, or FOR
// UPDATE SKIP LOCKED for the expiries a receive, GetQueue or the sweeper
// look for), and applied in the same transaction:
//
//   - FateInFlight: the lease ends at At (state 'i').
//   - FateVisible: ready at At (state 'r'; At is the ready order).
//   - FateDelayed: backing off or snoozed until At (state 'd', counted as
//     delayed). Its receipt is stale (Delete, ChangeVisibility). On a FIFO
//     queue it keeps holding its group: a group whose head is not ready is
//     not a candidate, and a run of ready messages ends at the first one
//     that is not (fifoCandidatesSQL, fifoGroupRun).
//   - FateDeadLetter: moved to the queue's dead-letter queue now, as a
//     receive past the limit moves it (moveToDLQ); with no dead-letter queue
//     (or it is gone) the message is made visible instead.
//   - FateExpired: its time to live passed (ttl.go): moved to the
//     dead-letter queue with the reason "expired" when the queue
//     dead-letters its expired messages and that queue exists, else deleted
//     (leaseApply.expire).
//
// Queues without either policy keep the fast path: an ended lease is
// promoted to ready in SQL (promote), which is plan.LeaseExpiry's answer for
// them (FateVisible at the lease's end).

// expireBatch bounds the ended leases one expireLeases transaction plans.
const expireBatch = 500

// hasRetryOrRedrive reports whether an ended lease of a queue with settings c is
// planned in Go (expireLeases) rather than promoted in SQL.
func hasRetryOrRedrive(c model.QueueConfig) bool { return c.Retry != nil || c.Redrive != nil }

// noteDeadline makes the sweeper run by at, when that is sooner than its
// current deadline: a lease of a queue with a policy ends then, and its
// expiry (a dead letter, a backoff) must be applied without waiting for a
// receive.
func (b *Backend) noteDeadline(at time.Time) {
	b.mu.Lock()
	kick := b.sweepAt.IsZero() || at.Before(b.sweepAt)
	if kick {
		b.sweepAt = at
	}
	b.mu.Unlock()
	if kick {
		b.sweeper.Kick()
	}
}

// leaseRow is a message row as a lease plan needs it.
type leaseRow struct {
	id        int64
	state     rowState
	live      bool // in flight under a lease that has not ended
	visibleAt time.Time
	facts     plan.LeaseFacts
	sentAt    time.Time
	seq       *int64
	attempt   *string // the FIFO receive attempt that returned it
}

// leaseApply collects the planned changes of one transaction's messages
// (one queue) and applies them together: updates in place, then the moves to
// the dead-letter queue, then the counters (last, in mid order).
type leaseApply struct {
	ids      []int64
	states   []string
	at       []time.Time
	attempts []int32
	reasons  []*string   // nil: keep the reason
	failAt   []time.Time // when a set reason's failure happened
	dead     []deadLetter
	attempt  []string // FIFO receive attempts to invalidate
	// drop are the rows deleted past their time to live; expired counts
	// them with the ones moved to the dead-letter queue for it.
	drop    []int64
	expired int
	// src counter deltas; earliest is the earliest instant a message becomes
	// visible or a lease ends (for wake-ups); ttlEnd the earliest end of a
	// lease whose message's time to live passes by then (its end expires
	// the message: the sweeper must run then, on any queue).
	ready, inflight, delayed int64
	earliest, ttlEnd         time.Time
}

// deadLetter is a message planned to move to the dead-letter queue.
type deadLetter struct {
	id        int64
	messageID string
	sentAt    time.Time
	seq       *int64
	attempts  int
	reason    string
	failAt    time.Time // when the failure that moves it happened
}

// add records plan p for row r, which is in flight (state 'i'); failAt is
// the instant of the failure the plan's reason records (the lease's end,
// or a nack's instant).
func (a *leaseApply) add(r leaseRow, p plan.LeasePlan, failAt time.Time) {
	var reason *string
	if p.SetReason {
		reason = &p.Reason
	}
	if r.attempt != nil {
		a.attempt = append(a.attempt, *r.attempt)
	}
	if p.Fate == plan.FateDeadLetter {
		a.dead = append(a.dead, deadLetter{r.id, r.facts.MessageID, r.sentAt, r.seq, p.Attempts, p.Reason, failAt})
		a.inflight--
		return
	}
	state := rowInFlight
	switch p.Fate {
	case plan.FateVisible:
		state = rowReady
		a.inflight--
		a.ready++
	case plan.FateDelayed:
		state = rowDelayed
		a.inflight--
		a.delayed++
	}
	a.ids, a.states, a.at = append(a.ids, r.id), append(a.states, string(state)), append(a.at, p.At)
	a.attempts, a.reasons, a.failAt = append(a.attempts, int32(p.Attempts)), append(a.reasons, reason), append(a.failAt, failAt)
	if a.earliest.IsZero() || p.At.Before(a.earliest) {
		a.earliest = p.At
	}
	if p.Fate == plan.FateInFlight && model.Expired(r.facts.ExpiresAt, p.At) && (a.ttlEnd.IsZero() || p.At.Before(a.ttlEnd)) {
		a.ttlEnd = p.At
	}
}

// expire records that row r, in state r.state, expired (plan.FateExpired,
// or its time to live passed while it was ready or delayed: ttl.go) with
// attempts attempts: moved to the dead-letter queue with the reason
// "expired" when toDLQ (the queue dead-letters its expired messages and that
// queue exists), else deleted; at is the instant it expired.
func (a *leaseApply) expire(r leaseRow, attempts int, toDLQ bool, at time.Time) {
	switch r.state {
	case rowReady:
		a.ready--
	case rowDelayed:
		a.delayed--
	default:
		a.inflight--
		if r.attempt != nil {
			a.attempt = append(a.attempt, *r.attempt)
		}
	}
	a.expired++
	if toDLQ {
		a.dead = append(a.dead, deadLetter{r.id, r.facts.MessageID, r.sentAt, r.seq, attempts, model.ReasonExpired, at})
		return
	}
	a.drop = append(a.drop, r.id)
}

// deleteRows deletes the message rows ids in tx (a lease plan's drops, a
// move step's moved rows).
func deleteRows(ctx context.Context, tx pgx.Tx, ids []int64) error {
	_, err := tx.Exec(ctx, "DELETE FROM messages WHERE id = ANY($1::bigint[])", ids)
	return err
}

// recordConflictSQL ends an INSERT INTO message_records AS x: a record of an
// id of which the queue keeps one already replaces it, every field: the
// newer tells what happened last.
const recordConflictSQL = `ON CONFLICT (queue_id, message_id) DO UPDATE SET state = excluded.state, at = excluded.at,
		due = excluded.due, attempts = excluded.attempts, result = excluded.result, replayed_as = excluded.replayed_as,
		reason = excluded.reason, source = excluded.source`

// dropExpired deletes queue q's rows ids, past their time to live, in tx;
// on a queue that keeps records (its CompletedRetention) each leaves an
// expired one (model.JobExpired) at now, the transaction's instant.
func (b *Backend) dropExpired(ctx context.Context, tx pgx.Tx, q queueRow, ids []int64, now time.Time) error {
	keep := q.cfg.CompletedRetention
	if keep <= 0 {
		return deleteRows(ctx, tx, ids)
	}
	_, err := tx.Exec(ctx, `WITH d AS (DELETE FROM messages WHERE id = ANY($1::bigint[])
			RETURNING message_id, coalesce(attempts, receive_count) AS attempts, reason)
		INSERT INTO message_records AS x (queue_id, message_id, state, at, due, attempts, reason)
		SELECT $2, message_id, 'e', $3, $3::timestamptz + $4 * interval '1 microsecond', attempts, reason FROM d
		`+recordConflictSQL, ids, q.id, now, keep.Microseconds())
	if err == nil {
		b.noteDeadline(now.Add(keep)) // the sweeper deletes the records then
	}
	return err
}

// apply writes the collected changes of queue q's messages in tx; to is
// where dead letters go (its dlq is set whenever a.dead is not empty), and
// their webhook events (to.hook). now is the transaction's instant.
func (b *Backend) apply(ctx context.Context, tx pgx.Tx, q queueRow, to claimTo, a *leaseApply, now time.Time) error {
	if len(a.drop) > 0 {
		if err := b.dropExpired(ctx, tx, q, a.drop, now); err != nil {
			return err
		}
	}
	if len(a.ids) > 0 {
		if _, err := tx.Exec(ctx, `UPDATE messages m SET state = u.state::"char", visible_at = u.at,
				attempts = u.attempts, reason = coalesce(u.reason, m.reason),
				failures = CASE WHEN u.reason IS NULL THEN m.failures ELSE `+pushFailureSQL("m.failures", "u.reason", "u.fail_at")+` END
			FROM unnest($1::bigint[], $2::text[], $3::timestamptz[], $4::integer[], $5::text[], $6::timestamptz[]) u (id, state, at, attempts, reason, fail_at)
			WHERE m.id = u.id`, a.ids, a.states, a.at, a.attempts, a.reasons, a.failAt); err != nil {
			return err
		}
	}
	if len(a.attempt) > 0 {
		if _, err := tx.Exec(ctx, "UPDATE attempts SET invalid = true WHERE queue_id = $1 AND attempt_id = ANY($2::text[])",
			q.mid, a.attempt); err != nil {
			return err
		}
	}
	var events int64 // webhook events written into the outbox (to.hook)
	if len(a.dead) > 0 {
		if err := b.moveToDLQ(ctx, tx, q, *to.dlq, a.dead, now); err != nil {
			return err
		}
		var err error
		if events, err = b.insertWebhookEvents(ctx, tx, q, to, a.dead, now); err != nil {
			return err
		}
	}
	type delta struct {
		mid                      int64
		ready, inflight, delayed int64
	}
	deltas := []delta{{q.mid, a.ready, a.inflight, a.delayed}}
	if len(a.dead) > 0 {
		deltas = append(deltas, delta{mid: to.dlq.mid, ready: int64(len(a.dead))})
	}
	if events > 0 {
		deltas = append(deltas, delta{mid: to.hook.mid, ready: events})
	}
	slices.SortFunc(deltas, func(x, y delta) int { return compareInt64(x.mid, y.mid) })
	for _, d := range deltas {
		if d.ready == 0 && d.inflight == 0 && d.delayed == 0 {
			continue
		}
		if err := addCounts(ctx, tx, d.mid, shard(), d.ready, d.inflight, d.delayed); err != nil {
			return err
		}
	}
	return nil
}

func compareInt64(x, y int64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// moveToDLQ moves in-flight messages of queue src (locked by the caller) to
// its dead-letter queue dlq, ready there at now, as the claim's dead-letter
// move does (claimSQL's red), with plan.DeadLetter's fields: on a FIFO
// dead-letter queue a new sequence number (taken under the group rows'
// locks, in the source's order), its message id as dedup id and SentAt now.
// Each keeps its body, attributes, counts, receive times and max attempts,
// and leaves its time to live behind; attempts and reason are the plan's,
// the reason one more failure in its history (at the deadLetter's failAt);
// into a standard dead-letter queue it takes a fair-queue turn there, as a
// send does.
func (b *Backend) moveToDLQ(ctx context.Context, tx pgx.Tx, src, dlq queueRow, dead []deadLetter, now time.Time) error {
	slices.SortFunc(dead, func(x, y deadLetter) int {
		if x.seq != nil && y.seq != nil && *x.seq != *y.seq {
			return compareInt64(*x.seq, *y.seq)
		}
		return compareInt64(x.id, y.id)
	})
	n := len(dead)
	ids, newSeq := make([]int64, n), make([]bool, n)
	dedup, sent := make([]*string, n), make([]time.Time, n)
	attempts, reasons, failAt := make([]int32, n), make([]string, n), make([]time.Time, n)
	for i, d := range dead {
		p := plan.DeadLetter(d.messageID, d.sentAt, dlq.cfg.Fifo, now)
		ids[i], newSeq[i], sent[i] = d.id, p.NewSequence, p.SentAt
		if p.DedupID != "" {
			dedup[i] = &p.DedupID
		}
		attempts[i], reasons[i], failAt[i] = int32(d.attempts), d.reason, d.failAt
	}
	if dlq.cfg.Fifo {
		rows, err := tx.Query(ctx, `SELECT DISTINCT group_id FROM messages WHERE id = ANY($1::bigint[]) AND group_id IS NOT NULL ORDER BY 1`, ids)
		if err != nil {
			return err
		}
		groups, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if len(groups) > 0 {
			if _, err := tx.Exec(ctx, lockGroupsSQL, dlq.mid, groups); err != nil {
				return err
			}
		}
	}
	// Volatile expressions (nextval) in the select list are evaluated after
	// the ORDER BY, so sequence numbers follow the source order. Into a
	// standard dead-letter queue each takes a fair-queue turn there (t, in
	// that order within its tenant: fair.go).
	_, err := tx.Exec(ctx, `WITH t AS (`+turnsSQL("$1::bigint", `(SELECT x.id AS k, s.group_id, s.priority, x.ord
			FROM unnest($4::bigint[]) WITH ORDINALITY AS x (id, ord) JOIN messages s ON s.id = x.id WHERE NOT $10)`)+`)
		UPDATE messages m SET queue_id = $1, state = 'r', visible_at = $2, dl_source = $3,
			attempt = NULL, seq = coalesce(u.seq, m.seq), dedup_id = coalesce(u.dedup, m.dedup_id),
			sent_at = u.sent_at, attempts = u.attempts, reason = u.reason, turn = coalesce(t.turn, m.turn),
			expires_at = NULL, failures = `+pushFailureSQL("m.failures", "u.reason", "u.fail_at")+`
		FROM (SELECT id, dedup, sent_at, attempts, reason, fail_at, CASE WHEN newseq THEN nextval('fifo_seq') END AS seq
			FROM unnest($4::bigint[], $5::boolean[], $6::text[], $7::timestamptz[], $8::integer[], $9::text[], $11::timestamptz[])
				WITH ORDINALITY AS x (id, newseq, dedup, sent_at, attempts, reason, fail_at, ord)
			ORDER BY ord) u LEFT JOIN t ON t.k = u.id
		WHERE m.id = u.id`, dlq.mid, now, src.name, ids, newSeq, dedup, sent, attempts, reasons, dlq.cfg.Fifo, failAt)
	return err
}

// readLease reads, under its row lock, the message of queue q that a
// receipt names (row id key, lease version lease); ok is false when none.
const readLeaseSQL = `SELECT id, state::text, state = 'i' AND visible_at > ` + nowSQL + `, visible_at,
		message_id::text, coalesce(attempts, receive_count), max_attempts, sent_at, seq, attempt, expires_at, ` + nowSQL + `
	FROM messages WHERE id = $2 AND queue_id = $3 AND lease = $4 FOR UPDATE`

// scanLeases reads rows of scanLease's shape to the end, and the
// statement's now (zero without a row).
func scanLeases(rows pgx.Rows) (rs []leaseRow, now time.Time, err error) {
	defer rows.Close()
	for rows.Next() {
		r, at, err := scanLease(rows)
		if err != nil {
			return nil, time.Time{}, err
		}
		rs, now = append(rs, r), at
	}
	return rs, now, rows.Err()
}

// scanLease reads a row of readLeaseSQL's columns.
func scanLease(row pgx.Row) (r leaseRow, now time.Time, err error) {
	var expiresAt *time.Time
	err = row.Scan(&r.id, &r.state, &r.live, &r.visibleAt, &r.facts.MessageID, &r.facts.Attempts,
		&r.facts.MaxAttempts, &r.sentAt, &r.seq, &r.attempt, &expiresAt, &now)
	if expiresAt != nil {
		r.facts.ExpiresAt = *expiresAt
	}
	return r, now, err
}

// leaseResult is what a committed lease transaction did, for the work after
// the commit; it is rebuilt when the transaction is retried.
type leaseResult struct {
	moved    []movedLetter
	earliest time.Time
	ttlEnd   time.Time // leaseApply.ttlEnd
	groups   bool      // a FIFO message left in flight (its group may be free)
	freed    bool      // a message left flight (a queue's MaxInFlight may have room)
	expired  int       // messages expired (leaseApply.expired)
}

// ChangeVisibility implements storage.Backend: one transaction that locks
// each receipt's message (in row order), classifies the receipt (a message
// gone or backing off: stale; a lease that ended: ended), plans the change
// with plan.LeaseChange and applies the plans (leaseApply).
func (b *Backend) ChangeVisibility(ctx context.Context, queueName model.QueueRef, changes []model.VisibilityChange) (_ []model.LeaseOutcome, err error) {
	defer unavailable(ctx, &err)
	if err := b.enter(ctx); err != nil {
		return nil, err
	}
	defer b.life.Done()
	q, err := b.getQueue(ctx, b.pool, queueName)
	if err != nil {
		return nil, err
	}
	out := make([]model.LeaseOutcome, len(changes))
	type change struct {
		i          int
		key, lease int64
	}
	var todo []change
	for i, c := range changes {
		key, lease, o, ok := leaseOf(q.id, c.Receipt)
		out[i] = o
		if ok {
			todo = append(todo, change{i, key, lease})
		}
	}
	if len(todo) == 0 {
		return visibilityOutcomes(q.cfg, out), nil
	}
	// Row locks in id order: two batches touching the same messages never
	// wait on each other in a cycle.
	slices.SortStableFunc(todo, func(x, y change) int { return compareInt64(x.key, y.key) })
	var res leaseResult
	err = retry(func() error {
		res = leaseResult{}
		return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			var a leaseApply
			var to *claimTo
			var now time.Time
			// deadLetterTo resolves the dead-letter queue once; a plan to
			// move a message there becomes visible at `at` when there is
			// none (any more).
			resolve := func() error {
				if to == nil {
					t, err := b.claimTarget(ctx, tx, q)
					if err != nil {
						return err
					}
					to = &t
				}
				return nil
			}
			deadLetterTo := func(p *plan.LeasePlan, at time.Time) error {
				if p.Fate != plan.FateDeadLetter {
					return nil
				}
				if err := resolve(); err != nil {
					return err
				}
				if to.dlq == nil {
					p.Fate, p.At = plan.FateVisible, at
				}
				return nil
			}
			// record records p for r, whose failure (if p sets a reason)
			// happened at failAt: an expiry moves the message to the
			// dead-letter queue or deletes it (leaseApply.expire).
			record := func(r leaseRow, p plan.LeasePlan, failAt time.Time) error {
				if p.Fate != plan.FateExpired {
					a.add(r, p, failAt)
					return nil
				}
				toDLQ := false
				if q.cfg.ExpiredToDeadLetter() {
					if err := resolve(); err != nil {
						return err
					}
					toDLQ = to.dlq != nil
				}
				a.expire(r, p.Attempts, toDLQ, p.At)
				return nil
			}
			// flush applies the plans collected so far. A receipt named
			// twice (todo is in key order: the entries are adjacent) is
			// planned again after the first plan is written, on the row
			// as that plan left it, as if the entries came one after the
			// other: a message is never planned twice from one reading
			// (its counters would move twice).
			planned := map[int64]bool{}
			flush := func() error {
				clear(planned)
				if len(a.ids) == 0 && len(a.dead) == 0 && len(a.drop) == 0 {
					return nil
				}
				var target claimTo
				if to != nil {
					target = *to
				}
				if err := b.apply(ctx, tx, q, target, &a, now); err != nil {
					return err
				}
				if res.earliest.IsZero() || (!a.earliest.IsZero() && a.earliest.Before(res.earliest)) {
					res.earliest = a.earliest
				}
				if res.ttlEnd.IsZero() || (!a.ttlEnd.IsZero() && a.ttlEnd.Before(res.ttlEnd)) {
					res.ttlEnd = a.ttlEnd
				}
				res.freed = res.freed || a.inflight < 0
				for _, d := range a.dead {
					res.moved = append(res.moved, movedLetter{d.messageID, d.attempts, d.reason})
				}
				res.expired += a.expired
				res.groups = res.groups || (q.cfg.Fifo && a.expired > 0) // an expired message freed its group
				a = leaseApply{}
				return nil
			}
			for _, c := range todo {
				if planned[c.key] {
					if err := flush(); err != nil {
						return err
					}
				}
				planned[c.key] = true
				r, at, err := scanLease(tx.QueryRow(ctx, readLeaseSQL, b.tnow(), c.key, q.mid, c.lease))
				switch {
				case errors.Is(err, pgx.ErrNoRows):
					out[c.i] = model.LeaseStale
					continue
				case err != nil:
					return err
				case r.state == rowDelayed:
					out[c.i] = model.LeaseStale // backing off or snoozed: not this lease's any more
					continue
				case !r.live && r.state == rowInFlight && (hasRetryOrRedrive(q.cfg) || model.Expired(r.facts.ExpiresAt, at)):
					// The lease ended and nobody planned it yet: plan it
					// now, as a receive would. Backing off or moved: the
					// receipt is stale; visible again: the lease ended.
					// A message visible or backing off since then whose
					// time to live has passed by now expires now, as the
					// expiry pass would have it (ttl.go; on a queue
					// without a policy this is the only reason to plan).
					now = at
					p := plan.LeaseExpiry(q.cfg, r.facts, r.visibleAt)
					if (p.Fate == plan.FateVisible || p.Fate == plan.FateDelayed) && model.Expired(r.facts.ExpiresAt, at) {
						p = plan.LeaseExpiry(q.cfg, r.facts, at) // FateExpired
					}
					if err := deadLetterTo(&p, r.visibleAt); err != nil {
						return err
					}
					out[c.i] = model.LeaseStale
					if p.Fate == plan.FateVisible {
						out[c.i] = model.LeaseEnded
					}
					r.attempt = nil
					if err := record(r, p, r.visibleAt); err != nil { // failed at the lease's end
						return err
					}
					res.groups = res.groups || q.cfg.Fifo // its group may be free
					continue
				case !r.live:
					out[c.i] = model.LeaseEnded
					continue
				}
				now = at
				out[c.i] = model.LeaseApplied
				p := plan.LeaseChange(q.cfg, r.facts, changes[c.i], now)
				if err := deadLetterTo(&p, now); err != nil {
					return err
				}
				if p.Fate != plan.FateInFlight && q.cfg.Fifo {
					res.groups = true
				}
				if err := record(r, p, now); err != nil {
					return err
				}
			}
			return flush()
		})
	})
	if err != nil {
		return nil, txErr("change visibility", err)
	}
	b.afterLeases(ctx, q, res)
	return visibilityOutcomes(q.cfg, out), nil
}

// visibilityOutcomes applies plan.VisibilityOutcome to every outcome of a
// visibility change on a queue with settings c.
func visibilityOutcomes(c model.QueueConfig, out []model.LeaseOutcome) []model.LeaseOutcome {
	for i, o := range out {
		out[i] = plan.VisibilityOutcome(c, o)
	}
	return out
}

// afterLeases is the work after a committed lease transaction of queue q:
// the dead-letter log and wake-ups, the local and remote waiters of q, and
// the sweeper's deadline for the leases that now end sooner: on a queue with
// a policy (expireLeases), and on any queue for a lease whose message's time
// to live passes before it ends (a shortened lease would otherwise wait for
// the sweeper's next planned wake-up, nextExpirySQL's answer before the
// change).
func (b *Backend) afterLeases(ctx context.Context, q queueRow, res leaseResult) {
	b.deadLettered(ctx, q, res.moved)
	b.countExpired(q, res.expired)
	switch {
	case res.groups, res.freed && q.cfg.MaxInFlight > 0:
		// A FIFO group, or room under the queue's MaxInFlight, may be
		// free now.
		b.changed(q.id, time.Time{}, false)
	case !res.earliest.IsZero():
		b.changed(q.id, res.earliest, false)
	}
	if hasRetryOrRedrive(q.cfg) && !res.earliest.IsZero() {
		b.noteDeadline(res.earliest)
	}
	if !res.ttlEnd.IsZero() {
		b.noteDeadline(res.ttlEnd)
	}
}

// expireLeases plans the ended leases of queue q (a queue with a policy)
// with plan.LeaseExpiry, at most expireBatch of them, skipping rows
// other transactions hold, and applies the plans in one transaction. It
// returns the messages moved to the dead-letter queue and whether more
// leases may have ended (a full batch).
func (b *Backend) expireLeases(ctx context.Context, q queueRow) ([]movedLetter, bool, error) {
	var due bool
	if err := b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM messages
		WHERE queue_id = $2 AND state = 'i' AND visible_at <= `+nowSQL+`)`, b.tnow(), q.mid).Scan(&due); err != nil {
		return nil, false, dbErr("expire leases", err)
	}
	if !due {
		return nil, false, nil
	}
	return b.expireEnded(ctx, q)
}

// expireEnded is expireLeases once it is known that some leases of q have
// ended (look's statement read it).
func (b *Backend) expireEnded(ctx context.Context, q queueRow) ([]movedLetter, bool, error) {
	var res leaseResult
	var full bool
	err := retry(func() error {
		res, full = leaseResult{}, false
		return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `SELECT id, state::text, false, visible_at, message_id::text,
					coalesce(attempts, receive_count), max_attempts, sent_at, seq, attempt, expires_at, `+nowSQL+`
				FROM messages WHERE queue_id = $2 AND state = 'i' AND visible_at <= `+nowSQL+`
				ORDER BY visible_at LIMIT $3 FOR UPDATE SKIP LOCKED`, b.tnow(), q.mid, expireBatch)
			if err != nil {
				return err
			}
			ended, now, err := scanLeases(rows)
			if err != nil {
				return err
			}
			full = len(ended) == expireBatch
			var a leaseApply
			var to claimTo
			resolved := false
			for _, r := range ended {
				r.attempt = nil // replayAttempt checks the lease itself
				p := plan.LeaseExpiry(q.cfg, r.facts, r.visibleAt)
				if p.Fate == plan.FateDeadLetter || (p.Fate == plan.FateExpired && q.cfg.ExpiredToDeadLetter()) {
					if !resolved {
						if to, err = b.claimTarget(ctx, tx, q); err != nil {
							return err
						}
						resolved = true
					}
					if to.dlq == nil && p.Fate == plan.FateDeadLetter {
						p.Fate = plan.FateVisible // no dead-letter queue (any more)
					}
				}
				if p.Fate == plan.FateExpired {
					a.expire(r, p.Attempts, q.cfg.ExpiredToDeadLetter() && to.dlq != nil, p.At)
					continue
				}
				a.add(r, p, r.visibleAt) // failed at the lease's end
			}
			if len(ended) == 0 {
				return nil
			}
			if err := b.apply(ctx, tx, q, to, &a, now); err != nil {
				return err
			}
			res.earliest = a.earliest
			res.groups = q.cfg.Fifo
			res.expired = a.expired
			for _, d := range a.dead {
				res.moved = append(res.moved, movedLetter{d.messageID, d.attempts, d.reason})
			}
			return nil
		})
	})
	if err != nil {
		return nil, false, txErr("expire leases", err)
	}
	// The caller logs the moves (deadLettered); the waiters learn of the
	// messages made visible or delayed.
	if !res.earliest.IsZero() || res.groups {
		b.changed(q.id, time.Time{}, false)
	}
	b.countExpired(q, res.expired)
	return res.moved, full, nil
}
