package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
)

// storedAttrs is the attrs column: the user and system message attributes.
type storedAttrs struct {
	A map[string]model.MessageAttribute `json:"a,omitempty"`
	S map[string]model.MessageAttribute `json:"s,omitempty"`
}

func encodeAttrs(e *model.SendEntry) []byte {
	if len(e.Attributes) == 0 && len(e.SystemAttributes) == 0 {
		return nil
	}
	b, _ := json.Marshal(storedAttrs{A: e.Attributes, S: e.SystemAttributes})
	return b
}

// Send implements storage.Backend: one INSERT of the valid entries whose CTE
// also adds them to a counter shard, in one autocommit statement (FIFO: one
// transaction, sendFifo).
func (b *Backend) Send(ctx context.Context, queueName model.QueueRef, entries []model.SendEntry) (_ []model.SendResult, err error) {
	defer unavailable(ctx, &err)
	if err := b.enter(ctx); err != nil {
		return nil, err
	}
	defer b.life.Done()
	s := sendOn{db: b.pool, now: b.tnow(), run: retry, cache: &b.sendCache}
	results, q, delay, err := s.send(ctx, queueName, entries)
	if err != nil || delay < 0 {
		return results, err
	}
	switch {
	case delay == 0 && q.cfg.ReceiveRate > 0:
		// Some messages are ready now, on a queue with a rate: every
		// waiting receive looks. A receive woken for n messages takes
		// what the rate lets go now, and one that was not woken would
		// sleep past the rate's next instant, which only a look arms.
		b.changed(q.id, time.Time{}, false)
	case delay == 0:
		// Some messages are ready now: at most as many as were stored.
		n := 0
		for i := range results {
			if results[i].Err == nil {
				n++
			}
		}
		b.readied(q.id, n)
	default:
		b.changed(q.id, b.clock.Now().Add(delay), false)
	}
	var ttl time.Duration // the shortest time to live stored
	for i := range results {
		if d := plan.MessageTTL(q.cfg, entries[i].Options); results[i].Err == nil && d > 0 && (ttl == 0 || d < ttl) {
			ttl = d
		}
	}
	b.noteExpiry(q, ttl)
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
	// cache, when set, holds the queue rows of earlier sends: a send to a
	// standard queue without a depth limit plans with the cached row, and
	// its insert stores nothing unless the row is unchanged (see send).
	cache *queueCache
	// txShard, when > 0, is the counter row the send adds its messages to
	// (SendTx's: see txShard); 0: one picked per statement (shard).
	txShard int
}

// shard is the counter row a statement of s adds its deltas to.
func (s sendOn) shard() int {
	if s.txShard > 0 {
		return s.txShard
	}
	return shard()
}

// queueCache is a broker's cache of queue rows by name, for sends.
type queueCache struct {
	mu   sync.Mutex
	rows map[model.QueueRef]queueRow
}

// maxCachedQueues bounds queueCache: past it the cache starts empty again.
const maxCachedQueues = 4096

func (c *queueCache) get(ref model.QueueRef) (queueRow, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	q, ok := c.rows[ref]
	return q, ok
}

func (c *queueCache) put(ref model.QueueRef, q queueRow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rows == nil || len(c.rows) >= maxCachedQueues {
		c.rows = map[model.QueueRef]queueRow{}
	}
	c.rows[ref] = q
}

func (c *queueCache) drop(ref model.QueueRef) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.rows, ref)
}

// errStaleQueue is a cached send's insert finding its queue row changed.
var errStaleQueue = errors.New("postgres: the cached queue row changed")

// send stores entries into queue ref. It returns the results, the queue,
// and the delay after which the first stored message becomes ready (-1:
// nothing stored), for the caller's wake-ups.
//
// With a cache, a send to a standard queue without a depth limit, whose
// entries carry no dedup id, is one round trip once the queue's row is cached: it plans with the cached row
// and its insert checks, in its own statement, that the queue still has
// that row (same id, message space and settings, not deleted); if not, or
// if the plan refused an entry, it drops the row and starts again from a
// fresh read.
func (s sendOn) send(ctx context.Context, ref model.QueueRef, entries []model.SendEntry) ([]model.SendResult, queueRow, time.Duration, error) {
	if s.cache != nil && !s.share && !carryDedupIDs(entries) {
		if q, ok := s.cache.get(ref); ok {
			results, q, delay, err := s.sendTo(ctx, ref, q, true, entries)
			if !errors.Is(err, errStaleQueue) {
				return results, q, delay, err
			}
			s.cache.drop(ref)
		}
	}
	q, err := readQueue(ctx, s.db, ref, s.share)
	if err != nil {
		return nil, q, -1, err
	}
	results, q, delay, err := s.sendTo(ctx, ref, q, false, entries)
	if s.cache != nil && !s.share && err == nil && q.sendCacheable() {
		s.cache.put(ref, q)
	}
	return results, q, delay, err
}

// sendCacheable says whether a send may plan with q's row from the cache:
// a FIFO queue's send reads its deduplication and sequence state, and a
// queue with a depth limit its depth, so either reads its row every time.
func (q queueRow) sendCacheable() bool {
	return !q.cfg.Fifo && q.cfg.MaxDepth == 0 && q.cfg.LowPriorityMaxDepth == 0
}

// sendTo is send to queue q, read by the caller; cached says q came from
// the cache: the send then fails with errStaleQueue, storing nothing, when
// it cannot use it (a FIFO queue or a depth limit, an entry the plan
// refused, or a row changed since).
func (s sendOn) sendTo(ctx context.Context, ref model.QueueRef, q queueRow, cached bool, entries []model.SendEntry) ([]model.SendResult, queueRow, time.Duration, error) {
	if cached && !q.sendCacheable() {
		return nil, q, -1, errStaleQueue
	}
	var err error
	var depth int64
	if q.cfg.MaxDepth > 0 || q.cfg.LowPriorityMaxDepth > 0 {
		// The depth as of this read: concurrent sends (on any broker) read
		// the same one, so the limit may be passed by the batches in flight
		// at once (docs/postgres.md).
		if depth, err = readDepth(ctx, s.db, q.mid); err != nil {
			return nil, q, -1, err
		}
	}
	plans, err := plan.Send(q.cfg, ref.Name, depth, entries)
	if de := (*model.DepthError)(nil); errors.As(err, &de) {
		// The messages whose time to live passed and that no lease holds
		// are gone, though no one may have removed them yet (ttl.go): they
		// are not counted. Looked for only when the depth refuses a send.
		// The depth is read again beside them, from one snapshot (a
		// sweep may have removed some since the read above).
		fresh, due, derr := readExpiredDue(ctx, s.db, s.now, q.mid)
		if derr != nil {
			return nil, q, -1, derr
		}
		if fresh-due != depth {
			plans, err = plan.Send(q.cfg, ref.Name, fresh-due, entries)
		}
	}
	if err != nil {
		if cached {
			return nil, q, -1, errStaleQueue // judged on fresh settings
		}
		return nil, q, -1, err
	}
	if cached {
		for i := range plans {
			if plans[i].Err != nil {
				return nil, q, -1, errStaleQueue
			}
		}
	}
	results := make([]model.SendResult, len(entries))
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
	for i := range plans {
		if plans[i].Err == nil && plans[i].DedupKey != "" {
			// Some entries carry a dedup id (dedup.go): a transaction, on
			// a row read fresh (send does not use the cache for them).
			if cached {
				return nil, q, -1, errStaleQueue
			}
			delay, err := s.sendDeduped(ctx, q, entries, plans, results)
			if err != nil {
				return nil, q, -1, dbErr("send", err)
			}
			return results, q, delay, nil
		}
	}
	stored, values, minDelay, err := s.insertStandard(ctx, q, cached, entries, plans, results, nil)
	if err != nil {
		return nil, q, -1, dbErr("send", err)
	}
	if stored < values {
		return nil, q, -1, errStaleQueue // only a guard stores nothing
	}
	return results, q, minDelay, nil
}

// insertStandard stores the valid entries of a send to standard queue q but
// those skip marks (nil: none), in one statement on s.db, run by s.run: an
// INSERT whose CTE also adds them to a counter shard. It returns how many
// rows it stored out of the values it sent (fewer only when cached and the
// guard found the row changed), and the delay after which the first of them
// becomes ready (-1: nothing to store). An entry with a dedup id (only on
// sendDeduped's path, which passes skip) stores it in dedup_id; the
// statement of a send without one does not name the column.
func (s sendOn) insertStandard(ctx context.Context, q queueRow, cached bool, entries []model.SendEntry, plans []plan.SendPlan, results []model.SendResult, skip []bool) (stored, values int, minDelay time.Duration, err error) {
	args := []any{s.now, q.mid, s.shard()}
	var rows []string
	var turns sendTurns
	minDelay = -1
	withDedup := skip != nil
	// withTTL: some entry has a time to live (stored as expires_at); the
	// statement of a send without one does not name the column.
	withTTL := false
	for i := range plans {
		withTTL = withTTL || (plans[i].Err == nil && plans[i].TTL > 0)
	}
	for i := range entries {
		e := &entries[i]
		if plans[i].Err != nil || (skip != nil && skip[i]) {
			continue
		}
		delay := plans[i].Delay
		if minDelay < 0 || delay < minDelay {
			minDelay = delay
		}
		slot, nth := turns.add(e.GroupID, plans[i].Priority)
		n := len(args)
		// (delay µs, priority, message id, sender, attrs, body, group, max
		// attempts, tenant slot, n-th of its tenant and level[, dedup id])
		row := fmt.Sprintf("($%d::bigint, $%d::smallint, $%d::uuid, $%d::text, $%d::bytea, $%d::text, $%d::text, $%d::integer, %d, %d",
			n+1, n+2, n+3, n+4, n+5, n+6, n+7, n+8, slot, nth)
		var group any
		if e.GroupID != "" {
			group = e.GroupID
		}
		args = append(args, micros(delay), plans[i].Priority, results[i].MessageID, e.SenderID, encodeAttrs(e), e.Body, group, plans[i].MaxAttempts)
		if withDedup {
			var dedup any
			if plans[i].DedupID != "" {
				dedup = plans[i].DedupID
			}
			row += fmt.Sprintf(", $%d::text", len(args)+1)
			args = append(args, dedup)
		}
		if withTTL {
			row += fmt.Sprintf(", $%d::bigint", len(args)+1)
			args = append(args, micros(plans[i].TTL))
		}
		rows = append(rows, row+")")
	}
	if len(rows) == 0 {
		return 0, 0, -1, nil
	}
	// Each message takes its fair-queue turn (fair.go): the n-th message of
	// a tenant and level in this batch takes max(last[p][T], cursor[p]) + n.
	turn := turns.sql("$2::bigint", "v", &args)
	// guard: on a cached row, the queue must still have it (the
	// statement's snapshot, like a fresh read's).
	guard := "true"
	if cached {
		args = append(args, q.id, q.rawCfg)
		guard = fmt.Sprintf("EXISTS (SELECT 1 FROM queues WHERE id = $%d AND mid = $2 AND NOT deleted AND config = $%d::jsonb)", len(args)-1, len(args))
	}
	cols, dedupCol, ttlCol, ttlVal := "delay, priority, message_id, sender_id, attrs, body, group_id, max_attempts, slot, n", "", "", ""
	if withDedup {
		cols, dedupCol = cols+", dedup_id", ", dedup_id"
	}
	if withTTL {
		// The expiry: the send's instant plus the time to live (ttl.go).
		cols, ttlCol, ttlVal = cols+", ttl", ", expires_at", ", CASE WHEN ttl > 0 THEN "+nowSQL+" + ttl * interval '1 microsecond' END"
	}
	sql := `WITH v (` + cols + `) AS (VALUES ` + strings.Join(rows, ", ") + `),
		ins AS (
			INSERT INTO messages (queue_id, state, visible_at, sent_at, priority, message_id, sender_id, attrs, body, group_id, max_attempts, turn` + dedupCol + ttlCol + `)
			SELECT $2, CASE WHEN delay > 0 THEN 'd' ELSE 'r' END::"char",
				` + nowSQL + ` + delay * interval '1 microsecond', ` + nowSQL + `,
				priority, message_id, sender_id, attrs, body, group_id, max_attempts, ` + turn + dedupCol + ttlVal + `
			FROM v WHERE ` + guard + ` RETURNING state),
		cnt AS (INSERT INTO counts AS c (queue_id, shard, ready, delayed)
		SELECT $2, $3, count(*) FILTER (WHERE state = 'r'), count(*) FILTER (WHERE state = 'd') FROM ins HAVING count(*) > 0
		ON CONFLICT (queue_id, shard) DO UPDATE SET ready = c.ready + excluded.ready, delayed = c.delayed + excluded.delayed)
		SELECT count(*) FROM ins`
	if err := s.run(func() error { return s.db.QueryRow(ctx, sql, args...).Scan(&stored) }); err != nil {
		return 0, 0, -1, err
	}
	return stored, len(rows), minDelay, nil
}

// leaseOf resolves a receipt of queue qid to the message row id and lease
// version it names, or the outcome when it can name no lease of the queue:
// LeaseOtherQueue for another queue's receipt, LeaseStale for one no row can
// match (lease 0, or numbers past bigint).
func leaseOf(qid int64, r model.Receipt) (key, lease int64, o model.LeaseOutcome, ok bool) {
	switch {
	case r.QueueID != uint64(qid):
		return 0, 0, model.LeaseOtherQueue, false
	case r.Lease == 0 || r.Key >= 1<<63 || r.Lease >= 1<<63:
		return 0, 0, model.LeaseStale, false
	}
	return int64(r.Key), int64(r.Lease), model.LeaseApplied, true
}

// deleteSQL is the deletion of the rows named by the CTE r (id, lease) of
// queue mid, whose lease version matches (a stale receipt matches
// nothing), as CTEs (d, inv, cnt) of a statement whose $1 is the instant
// (nowSQL). fifo and policy are the SQL of whether the queue is FIFO and
// whether it is a standard queue with a policy; shard is the counter shard.
//
// On a FIFO queue only a live lease deletes: an expired one has lost its
// group lock. A message backing off or snoozed ('d') is not under the
// receipt's lease any more: stale. On a standard queue with a policy an
// ended lease is not deleted by this statement: it is planned first
// (plan.LeaseExpiry; see Delete), since its message may be backing
// off or dead-lettered by now. Deleting a leased message invalidates the
// receive attempt that returned it. d returns the deleted rows' ids. On a
// queue that keeps completed records (keep, its CompletedRetention in
// microseconds, > 0; qid its queue id), each deleted row leaves one in
// message_records, with its receipt's result (r.result).
func deleteSQL(mid, fifo, policy, shard, qid, keep string) string {
	return `d AS (DELETE FROM messages m USING r WHERE m.id = r.id AND m.queue_id = ` + mid + ` AND m.lease = r.lease
			AND m.state <> 'd' AND (NOT ` + fifo + ` OR (m.state = 'i' AND m.visible_at > ` + nowSQL + `))
			AND NOT (` + policy + ` AND m.state = 'i' AND m.visible_at <= ` + nowSQL + `)
			RETURNING m.id, m.state, m.attempt, m.lease, m.message_id, coalesce(m.attempts, m.receive_count) AS attempts, m.reason),
		inv AS (UPDATE attempts SET invalid = true
			WHERE queue_id = ` + mid + ` AND attempt_id IN (SELECT attempt FROM d WHERE attempt IS NOT NULL)),
		rec AS (INSERT INTO message_records AS x (queue_id, message_id, state, at, due, attempts, result, reason)
			SELECT DISTINCT ON (d.id) ` + qid + `, d.message_id, 'c', ` + nowSQL + `, ` + nowSQL + ` + ` + keep + ` * interval '1 microsecond',
				d.attempts, r.result, d.reason
			FROM d JOIN r ON r.id = d.id AND r.lease = d.lease WHERE ` + keep + ` > 0 ORDER BY d.id, r.result IS NULL
			` + recordConflictSQL + `),
		cnt AS (` + countsFromStates("d", mid, shard) + `)`
}

// deleteByMidSQL deletes the rows $3 with lease versions $4 of queue mid $2
// (deleteSQL; $5: FIFO, $7: a standard queue with a policy, $6 the shard)
// and returns their ids.
var deleteByMidSQL = `WITH r (id, lease, result) AS (SELECT * FROM unnest($3::bigint[], $4::bigint[], $8::text[]) ORDER BY 1),
		` + deleteSQL("$2", "$5", "$7", "$6", "$9::bigint", "$10::bigint") + `
		SELECT id FROM d`

// deleteByRefSQL reads the live queue of account $2 and name $7 and deletes
// its rows $3 with lease versions $4, of those whose receipts name queue id
// $5 (deleteSQL; $6 the shard), in one statement: one round trip. Its one
// row (none when the queue does not exist) is the queue's columns and the
// ids and lease versions of the deleted rows (two arrays in one order).
var deleteByRefSQL = `WITH q AS (
			SELECT ` + queueCols + `, coalesce(config->>'Fifo', '') = 'true' AS fifo, ` + storedPolicySQL + ` AS policy
			FROM queues WHERE account = $2 AND name = $7 AND NOT deleted),
		r (id, lease, result) AS (SELECT u.id, u.lease, u.result FROM unnest($3::bigint[], $4::bigint[], $5::bigint[], $8::text[]) u (id, lease, qid, result)
			WHERE u.qid = (SELECT id FROM q) ORDER BY 1),
		` + deleteSQL("(SELECT mid FROM q)", "(SELECT fifo FROM q)", "(SELECT policy AND NOT fifo FROM q)", "$6",
	"(SELECT id FROM q)", "(SELECT coalesce((config->>'CompletedRetention')::bigint, 0) / 1000 FROM q)") + `
		SELECT ` + queueCols + `, (SELECT coalesce(array_agg(id ORDER BY id, lease), '{}') FROM d),
			(SELECT coalesce(array_agg(lease ORDER BY id, lease), '{}') FROM d) FROM q`

// Delete implements storage.Backend: one DELETE of the rows whose lease
// version matches the receipts (a stale receipt matches nothing),
// subtracting them from the counters, in the statement that reads the queue
// row (deleteByRefSQL).
func (b *Backend) Delete(ctx context.Context, queueName model.QueueRef, receipts []model.Receipt, results []*string) (_ []model.LeaseOutcome, err error) {
	defer unavailable(ctx, &err)
	if err := b.enter(ctx); err != nil {
		return nil, err
	}
	defer b.life.Done()
	// The receipts some row may match, with the queue they name (the
	// statement keeps those of the queue it reads); leaseOf sorts out the
	// others once the queue is known.
	var qids, rkeys, rleases []int64
	var rresults []*string
	resultOf := func(i int) *string {
		if results == nil {
			return nil
		}
		return results[i]
	}
	for i, r := range receipts {
		if r.QueueID < 1<<63 {
			if key, lease, _, ok := leaseOf(int64(r.QueueID), r); ok {
				qids, rkeys, rleases = append(qids, int64(r.QueueID)), append(rkeys, key), append(rleases, lease)
				rresults = append(rresults, resultOf(i))
			}
		}
	}
	job := &deleteJob{ref: queueName, qids: qids, keys: rkeys, leases: rleases, results: rresults}
	if err := b.deleteCombiner.do(ctx, queueName, job, b.deleteByRef); err != nil {
		return nil, dbErr("delete", err)
	}
	if !job.found {
		return nil, model.QueueNotFoundError()
	}
	q := job.q
	// The rows this call's receipts deleted (the statement may have served
	// other calls' too).
	var gone []int64
	for _, g := range job.gone {
		for j := range rkeys {
			if rkeys[j] == g.id && rleases[j] == g.lease && qids[j] == q.id {
				gone = append(gone, g.id)
				break
			}
		}
	}
	out := make([]model.LeaseOutcome, len(receipts))
	var keys, leases []int64
	var keyResults []*string
	var at []int // index in receipts of each key
	for i, r := range receipts {
		key, lease, o, ok := leaseOf(q.id, r)
		out[i] = o
		if ok {
			keys, leases, at = append(keys, key), append(leases, lease), append(at, i)
			keyResults = append(keyResults, resultOf(i))
		}
	}
	if len(keys) == 0 {
		return out, nil
	}
	policy := hasRetryOrRedrive(q.cfg)
	del := func(keys, leases []int64, results []*string) ([]int64, error) {
		var gone []int64
		err := retry(func() error {
			rows, err := b.pool.Query(ctx, deleteByMidSQL, b.tnow(), q.mid, keys, leases, q.cfg.Fifo, shard(), policy && !q.cfg.Fifo,
				results, q.id, q.cfg.CompletedRetention.Microseconds())
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
	if policy && len(gone) < len(keys) {
		// Some receipts may name ended leases: plan them (as a receive
		// would), then delete what is still deletable.
		moved, _, err := b.promote(ctx, q)
		if err != nil {
			return nil, err
		}
		b.deadLettered(ctx, q, moved)
		if !q.cfg.Fifo {
			var rk, rl []int64
			var rr []*string
			for j, key := range keys {
				if !slices.Contains(gone, key) {
					rk, rl, rr = append(rk, key), append(rl, leases[j]), append(rr, keyResults[j])
				}
			}
			more, err := del(rk, rl, rr)
			if q.cfg.MaxInFlight > 0 && (len(more) > 0 || err != nil) {
				// Room under the queue's MaxInFlight: its waiting
				// receives, on every broker, look again (after an
				// error too: the statement may have committed).
				b.changed(q.id, time.Time{}, false)
			}
			if err != nil {
				return nil, err
			}
			gone = append(gone, more...)
		}
	}
	if q.cfg.CompletedRetention > 0 && len(gone) > 0 {
		b.noteDeadline(b.clock.Now().Add(q.cfg.CompletedRetention)) // the records' due time
	}
	for j, key := range keys {
		if !slices.Contains(gone, key) {
			out[at[j]] = model.LeaseStale
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
				out[at[j]] = model.LeaseEnded
			}
		}
	}
	return out, nil
}

// deleteJob is one Delete's first statement (deleteByRefSQL): the
// receipts some row may match, and what the statement found: the queue
// (found false: it does not exist) and the rows deleted, by any call of
// the combined statement.
type deleteJob struct {
	ref                model.QueueRef
	qids, keys, leases []int64
	results            []*string // the acks' results, one per key

	found bool
	q     queueRow
	gone  []leaseKey
}

// maxCombinedDeletes caps the deletes combined into one statement.
const maxCombinedDeletes = 64

// leaseKey is a message row and a lease version of it.
type leaseKey struct{ id, lease int64 }

// deleteByRef runs deleteByRefSQL for the receipts of jobs, Delete calls
// on one queue, in one statement.
func (b *Backend) deleteByRef(ctx context.Context, jobs []*deleteJob) error {
	var qids, keys, leases []int64
	var results []*string
	for _, j := range jobs {
		qids, keys, leases = append(qids, j.qids...), append(keys, j.keys...), append(leases, j.leases...)
		results = append(results, j.results...)
	}
	var q queueRow
	var goneIDs, goneLeases []int64
	err := retry(func() error {
		var err error
		q, err = scanQueueWith(b.pool.QueryRow(ctx, deleteByRefSQL, b.tnow(), jobs[0].ref.Account, keys, leases, qids,
			shard(), jobs[0].ref.Name, results), &goneIDs, &goneLeases)
		return err
	})
	found := true
	if errors.Is(err, pgx.ErrNoRows) {
		found, err = false, nil
	}
	if err != nil {
		return err
	}
	gone := make([]leaseKey, len(goneIDs))
	for i := range goneIDs {
		gone[i] = leaseKey{goneIDs[i], goneLeases[i]}
	}
	for _, j := range jobs {
		j.found, j.q, j.gone = found, q, gone
	}
	if found && len(gone) > 0 && (q.cfg.Fifo || q.cfg.MaxInFlight > 0) {
		// Group locks may have ended, or there is room under the queue's
		// MaxInFlight: its waiting receives, on every broker, look
		// again. Here, not in each Delete call: a call cancelled while
		// its batch ran has left, and its rows are deleted all the same
		// (TestMaxInFlightCancelledDeleteWakes).
		b.changed(q.id, time.Time{}, false)
	}
	return nil
}

// readDepth is queue mid's depth (model.QueueStats.Depth): the sum of its
// counters, every stored message whatever its state.
func readDepth(ctx context.Context, db querier, mid int64) (int64, error) {
	var d int64
	if err := db.QueryRow(ctx, `SELECT coalesce(sum(ready + inflight + delayed), 0) FROM counts WHERE queue_id = $1`, mid).Scan(&d); err != nil {
		return 0, dbErr("read depth", err)
	}
	return d, nil
}

// addCounts adds deltas to counter shard sh of queue qid (last in its
// transaction: see the package comment).
func addCounts(ctx context.Context, tx pgx.Tx, qid int64, sh int, ready, inflight, delayed int64) error {
	_, err := tx.Exec(ctx, `INSERT INTO counts AS c (queue_id, shard, ready, inflight, delayed) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (queue_id, shard) DO UPDATE SET ready = c.ready + excluded.ready,
			inflight = c.inflight + excluded.inflight, delayed = c.delayed + excluded.delayed`,
		qid, sh, ready, inflight, delayed)
	return err
}

// promoteLimit bounds the messages one promotion moves (it runs again on the
// next receive or GetQueue).
const promoteLimit = 10000

// promoteSQL is the promotion of one queue's due messages, as CTEs (due, up,
// ins) of a statement whose $1 is the instant (nowSQL), $3 the counter
// shard, $4 promoteLimit and $5 model.ReasonLeaseExpired: its delayed and
// in-flight messages whose visible_at has passed become ready (an in-flight
// one so promoted failed by its lease's end, at its visible_at:
// plan.LeaseExpiry's FateVisible), and the counters move with them. mid is the SQL of the
// queue's mid; policy the SQL of whether it has a RetryPolicy or
// RedrivePolicy, whose ended leases are not promoted here but planned one by
// one (expireLeases). Rows past their time to live are not promoted either
// (expireDue removes them: ttl.go). Rows locked by another transaction are
// skipped (it is changing them). up returns the old state of each promoted
// row.
func promoteSQL(mid, policy string) string {
	return `due AS (
			SELECT id, state FROM messages
			WHERE queue_id = ` + mid + ` AND state <> 'r' AND visible_at <= ` + nowSQL + ` AND (NOT ` + policy + ` OR state = 'd')
				AND NOT coalesce(expires_at <= ` + nowSQL + `, false)
			ORDER BY visible_at LIMIT $4 FOR UPDATE SKIP LOCKED),
		up AS (UPDATE messages m SET state = 'r', reason = CASE WHEN due.state = 'i' THEN $5 ELSE m.reason END,
				failures = CASE WHEN due.state = 'i' THEN ` + pushFailureSQL("m.failures", "$5", "m.visible_at") + ` ELSE m.failures END
			FROM due WHERE m.id = due.id RETURNING due.state AS old),
		ins AS (INSERT INTO counts AS c (queue_id, shard, ready, inflight, delayed)
			SELECT ` + mid + `, $3, count(*), -count(*) FILTER (WHERE old = 'i'), -count(*) FILTER (WHERE old = 'd')
			FROM up HAVING count(*) > 0
			ON CONFLICT (queue_id, shard) DO UPDATE SET ready = c.ready + excluded.ready,
				inflight = c.inflight + excluded.inflight, delayed = c.delayed + excluded.delayed)`
}

// inflightAfterSQL is the in-flight count of queue mid after promoteSQL's
// statement: the counters as its snapshot has them, less the leases it
// ended (a statement does not see its own CTEs' changes).
func inflightAfterSQL(mid string) string {
	return `(SELECT coalesce(sum(inflight), 0) FROM counts WHERE queue_id = ` + mid + `)
			- (SELECT count(*) FROM up WHERE old = 'i')`
}

// promote makes queue q's due messages ready (promoteSQL) in one statement,
// then, on a queue with a RetryPolicy or RedrivePolicy, plans its ended
// leases (expireLeases). It returns the messages moved to the dead-letter
// queue, and the queue's in-flight count after the promotion, read by the
// same statement, so that a receive needs no round trip of its own for the
// in-flight cap; -1 when expireLeases ran after it (the count may have
// changed since).
func (b *Backend) promote(ctx context.Context, q queueRow) ([]movedLetter, int64, error) {
	policy := hasRetryOrRedrive(q.cfg)
	var inflight int64
	err := retry(func() error {
		return b.pool.QueryRow(ctx, `WITH `+promoteSQL("$2", "$6")+`
		SELECT `+inflightAfterSQL("$2"),
			b.tnow(), q.mid, shard(), promoteLimit, model.ReasonLeaseExpired, policy).Scan(&inflight)
	})
	if err != nil {
		return nil, 0, dbErr("promote", err)
	}
	if !policy {
		return nil, inflight, nil
	}
	moved, _, err := b.expireLeases(ctx, q)
	return moved, -1, err
}

// looked is what look read and did besides the queue row.
type looked struct {
	// inflight is the queue's in-flight count after the promotion (see
	// promote); -1 when ended leases were planned after it.
	inflight int64
	// moved are the messages the planning of ended leases, and the
	// expiries, moved to the dead-letter queue.
	moved []movedLetter
	// dlq and hook are the queue's dead-letter queue and the webhook
	// outbox, when they exist and the queue names them (see lookSQL).
	dlq, hook *queueRow
}

// storedPolicySQL is hasRetryOrRedrive spelled on the config column of a queues
// row: model.QueueConfig's Retry and Redrive are JSON objects when set,
// null or absent when not.
const storedPolicySQL = "(coalesce(jsonb_typeof(config->'Retry'), '') = 'object' OR coalesce(jsonb_typeof(config->'Redrive'), '') = 'object')"

// lookSQL reads a live queue by account $2 and name $6 and promotes its due
// messages (promoteSQL) in one statement, one round trip: the start of a
// receive attempt and of a GetQueue. Its first row (none when the queue
// does not exist), of kind 0 (the last column), is the queue's columns, its in-flight count
// after the promotion, on a queue with a policy, whether some of its
// leases have ended (planned by expireLeases after it), and whether some of
// its messages' times to live passed (expired by expireDue after that). The rows after it
// are the queues a claim may move messages to (claimTarget): kind 1, the
// dead-letter queue its RedrivePolicy names, if it exists; kind 2, when the
// queue also has a DeadLetterWebhook, the webhook outbox (account $7, name
// $8), if it exists.
var lookSQL = `WITH q AS (
			SELECT ` + queueCols + `, ` + storedPolicySQL + ` AS policy
			FROM queues WHERE account = $2 AND name = $6 AND NOT deleted),
		` + promoteSQL("(SELECT mid FROM q)", "(SELECT policy FROM q)") + `
		SELECT ` + queueCols + `, ` + inflightAfterSQL("q.mid") + `,
			q.policy AND EXISTS (SELECT 1 FROM messages WHERE queue_id = q.mid AND state = 'i' AND visible_at <= ` + nowSQL + `),
			` + ttlDueSQL("q.mid") + `,
			0 AS kind
		FROM q
		UNION ALL
		SELECT ` + queueCols + `, 0, false, false, 1 FROM queues
		WHERE account = (SELECT account FROM q) AND name = (SELECT config->'Redrive'->>'DeadLetterQueue' FROM q) AND NOT deleted
		UNION ALL
		SELECT ` + queueCols + `, 0, false, false, 2 FROM queues
		WHERE account = $7 AND name = $8 AND NOT deleted
			AND (SELECT coalesce(config->>'DeadLetterWebhook', '') <> '' AND jsonb_typeof(config->'Redrive') = 'object' FROM q)
		ORDER BY kind`

// look reads queue ref (ErrQueueDoesNotExist if none) and promotes its due
// messages in one statement (lookSQL); on a queue with a policy whose leases
// ended, it then plans them (expireLeases); on a queue with messages past
// their time to live, it then expires them (expireDue).
func (b *Backend) look(ctx context.Context, ref model.QueueRef) (queueRow, looked, error) {
	var q queueRow
	var lk looked
	var ended, ttlDue, found bool
	err := retry(func() error {
		q, lk, ended, ttlDue, found = queueRow{}, looked{}, false, false, false
		rows, err := b.pool.Query(ctx, lookSQL, b.tnow(), ref.Account, shard(), promoteLimit,
			model.ReasonLeaseExpired, ref.Name, plan.WebhookOutbox().Account, plan.WebhookOutbox().Name)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var kind int
			var inflight int64
			var e, t bool
			r, err := scanQueueWith(rows, &inflight, &e, &t, &kind)
			if err != nil {
				return err
			}
			switch kind {
			case 0:
				q, lk.inflight, ended, ttlDue, found = r, inflight, e, t, true
			case 1:
				lk.dlq = &r
			case 2:
				lk.hook = &r
			}
		}
		return rows.Err()
	})
	if err != nil {
		return q, lk, dbErr("read queue", err)
	}
	if !found {
		return q, lk, model.QueueNotFoundError()
	}
	if ended {
		lk.inflight = -1
		if lk.moved, _, err = b.expireEnded(ctx, q); err != nil {
			return q, lk, err
		}
	}
	if ttlDue {
		lk.inflight = -1
		moved, _, err := b.expireDue(ctx, q)
		if err != nil {
			return q, lk, err
		}
		lk.moved = append(lk.moved, moved...)
	}
	return q, lk, nil
}

// target is claimTarget's answer for queue q from the rows look read with
// it.
func (lk looked) target(q queueRow) claimTo {
	rp := q.cfg.Redrive
	if rp == nil || lk.dlq == nil || lk.dlq.id == q.id || lk.dlq.name != rp.DeadLetterQueue {
		return claimTo{}
	}
	to := claimTo{dlq: lk.dlq, redrive: rp, expiredDL: q.cfg.ExpiredToDeadLetter()}
	if q.cfg.DeadLetterWebhook != "" {
		to.hook = lk.hook
	}
	return to
}
