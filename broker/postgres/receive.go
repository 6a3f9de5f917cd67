package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
)

// contendedRetry is the real-time pause before a waiting receive looks again
// when ready messages exist but were all locked by other receives (SKIP
// LOCKED returned none): they are being claimed and will be gone or leased
// within a transaction's time. It doubles with each look in a row that
// finds the queue so, up to maxContendedRetry: under load a claim holds its
// rows for milliseconds, and every look costs three statements (a fixed
// 2 ms made each message's losing receives look ten times and more). A
// wake-up (a send, a lease change on this broker) still ends the pause.
const contendedRetry = 2 * time.Millisecond

// maxContendedRetry bounds contendedRetry's doubling.
const maxContendedRetry = 64 * time.Millisecond

// Receive implements storage.Backend.
//
// One attempt is two statements, each its own short transaction (two round
// trips, TestReceiveRoundTrips): look reads the queue row, promotes its due
// messages (due delays, and ended leases on a queue without a retry or
// redrive policy), reads the in-flight count for the cap and the queues a
// claim may move messages to; then the claim. On a queue with a policy
// whose leases have ended, they are planned between the two (leases.go). No
// transaction is open while the receive waits.
// A paused queue is not attempted: the receive only waits, re-reading the
// queue row at each wake-up (UpdateQueue wakes it on every broker).
//
// Waiting: the receive registers as a local waiter of its queue before its
// first attempt (so no wake-up between an attempt and the wait is lost), then
// sleeps on one clock timer armed for the earliest of its wait deadline, the
// queue's next delay or lease end (computed in SQL), and PollInterval. A
// commit on this broker that makes a message ready (or moves a deadline
// earlier) wakes it directly; one on another broker wakes it through
// LISTEN/NOTIFY. Polling stays the source of truth: a lost notification
// delays a receive by at most PollInterval.
func (b *Backend) Receive(ctx context.Context, req model.ReceiveRequest) (_ []model.Delivery, err error) {
	defer unavailable(ctx, &err)
	if err := b.enter(ctx); err != nil {
		return nil, err
	}
	defer b.life.Done()
	// The queue row is read by the statement that promotes its due
	// messages (look): a paused queue's or an invalid request's promotion
	// is harmless (a GetQueue does the same).
	q, lk, err := b.look(ctx, req.Ref())
	if err != nil {
		return nil, err
	}
	rp, err := plan.Receive(q.cfg, req)
	if err != nil {
		b.deadLettered(ctx, q, lk.moved) // look's planning moved them all the same
		return nil, err
	}
	vis, attemptID := rp.Visibility, rp.AttemptID
	if attemptID != "" {
		if ds, ok, err := b.replayAttempt(ctx, q, attemptID); ok || err != nil {
			b.deadLettered(ctx, q, lk.moved)
			return ds, err
		}
	}
	deadline := b.clock.Now().Add(rp.Wait)
	qid := q.id
	w := b.waiters.add(qid, max(1, rp.Max))
	// signalled: the receive was woken and has not looked since; if it
	// ends so, another waiter gets the wake-up (wakeSome wakes only as many
	// as there are new messages).
	signalled := false
	defer func() {
		pending := signalled || len(w.ch) > 0
		b.waiters.remove(qid, w)
		if pending {
			b.waiters.passOn(qid, b.waiters.shareOf(w))
		}
	}()
	if q.cfg.Paused {
		// look read the pause before w could be woken: an UpdateQueue that
		// resumed the queue in between woke nobody, so read it again now
		// that a resume wakes w (one more round trip, on a paused queue
		// only). Without this the receive slept until PollInterval on the
		// clock, for ever on a fake one.
		q0, moved := q, lk.moved
		if q, lk, err = b.relook(ctx, req.Ref(), qid); err != nil {
			b.deadLettered(ctx, q0, moved)
			return nil, err
		}
		lk.moved = append(moved, lk.moved...)
	}
	var timer model.Timer
	contended := 0 // looks in a row that found only locked messages
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-b.life.Closing():
			return nil, model.ClosedError()
		default:
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var ds []model.Delivery
		var lw limitWait
		moved := lk.moved // by the planning of ended leases and expiries (look)
		dropped := 0      // messages the claim dropped past their time to live
		if !q.cfg.Paused {
			// A paused queue delivers nothing: the receive waits as on an
			// empty queue, and is woken when an UpdateQueue resumes it.
			var more []movedLetter
			if ds, more, dropped, lw, err = b.attempt(ctx, q, lk.inflight, lk.target(q), req, rp, attemptID); err != nil {
				return nil, err
			}
			moved = append(moved, more...)
		}
		signalled = false
		if len(moved) > 0 {
			b.deadLettered(ctx, q, moved)
		}
		if len(ds) > 0 {
			due := b.clock.Now().Add(vis)
			b.changed(q.id, due, false)
			if hasRetryOrRedrive(q.cfg) {
				b.noteDeadline(due) // the sweeper applies the lease's expiry (expireLeases, leases.go)
			}
			return ds, nil
		}
		if len(moved) > 0 || dropped > 0 {
			// The moved or dropped messages made room: look again at once.
			if q, lk, err = b.relook(ctx, req.Ref(), q.id); err != nil {
				return nil, err
			}
			continue
		}
		now := b.clock.Now()
		if !now.Before(deadline) {
			return nil, nil
		}
		var wakeAt time.Time
		var real time.Duration
		if q.cfg.Paused {
			if wakeAt = now.Add(b.cfg.PollInterval); deadline.Before(wakeAt) {
				wakeAt = deadline
			}
		} else if wakeAt, real, err = b.nextWake(ctx, q, now, deadline, lw); err != nil {
			return nil, err
		}
		if real > 0 {
			real <<= contended
			if real >= maxContendedRetry {
				real = maxContendedRetry
			} else {
				contended++
			}
		} else {
			contended = 0
		}
		var fire <-chan time.Time
		var rt *time.Timer
		if real > 0 {
			// The waiter sleeps as on its clock timer: a send may wake it,
			// the commits of the claims it lost to do not (they leased the
			// messages it saw).
			if at := b.waiters.arm(w, now.Add(real)); at.Before(now.Add(real)) {
				real = max(at.Sub(now), time.Millisecond)
			}
			rt = time.NewTimer(real)
			fire = rt.C
		} else {
			wakeAt = b.waiters.arm(w, wakeAt)
			// The timer is armed for the instant wakeAt, not for wakeAt-now:
			// the queries since now may have taken long enough for a fake
			// clock to move (a timer set for wakeAt-now from a later
			// instant would fire after wakeAt).
			if timer == nil {
				timer = model.NewTimerAt(b.clock, wakeAt)
			} else {
				model.ResetAt(b.clock, timer, wakeAt)
			}
			fire = timer.C()
		}
		select {
		case <-w.ch:
			signalled = true
		case <-fire:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-b.life.Closing():
			return nil, model.ClosedError()
		}
		if rt != nil {
			rt.Stop()
		}
		b.waiters.arm(w, time.Time{}) // wake on anything while attempting
		if q, lk, err = b.relook(ctx, req.Ref(), q.id); err != nil {
			return nil, err
		}
	}
}

// relook is look for a receive's next attempt at queue ref, whose id was
// id: the queue may have been deleted (and re-created) or changed since.
func (b *Backend) relook(ctx context.Context, ref model.QueueRef, id int64) (queueRow, looked, error) {
	q, lk, err := b.look(ctx, ref)
	if err == nil && q.id != id {
		err = model.QueueNotFoundError()
	}
	return q, lk, err
}

// nextWake decides how a receive that found nothing waits: until wakeAt on
// the clock (the earliest of deadline, the queue's next delay or lease end,
// when its rate lets the next message go (lw), and now+PollInterval), or,
// when ready messages exist that a concurrent receive holds locked or a
// deadline passed but its row is locked, for a short real time (real > 0).
//
// On a FIFO queue ready messages behind locked groups are normal, not
// contention: only deadlines count (a group unlock wakes the waiters). So
// are ready messages on a queue whose limits held the claim (lw.held): a
// delete, a nack or a lease's end makes room.
func (b *Backend) nextWake(ctx context.Context, q queueRow, now, deadline time.Time, lw limitWait) (wakeAt time.Time, real time.Duration, err error) {
	var readyLeft bool
	var dueIn *int64 // µs from the statement's now to the next delay or lease end
	err = b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM messages WHERE queue_id = $2 AND state = 'r'),
		(SELECT (extract(epoch FROM min(visible_at) - `+nowSQL+`) * 1000000)::bigint
		 FROM messages WHERE queue_id = $2 AND state <> 'r')`, b.tnow(), q.mid).Scan(&readyLeft, &dueIn)
	if err != nil {
		return time.Time{}, 0, dbErr("next deadline", err)
	}
	if (readyLeft && !q.cfg.Fifo && !lw.held) || (dueIn != nil && *dueIn <= 0) {
		return time.Time{}, contendedRetry, nil
	}
	wakeAt = deadline
	if p := now.Add(b.cfg.PollInterval); p.Before(wakeAt) {
		wakeAt = p
	}
	if !lw.at.IsZero() && lw.at.Before(wakeAt) {
		wakeAt = lw.at
	}
	if dueIn != nil {
		if d := now.Add(time.Duration(*dueIn) * time.Microsecond); d.Before(wakeAt) {
			wakeAt = d
		}
	}
	return wakeAt, 0, nil
}

// attempt is one look of a receive at queue q, whose due messages look has
// just promoted (and whose ended leases it planned), leaving inflight in
// flight (-1: unknown): it claims up to plan.Max messages under the
// in-flight cap and the queue's limits (plan.ClaimRoom), moving those past
// their attempts to to (claimTarget's answer, read by look; FIFO queues
// read it in their claim's transaction). It returns the deliveries, the
// messages moved to the dead-letter queue instead, how many it dropped
// past their time to live, and, when the queue's limits left no room, how
// to wait.
func (b *Backend) attempt(ctx context.Context, q queueRow, inflight int64, to claimTo, req model.ReceiveRequest, rp plan.ReceivePlan, attemptID string) ([]model.Delivery, []movedLetter, int, limitWait, error) {
	// The claim is not cancelled with ctx: once sent it either commits
	// and its messages are returned, or fails; a cancel mid-statement
	// would leave it unknown whether leases were taken.
	var ds []model.Delivery
	var moved []movedLetter
	var dropped int
	var err error
	if q.cfg.Limited() {
		// The queue's limits are planned inside the claim's transaction,
		// under the queue's limits row lock (limits.go).
		lc := &limitedClaim{max: rp.Max, cap: req.InFlightCap}
		before := b.clock.Now()
		if q.cfg.Fifo {
			ds, moved, dropped, err = b.claimFifo(context.WithoutCancel(ctx), q, rp.Max, lc, rp.Visibility, attemptID)
		} else {
			ds, moved, dropped, err = b.claimLimited(context.WithoutCancel(ctx), q, to, lc, rp.Visibility)
		}
		if err == nil {
			b.countExpired(q, dropped+expiredIn(moved))
		}
		w := lc.wait()
		if w.in > 0 {
			w.at = before.Add(w.in)
		}
		return ds, moved, dropped, w, err
	}
	if inflight < 0 && req.InFlightCap > 0 {
		// expireLeases ran after the promotion's count: count again.
		if err := b.pool.QueryRow(ctx, "SELECT coalesce(sum(inflight), 0) FROM counts WHERE queue_id = $1", q.mid).Scan(&inflight); err != nil {
			return nil, nil, 0, limitWait{}, dbErr("read counts", err)
		}
	}
	room, err := plan.ClaimRoom(q.cfg, q.name, plan.ClaimFacts{Max: rp.Max, InFlight: inflight, Cap: req.InFlightCap})
	if err != nil || room.N == 0 {
		// N == 0: a FIFO queue at its in-flight cap waits as on an empty
		// queue (ClaimRoom).
		return nil, nil, 0, limitWait{}, err
	}
	if q.cfg.Fifo {
		ds, moved, dropped, err = b.claimFifo(context.WithoutCancel(ctx), q, room.N, nil, rp.Visibility, attemptID)
	} else {
		ds, moved, dropped, err = b.claim(context.WithoutCancel(ctx), b.pool, q, to, b.tnow(), room.N, rp.Visibility, nil, "")
	}
	if err == nil {
		b.countExpired(q, dropped+expiredIn(moved))
	}
	return ds, moved, dropped, limitWait{}, err
}

// deadLettered is the work after a commit that moved messages of queue q to
// its dead-letter queue: the log lines, the DLQ's (and the webhook outbox's)
// waiters, the sweeper (a dead letter may expire sooner under its new
// queue's retention).
func (b *Backend) deadLettered(ctx context.Context, q queueRow, moved []movedLetter) {
	if len(moved) == 0 || q.cfg.Redrive == nil {
		return
	}
	dlqRef := model.QueueRef{Account: q.account, Name: q.cfg.Redrive.DeadLetterQueue}
	for _, m := range moved {
		b.dlLog.Moved(m.id, model.QueueRef{Account: q.account, Name: q.name}, dlqRef, m.reason, m.attempts)
	}
	if dlq, err := b.getQueue(ctx, b.pool, dlqRef); err == nil {
		b.changed(dlq.id, time.Time{}, false)
	}
	b.webhookWake(ctx, q)
	b.sweeper.Kick()
}

// claimSQL leases up to @limit ready messages of queue @queue (its mid) in
// one statement, with named arguments (see claim):
//
//   - c locks the rows to claim: on a standard queue the first ready rows in
//     receive order (priority, fair-queue turn, ready order), skipping rows that other transactions hold (another
//     broker's claim, a delete); on a FIFO queue the rows @ids chosen under
//     the group locks (claimFifo), in that order;
//   - exp deletes those past their time to live (expired: expires_at has
//     passed, ttl.go) when they are not to move to the dead-letter queue
//     (expDL), and the others past retention (@retention µs after sent_at):
//     when both have passed, the time to live decides, as in the sweeper
//     (a MessageTimeToLive equal to the retention dead-letters);
//   - rec writes an expired record of each row exp deleted past its time
//     to live, when the queue keeps records (@keep µs > 0, its
//     CompletedRetention; @qid its id);
//   - dl picks, and red moves to the dead-letter queue @dlq (NULL: none),
//     those past their time to live when the queue dead-letters its expired
//     messages (expDL: @ttl_dl, model.QueueConfig.ExpiredToDeadLetter), with
//     the reason @reason_expired, and the others whose
//     receive would start an attempt past their limit: toDLQ below is
//     plan.ShouldDeadLetterOnReceive spelled in SQL (the message's own
//     max_attempts when > 0, else the queue's maxReceiveCount @max_receives,
//     against its attempts), with the reason @reason_max (one more failure
//     in its history, at the claim's instant); with the fields of
//     plan.DeadLetter: ready there, without a time to live, named after
//     @source; into a FIFO
//     dead-letter queue (@dlq_fifo) with a new sequence number, its message
//     id as dedup id and a new SentAt (as SQS resets a FIFO dead letter's
//     enqueue time), and a group row there (locked: created again if the
//     sweeper is pruning it, see lockGroupsSQL; claimFifo has locked it
//     already, before this statement takes the sequence number); into a
//     standard one with a fair-queue turn there, as a send takes (fair.go);
//   - up leases the rest until now + @visibility µs, bumping the lease
//     version (the receipts' compare-and-set token), the receive count and
//     the attempts, setting the last receive time, and records the receive
//     attempt @attempt (FIFO; NULL otherwise). On an at-most-once queue
//     (atMostOnce) it deletes them instead and returns them as the receive
//     leaves them: the delivery is the message's end, committed with the
//     claim;
//   - hook writes one dead-letter event per moved message into the webhook
//     outbox @hook (NULL: the source has no DeadLetterWebhook, or there is
//     no outbox): plan.WebhookEvent's body spelled in SQL (its fields,
//     "at" in model.EventTimeFormat), so the event commits with the move
//     (turn 0: the outbox is one tenant, served in ready order);
//   - cur (standard queues) raises the queue's fair-queue cursors of shard
//     @shard to the highest turn leased at each level (fair.go);
//   - cnt moves them between counters (shard @shard): every claimed row
//     leaves ready; the leased ones enter in flight, the moved ones enter
//     the DLQ's ready, the events the outbox's ready.
//
// @now is the claim's instant: NULL for the statement's now() or the test
// clock's reading (see nowSQL), or a limited claim's instant, read once it
// held its queue's limits row (lockLimitsSQL). The final SELECT has one row
// even when nothing was leased (id -1); every row carries the message ids,
// attempts and expiries (whether each was moved for its time to live) of the
// moved messages (for the dead-letter log), and the number of messages
// dropped past their time to live.
func claimSQL(fifo, atMostOnce bool) string {
	const now = "coalesce(@now::timestamptz, now())"
	const live = "c.sent_at > " + now + " - @retention * interval '1 microsecond'"
	const toDLQ = "@dlq::bigint IS NOT NULL AND coalesce(c.attempts, c.receive_count) >= " +
		"CASE WHEN c.max_attempts > 0 THEN c.max_attempts ELSE @max_receives END"
	const expired = "coalesce(c.expires_at <= " + now + ", false)"
	const expDL = "@ttl_dl::boolean AND @dlq::bigint IS NOT NULL"
	// moves: the row goes to the dead-letter queue (for its time to live,
	// which goes before its retention, or its attempts); lease: the row is
	// leased.
	const moves = "(CASE WHEN " + expired + " THEN " + expDL + " ELSE " + live + " AND " + toDLQ + " END)"
	const lease = "(" + live + " AND NOT " + expired + " AND NOT (" + toDLQ + "))"
	const cols = "id, priority, turn, visible_at, receive_count, attempts, max_attempts, sent_at, group_id, expires_at"
	c := `SELECT ` + cols + ` FROM messages
	WHERE queue_id = @queue AND state = 'r'
	ORDER BY priority DESC, turn, visible_at, id LIMIT @limit FOR UPDATE SKIP LOCKED`
	if fifo {
		c = `SELECT ` + cols + ` FROM messages
	WHERE id = ANY(@ids::bigint[]) AND queue_id = @queue AND state = 'r' LIMIT @limit FOR UPDATE`
	}
	up := `UPDATE messages m SET state = 'i', lease = m.lease + 1, receive_count = m.receive_count + 1,
		attempts = coalesce(m.attempts, m.receive_count) + 1, last_receive_at = ` + now + `,
		first_receive_at = coalesce(m.first_receive_at, ` + now + `),
		visible_at = ` + now + ` + @visibility * interval '1 microsecond', attempt = @attempt
	FROM c
	WHERE m.id = c.id AND ` + lease + `
	RETURNING ` + msgCols("m")
	inflight := "(SELECT count(*) FROM up)"
	cur := "" // FIFO queues have no turns
	if !fifo {
		cur = "cur AS (\n\t" + advanceCursorsSQL("(SELECT c.priority, c.turn FROM c WHERE c.id IN (SELECT id FROM up))") + "),\n"
	}
	if atMostOnce {
		up = `DELETE FROM messages m USING c
	WHERE m.id = c.id AND ` + lease + `
	RETURNING ` + receivedCols("m", now)
		inflight = "0"
	}
	return `
WITH c AS (` + c + `),
exp AS (
	DELETE FROM messages m USING c
	WHERE m.id = c.id AND CASE WHEN ` + expired + ` THEN NOT (` + expDL + `) ELSE NOT (` + live + `) END
	RETURNING m.id, ` + expired + ` AS ttl, m.message_id, coalesce(m.attempts, m.receive_count) AS attempts, m.reason),
rec AS (
	INSERT INTO message_records AS x (queue_id, message_id, state, at, due, attempts, reason)
	SELECT @qid::bigint, message_id, 'e', ` + now + `, ` + now + ` + @keep * interval '1 microsecond', attempts, reason
	FROM exp WHERE ttl AND @keep::bigint > 0
	` + recordConflictSQL + `),
dl AS (
	SELECT c.id, t.turn, ` + expired + ` AS expired FROM c LEFT JOIN (` + turnsSQL("@dlq::bigint",
		"(SELECT c.id AS k, c.group_id, c.priority, c.id AS ord FROM c WHERE NOT @dlq_fifo AND "+moves+")") + `) t ON t.k = c.id
	WHERE ` + moves + `),
red AS (
	UPDATE messages m SET queue_id = @dlq, visible_at = ` + now + `, dl_source = @source, attempt = NULL,
		reason = CASE WHEN dl.expired THEN @reason_expired ELSE @reason_max END, turn = coalesce(dl.turn, m.turn),
		failures = ` + pushFailureSQL("m.failures", "CASE WHEN dl.expired THEN @reason_expired ELSE @reason_max END", now) + `,
		seq = CASE WHEN @dlq_fifo THEN nextval('fifo_seq') ELSE m.seq END,
		dedup_id = CASE WHEN @dlq_fifo THEN m.message_id::text ELSE m.dedup_id END,
		sent_at = CASE WHEN @dlq_fifo THEN ` + now + ` ELSE m.sent_at END, expires_at = NULL
	FROM dl
	WHERE m.id = dl.id
	RETURNING m.id, m.group_id, m.message_id, coalesce(m.attempts, m.receive_count) AS attempts, m.receive_count, dl.expired),
hook AS (
	INSERT INTO messages (queue_id, state, visible_at, sent_at, message_id, body)
	SELECT @hook::bigint, 'r', ` + now + `, ` + now + `, gen_random_uuid(), ` + webhookEventJSON("@source::text",
		"@dlq_name::text", "red.message_id::text", "CASE WHEN red.expired THEN @reason_expired::text ELSE @reason_max::text END",
		"red.attempts", "red.receive_count", now) + `
	FROM red WHERE @hook::bigint IS NOT NULL ORDER BY red.id
	RETURNING 1),
grp AS (
	INSERT INTO groups (queue_id, group_id) SELECT DISTINCT @dlq::bigint, group_id FROM red
	WHERE @dlq_fifo AND group_id IS NOT NULL ORDER BY 2
	ON CONFLICT (queue_id, group_id) DO UPDATE SET group_id = excluded.group_id WHERE false),
up AS (
	` + up + `),
` + cur + `cnt AS (
	INSERT INTO counts AS k (queue_id, shard, ready, inflight, delayed)
	SELECT q, @shard, r, i, 0 FROM (VALUES
		(@queue::bigint, -(SELECT count(*) FROM c), ` + inflight + `),
		(@dlq::bigint, (SELECT count(*) FROM red), 0),
		(@hook::bigint, (SELECT count(*) FROM hook), 0)) v (q, r, i)
	WHERE q IS NOT NULL AND (r <> 0 OR i <> 0) ORDER BY q
	ON CONFLICT (queue_id, shard) DO UPDATE SET ready = k.ready + excluded.ready,
		inflight = k.inflight + excluded.inflight)
SELECT s.moved, s.moved_attempts, s.moved_expired, s.dropped, coalesce(u.id, -1), coalesce(u.lease, 0), coalesce(u.receive_count, 0), u.first_receive_at,
	coalesce(u.sent_at, 'epoch'), coalesce(u.priority, 0), u.seq, coalesce(u.message_id, ''),
	coalesce(u.group_id, ''), coalesce(u.dedup_id, ''), coalesce(u.dl_source, ''), coalesce(u.sender_id, ''),
	u.attrs, coalesce(u.body, ''), coalesce(u.attempts, 0), coalesce(u.max_attempts, 0), u.last_receive_at,
	coalesce(u.reason, '')
FROM (SELECT (SELECT coalesce(array_agg(message_id::text ORDER BY id), '{}') FROM red) AS moved,
	(SELECT coalesce(array_agg(attempts ORDER BY id), '{}') FROM red) AS moved_attempts,
	(SELECT coalesce(array_agg(expired ORDER BY id), '{}') FROM red) AS moved_expired,
	(SELECT count(*) FROM exp WHERE ttl) AS dropped) s
LEFT JOIN (SELECT up.*, c.priority AS cp, c.turn AS ct, c.visible_at AS cv FROM up JOIN c USING (id)) u ON true
ORDER BY array_position(@ids::bigint[], u.id), u.cp DESC, u.ct, u.cv, u.id`
}

var (
	claimStandardSQL   = compileNamed(claimSQL(false, false), claimArgs)
	claimAtMostOnceSQL = compileNamed(claimSQL(false, true), claimArgs)
	claimFifoSQL       = compileNamed(claimSQL(true, false), claimArgs)
)

// claimArgs are the names of claimSQL's arguments.
var claimArgs = []string{"now", "queue", "limit", "retention", "dlq", "source", "max_receives", "visibility",
	"shard", "ids", "dlq_fifo", "attempt", "reason_max", "hook", "dlq_name", "ttl_dl", "reason_expired", "qid", "keep"}

// namedQuery is a statement written with pgx's named arguments (@name),
// rewritten once to positional ones ($n): pgx.NamedArgs parses the
// statement's text on every call, which for the claim's was 6 % of the
// broker's CPU under a steady load.
type namedQuery struct {
	sql   string
	names []string // the name of each positional argument, in order
}

// compileNamed rewrites sql's named arguments, each of which must be one of
// names (it panics otherwise: the statements are the package's own), with
// pgx's own rewriting, so that quoting and comments are read as pgx reads
// them.
func compileNamed(sql string, names []string) namedQuery {
	na := make(pgx.NamedArgs, len(names))
	for _, n := range names {
		na[n] = n
	}
	q, args, err := na.RewriteQuery(context.Background(), nil, sql, nil)
	if err != nil {
		panic(fmt.Sprintf("postgres: rewrite named arguments: %v", err))
	}
	nq := namedQuery{sql: q, names: make([]string, len(args))}
	for i, a := range args {
		n, ok := a.(string)
		if !ok {
			panic(fmt.Sprintf("postgres: argument $%d of a named statement is not one of %v", i+1, names))
		}
		nq.names[i] = n
	}
	return nq
}

// args returns the positional arguments for values by name (a name
// missing from values is NULL, as with pgx.NamedArgs).
func (q namedQuery) args(values map[string]any) []any {
	out := make([]any, len(q.names))
	for i, n := range q.names {
		out[i] = values[n]
	}
	return out
}

// msgCols are the columns of a delivery, in scanDelivery's order, of the
// messages row alias t. attempts reads as receive_count on rows stored
// before it was kept (migration 6).
func msgCols(t string) string {
	return t + ".id, " + t + ".lease, " + t + ".receive_count, " + t + ".first_receive_at, " + t + ".sent_at, " +
		t + ".priority, " + t + ".seq, " + t + ".message_id::text AS message_id, coalesce(" + t + ".group_id, '') AS group_id, " +
		"coalesce(" + t + ".dedup_id, '') AS dedup_id, coalesce(" + t + ".dl_source, '') AS dl_source, " +
		t + ".sender_id, " + t + ".attrs, " + t + ".body, coalesce(" + t + ".attempts, " + t + ".receive_count) AS attempts, " +
		t + ".max_attempts, " + t + ".last_receive_at, coalesce(" + t + ".reason, '') AS reason"
}

// receivedCols are msgCols as a receive at now leaves the row (the columns
// the claim's UPDATE sets, computed from the old row): for an at-most-once
// claim, which deletes the row and returns it as received.
func receivedCols(t, now string) string {
	return t + ".id, " + t + ".lease + 1 AS lease, " + t + ".receive_count + 1 AS receive_count, " +
		"coalesce(" + t + ".first_receive_at, " + now + ") AS first_receive_at, " + t + ".sent_at, " +
		t + ".priority, " + t + ".seq, " + t + ".message_id::text AS message_id, coalesce(" + t + ".group_id, '') AS group_id, " +
		"coalesce(" + t + ".dedup_id, '') AS dedup_id, coalesce(" + t + ".dl_source, '') AS dl_source, " +
		t + ".sender_id, " + t + ".attrs, " + t + ".body, coalesce(" + t + ".attempts, " + t + ".receive_count) + 1 AS attempts, " +
		t + ".max_attempts, " + now + " AS last_receive_at, coalesce(" + t + ".reason, '') AS reason"
}

// scanDelivery reads the msgCols of one row into a delivery of queue q
// (the receipt is left to the caller); id is the message key.
func (b *Backend) scanDelivery(scan func(dest ...any) error, prefix []any, q queueRow) (id, lease int64, d model.Delivery, err error) {
	var (
		rc, attempts, maxAttempts int
		firstAt, lastAt           *time.Time
		sentAt                    time.Time
		prio                      int
		seq                       *int64
		attrs                     []byte
		group, dedup, src         string
	)
	dest := append(prefix, &id, &lease, &rc, &firstAt, &sentAt, &prio, &seq, &d.ID,
		&group, &dedup, &src, &d.SenderID, &attrs, &d.Body, &attempts, &maxAttempts, &lastAt, &d.FailureReason)
	if err := scan(dest...); err != nil {
		return 0, 0, d, err
	}
	d.ReceiveCount, d.SentAt, d.Priority = rc, sentAt, prio
	d.Attempts, d.MaxAttempts = attempts, maxAttempts
	d.GroupID, d.DedupID, d.DeadLetterSource = group, dedup, src
	if firstAt != nil {
		d.FirstReceiveAt = *firstAt
	}
	if lastAt != nil {
		d.LastReceiveAt = *lastAt
	}
	if seq != nil {
		d.SequenceNumber = model.FormatSequenceNumber(uint64(*seq))
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

// claimTo is where a claim of a queue moves messages past their attempts:
// the dead-letter queue (dlq nil: none, or it is gone) and its redrive
// policy; hook is the webhook outbox that gets an event per move (nil: the
// queue has no DeadLetterWebhook, or there is no outbox).
type claimTo struct {
	dlq     *queueRow
	redrive *model.RedrivePolicy
	hook    *queueRow
	// expiredDL: the queue moves its expired messages to dlq
	// (model.QueueConfig.ExpiredToDeadLetter, and dlq is set).
	expiredDL bool
}

// hookMid is the claim's @hook: the outbox's mid, or SQL NULL.
func (to claimTo) hookMid() any {
	if to.hook == nil {
		return nil
	}
	return to.hook.mid
}

// dlqName is the claim's @dlq_name (for the webhook events).
func (to claimTo) dlqName() string {
	if to.dlq == nil {
		return ""
	}
	return to.dlq.name
}

// dlqMid is the claim's @dlq: the dead-letter queue's mid, or SQL NULL.
func (to claimTo) dlqMid() any {
	if to.dlq == nil {
		return nil
	}
	return to.dlq.mid
}

// maxReceives is the claim's @max_receives (no limit without a DLQ).
func (to claimTo) maxReceives() int64 {
	if to.redrive == nil {
		return math.MaxInt32
	}
	return int64(to.redrive.MaxReceiveCount)
}

// deadLetters reports whether a ready message with the given attempts and
// own limit moves to the dead-letter queue on its next receive.
func (to claimTo) deadLetters(attempts, maxAttempts int) bool {
	return to.dlq != nil && plan.ShouldDeadLetterOnReceive(to.redrive, attempts, maxAttempts)
}

// claimTarget is where a claim of queue q moves messages past their
// attempts (read on db: the pool, or a transaction).
func (b *Backend) claimTarget(ctx context.Context, db querier, q queueRow) (claimTo, error) {
	if rp := q.cfg.Redrive; rp != nil {
		d, err := b.getQueue(ctx, db, model.QueueRef{Account: q.account, Name: rp.DeadLetterQueue})
		if err == nil && d.id != q.id {
			to := claimTo{dlq: &d, redrive: rp, expiredDL: q.cfg.ExpiredToDeadLetter()}
			return to, b.hookTarget(ctx, db, q, &to)
		}
		if err != nil && !errors.Is(err, model.ErrQueueDoesNotExist) {
			return claimTo{}, err
		}
	}
	return claimTo{}, nil
}

// movedLetter is a message a claim moved to the dead-letter queue (for the
// dead-letter log).
type movedLetter struct {
	id       string
	attempts int
	reason   string
}

// claim runs claimSQL for queue q on db (the pool, or a FIFO claim's
// transaction) and builds the deliveries, in receive order; to is
// claimTarget's answer for q, now the claim's @now (b.tnow(), or a limited
// claim's instant). ids and attemptID are the FIFO claim's rows and receive
// attempt (nil, "" on standard queues). It also returns the messages moved
// to the dead-letter queue and how many were dropped past their time to
// live.
func (b *Backend) claim(ctx context.Context, db querier, q queueRow, to claimTo, now any, n int, vis time.Duration, ids []int64, attemptID string) ([]model.Delivery, []movedLetter, int, error) {
	var err error
	sql, idArg, attempt := claimStandardSQL, any(nil), any(nil)
	switch {
	case q.cfg.Fifo:
		sql, idArg = claimFifoSQL, ids
	case q.cfg.AtMostOnce():
		sql = claimAtMostOnceSQL
	}
	if attemptID != "" {
		attempt = attemptID
	}
	var out []model.Delivery
	var moved []movedLetter
	var dropped int
	run := func() error {
		out, moved, dropped = nil, nil, 0
		rows, err := db.Query(ctx, sql.sql, sql.args(map[string]any{
			"now": now, "queue": q.mid, "limit": n, "retention": micros(q.cfg.Retention),
			"dlq": to.dlqMid(), "source": q.name, "max_receives": to.maxReceives(), "visibility": micros(vis),
			"shard": shard(), "ids": idArg, "dlq_fifo": to.dlq != nil && to.dlq.cfg.Fifo, "attempt": attempt,
			"reason_max": model.ReasonMaxAttempts, "hook": to.hookMid(), "dlq_name": to.dlqName(),
			"ttl_dl": to.expiredDL, "reason_expired": model.ReasonExpired,
			"qid": q.id, "keep": q.cfg.CompletedRetention.Microseconds(),
		})...)
		if err != nil {
			return err
		}
		defer rows.Close()
		var movedIDs []string
		var movedAttempts []int32
		var movedExpired []bool
		var droppedN int64
		first := true
		for rows.Next() {
			id, lease, d, err := b.scanDelivery(rows.Scan, []any{&movedIDs, &movedAttempts, &movedExpired, &droppedN}, q)
			if err != nil {
				return err
			}
			if first {
				first = false
				dropped = int(droppedN)
				for i, m := range movedIDs {
					reason := model.ReasonMaxAttempts
					if movedExpired[i] {
						reason = model.ReasonExpired
					}
					moved = append(moved, movedLetter{m, int(movedAttempts[i]), reason})
				}
			}
			if id < 0 {
				continue
			}
			d.Receipt = b.receipts.Encode(model.Receipt{QueueID: uint64(q.id), Key: uint64(id), Lease: uint64(lease)})
			out = append(out, d)
		}
		return rows.Err()
	}
	if _, inTx := db.(pgx.Tx); inTx {
		err = run() // inside claimFifo's or claimLimited's transaction, which retries as a whole
	} else {
		err = retry(run)
	}
	if err != nil {
		return nil, nil, 0, dbErr("receive", err)
	}
	if keep := q.cfg.CompletedRetention; dropped > 0 && keep > 0 {
		b.noteDeadline(b.clock.Now().Add(keep)) // their expired records go then (rec)
	}
	return out, moved, dropped, nil
}
