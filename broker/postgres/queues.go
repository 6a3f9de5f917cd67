package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
)

// countShards is the number of counter rows per queue that the brokers'
// statements add to (shard), and as many more that transactional sends
// add to (txShard); see the package comment.
const countShards = 16

// queueRow is a live queue as read from the queues table.
type queueRow struct {
	id int64
	// mid keys the queue's content (messages, counts, groups, dedup,
	// attempts); a purge replaces it (see PurgeQueue).
	mid        int64
	account    string
	name       string
	cfg        model.QueueConfig
	tags       map[string]string
	createdAt  time.Time
	modifiedAt time.Time
	lastPurge  *time.Time
	// rawCfg is the config column as read (the send cache's check).
	rawCfg []byte
}

const queueCols = "id, mid, name, config, tags, created_at, modified_at, last_purge, account"

func scanQueue(row pgx.Row) (queueRow, error) { return scanQueueWith(row) }

// scanQueueWith reads the queueCols of row, then the columns after them
// into more.
func scanQueueWith(row pgx.Row, more ...any) (queueRow, error) {
	var q queueRow
	var cfg, tags []byte
	dest := append([]any{&q.id, &q.mid, &q.name, &cfg, &tags, &q.createdAt, &q.modifiedAt, &q.lastPurge, &q.account}, more...)
	if err := row.Scan(dest...); err != nil {
		return q, err
	}
	if err := json.Unmarshal(cfg, &q.cfg); err != nil {
		return q, err
	}
	q.rawCfg = cfg
	if err := json.Unmarshal(tags, &q.tags); err != nil {
		return q, err
	}
	return q, nil
}

func (q queueRow) queue() model.Queue {
	cfg, _ := model.ApplyAttributes(q.cfg, nil) // a deep copy, with non-nil maps
	tags := make(map[string]string, len(q.tags))
	for k, v := range q.tags {
		tags[k] = v
	}
	return model.Queue{ID: uint64(q.id), Account: q.account, Name: q.name, Config: cfg, Tags: tags,
		CreatedAt: q.createdAt, ModifiedAt: q.modifiedAt}
}

// getQueue reads a live queue by name (ErrQueueDoesNotExist if none).
func (b *Backend) getQueue(ctx context.Context, q querier, name model.QueueRef) (queueRow, error) {
	return readQueue(ctx, q, name, false)
}

// readQueue reads a live queue by name (ErrQueueDoesNotExist if none); with
// share, FOR SHARE: the row is then locked against purges, deletions and
// changes until the transaction ends.
func readQueue(ctx context.Context, q querier, name model.QueueRef, share bool) (queueRow, error) {
	sql := "SELECT " + queueCols + " FROM queues WHERE " + byRef + " AND NOT deleted"
	if share {
		sql += " FOR SHARE"
	}
	row, err := scanQueue(q.QueryRow(ctx, sql, name.Account, name.Name))
	if errors.Is(err, pgx.ErrNoRows) {
		return row, model.QueueNotFoundError()
	}
	if err != nil {
		return row, dbErr("read queue", err)
	}
	return row, nil
}

// byRef selects the queue rows of account $1 and name $2.
const byRef = "account = $1 AND name = $2"

// querier is what pgxpool.Pool, pgx.Conn and pgx.Tx have in common.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// CreateQueue implements storage.Backend. Two brokers creating the same name at
// once: the unique index on live names lets one insert win; the other reads
// the winner and returns it (created == false).
func (b *Backend) CreateQueue(ctx context.Context, spec storage.QueueSpec) (_ model.Queue, _ bool, err error) {
	defer unavailable(ctx, &err)
	if err := b.enter(ctx); err != nil {
		return model.Queue{}, false, err
	}
	defer b.life.Done()
	name := spec.QueueRef
	cj, _ := json.Marshal(spec.Config)
	tags := spec.Tags
	if tags == nil {
		tags = map[string]string{}
	}
	tj, _ := json.Marshal(tags)
	for attempt := 0; attempt < 3; attempt++ {
		existing, err := b.getQueue(ctx, b.pool, name)
		if err == nil {
			return existing.queue(), false, nil
		}
		if !errors.Is(err, model.ErrQueueDoesNotExist) {
			return model.Queue{}, false, err
		}
		row, err := scanQueue(b.pool.QueryRow(ctx, `
			INSERT INTO queues (account, name, config, tags, created_at, modified_at)
			VALUES ($2, $3, $4, $5, `+nowSQL+`, `+nowSQL+`)
			ON CONFLICT (account, name) WHERE NOT deleted DO NOTHING
			RETURNING `+queueCols, b.tnow(), name.Account, name.Name, cj, tj))
		if errors.Is(err, pgx.ErrNoRows) {
			continue // created meanwhile by another broker: return it
		}
		if err != nil {
			return model.Queue{}, false, dbErr("create queue", err)
		}
		b.log.Info("queue created", "queue", name, "queue_id", row.id)
		return row.queue(), true, nil
	}
	return model.Queue{}, false, errors.New("postgres: create queue: the name kept being created and deleted concurrently")
}

// GetQueue implements storage.Backend: the counters' sums, after promoting the
// queue's due delayed and in-flight messages (amortised: each message is
// promoted once; nothing is scanned when nothing is due).
func (b *Backend) GetQueue(ctx context.Context, name model.QueueRef) (_ model.QueueInfo, err error) {
	defer unavailable(ctx, &err)
	if err := b.enter(ctx); err != nil {
		return model.QueueInfo{}, err
	}
	defer b.life.Done()
	q, lk, err := b.look(ctx, name)
	if err != nil {
		return model.QueueInfo{}, err
	}
	b.deadLettered(ctx, q, lk.moved)
	info := model.QueueInfo{Queue: q.queue()}
	// OldestSentAt: the first live entry of messages_age (messages past
	// retention wait for the sweeper and are not counted as oldest).
	// OldestVisibleSince: the first entry of messages_ready_age.
	var oldest, visibleSince *time.Time
	err = b.pool.QueryRow(ctx, `SELECT coalesce(sum(ready), 0), coalesce(sum(inflight), 0), coalesce(sum(delayed), 0),
			(SELECT min(sent_at) FROM messages WHERE queue_id = $2 AND sent_at > `+nowSQL+` - $3 * interval '1 microsecond'),
			(SELECT min(visible_at) FROM messages WHERE queue_id = $2 AND state = 'r')
		FROM counts WHERE queue_id = $2`, b.tnow(), q.mid, micros(q.cfg.Retention)).Scan(&info.Stats.Visible, &info.Stats.InFlight, &info.Stats.Delayed, &oldest, &visibleSince)
	if err != nil {
		return model.QueueInfo{}, dbErr("read counts", err)
	}
	if oldest != nil {
		info.Stats.OldestSentAt = *oldest
	}
	if visibleSince != nil {
		info.Stats.OldestVisibleSince = *visibleSince
	}
	return info, nil
}

// ListQueues implements storage.Backend. Names sort bytewise (COLLATE "C").
func (b *Backend) ListQueues(ctx context.Context, account, prefix, after string, limit int) (_ []model.Queue, err error) {
	defer unavailable(ctx, &err)
	if err := b.enter(ctx); err != nil {
		return nil, err
	}
	defer b.life.Done()
	lim := any(nil) // SQL NULL: no limit
	if limit > 0 {
		lim = limit
	}
	rows, err := b.pool.Query(ctx, "SELECT "+queueCols+` FROM queues
		WHERE NOT deleted AND account = $1 AND starts_with(name, $2) AND name > $3 ORDER BY name LIMIT $4`, account, prefix, after, lim)
	if err != nil {
		return nil, dbErr("list queues", err)
	}
	defer rows.Close()
	var out []model.Queue
	for rows.Next() {
		q, err := scanQueue(rows)
		if err != nil {
			return nil, dbErr("list queues", err)
		}
		out = append(out, q.queue())
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("list queues", err)
	}
	return out, nil
}

// UpdateQueue implements storage.Backend: the queue row is locked (FOR
// UPDATE), edited and written back (config, tags, and modified_at = now when
// u.Modified) in one transaction, so concurrent updates never lose one
// another's change.
func (b *Backend) UpdateQueue(ctx context.Context, name model.QueueRef, change model.QueueChange) (err error) {
	defer unavailable(ctx, &err)
	if err := b.enter(ctx); err != nil {
		return err
	}
	defer b.life.Done()
	retentionChanged, qid := false, int64(0)
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		q, err := scanQueue(tx.QueryRow(ctx, "SELECT "+queueCols+" FROM queues WHERE "+byRef+" AND NOT deleted FOR UPDATE", name.Account, name.Name))
		if errors.Is(err, pgx.ErrNoRows) {
			return model.QueueNotFoundError()
		}
		if err != nil {
			return err
		}
		u := plan.QueueUpdate{Queue: name, Config: q.cfg, Tags: q.tags}
		if err := u.Apply(change); err != nil {
			return err
		}
		retentionChanged, qid = u.Config.Retention != q.cfg.Retention, q.id
		if u.Tags == nil {
			u.Tags = map[string]string{}
		}
		cj, _ := json.Marshal(u.Config)
		tj, _ := json.Marshal(u.Tags)
		_, err = tx.Exec(ctx, `UPDATE queues SET config = $2, tags = $3,
			modified_at = CASE WHEN $4 THEN `+nowSQL+` ELSE modified_at END WHERE id = $5`,
			b.tnow(), cj, tj, u.Modified, q.id)
		return err
	})
	if err != nil {
		return txErr("update queue", err)
	}
	if retentionChanged {
		b.sweeper.Kick()
	}
	// Waiting receives on every broker re-read the queue row: a resumed
	// queue (Paused) delivers at once, and other settings apply to the
	// next look.
	if qid != 0 {
		b.changed(qid, time.Time{}, true)
	}
	return nil
}

// DeleteQueue implements storage.Backend: the queue row becomes a tombstone at
// once (its id is never reused, so its receipts stop working); the sweeper of
// any broker deletes its messages and counters in bounded batches.
func (b *Backend) DeleteQueue(ctx context.Context, name model.QueueRef) (err error) {
	defer unavailable(ctx, &err)
	if err := b.enter(ctx); err != nil {
		return err
	}
	defer b.life.Done()
	var id int64
	err = b.pool.QueryRow(ctx, "UPDATE queues SET deleted = true, deleted_at = "+nowSQL+" WHERE account = $2 AND name = $3 AND NOT deleted RETURNING id", b.tnow(), name.Account, name.Name).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return model.QueueNotFoundError()
	}
	if err != nil {
		return dbErr("delete queue", err)
	}
	b.changed(id, time.Time{}, true)
	b.sweeper.Kick()
	b.log.Info("queue deleted", "queue", name, "queue_id", id)
	return nil
}

// PurgeQueue implements storage.Backend: one short transaction gives the
// queue a new mid (message space id) and records the old one in purged.
// Every statement on the queue's content names its mid, so the messages
// sent before the purge (their counters, FIFO groups, dedup window and
// receive attempts with them) are gone at once for every reader: receives,
// counts, visibility changes, deletes (which match nothing and succeed, as
// for any deleted message) and move tasks. The sweeper of any broker then
// deletes them in bounded batches (reclaim).
//
// A send that read the queue before the purge and commits after it stores
// its message, and adds its counters, under the old mid: purged as a whole,
// never half. A purge runs under the queue row's lock (FOR UPDATE), which
// also orders it with move-task steps (FOR SHARE).
func (b *Backend) PurgeQueue(ctx context.Context, name model.QueueRef, minInterval time.Duration) (err error) {
	defer unavailable(ctx, &err)
	if err := b.enter(ctx); err != nil {
		return err
	}
	defer b.life.Done()
	if err := retry(func() error { return b.purgeTx(ctx, name, minInterval) }); err != nil {
		return err
	}
	b.sweeper.Kick()
	return nil
}

func (b *Backend) purgeTx(ctx context.Context, name model.QueueRef, minInterval time.Duration) error {
	return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		q, err := scanQueue(tx.QueryRow(ctx, "SELECT "+queueCols+" FROM queues WHERE "+byRef+" AND NOT deleted FOR UPDATE", name.Account, name.Name))
		if errors.Is(err, pgx.ErrNoRows) {
			return model.QueueNotFoundError()
		}
		if err != nil {
			return dbErr("read queue", err)
		}
		if minInterval > 0 {
			var last, now time.Time
			if q.lastPurge != nil {
				last = *q.lastPurge
			}
			if err := tx.QueryRow(ctx, `SELECT `+nowSQL, b.tnow()).Scan(&now); err != nil {
				return dbErr("purge queue", err)
			}
			if err := plan.AllowPurge(name.Name, minInterval, last, now); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `WITH p AS (INSERT INTO purged (mid, queue_id, purged_at) VALUES ($2, $3, `+nowSQL+`))
			UPDATE queues SET last_purge = `+nowSQL+`, mid = nextval(pg_get_serial_sequence('queues', 'id'))
			WHERE id = $3`, b.tnow(), q.mid, q.id)
		if err != nil {
			return dbErr("purge queue", err)
		}
		return nil
	})
}

// shard picks the counter row a broker's statement adds its deltas to:
// 0..countShards-1, at random.
func shard() int { return rand.IntN(countShards) }

// txShard is the counter row that the transactional sends (SendTx) of the
// database session pid add to: countShards..2*countShards-1, one per
// session. A SendTx holds its counter row until the application's
// transaction ends, so it must be one that no broker statement picks:
// a claim, a delete or a send that picked it would wait for the
// application's commit, and a limited queue's claim would wait holding the
// queue's limits row, with every other receive of the queue behind it
// (TestSendTxLeavesReceivesAlone). Sums over every row stay exact. One row
// per session rather than one for all: the open transactions of several
// sessions sending to one queue wait for each other only when their
// sessions share a row (consecutive process ids do not); and the same row
// for every SendTx of one transaction, so that two of them never lock two
// rows of a queue in opposite orders.
func txShard(pid uint32) int { return countShards + int(pid%countShards) }

// countsFromStates is the tail of a statement whose CTE named cte returns the
// stored states (column state) of the messages it deleted: it subtracts them
// from queue qid's counter shard.
func countsFromStates(cte, qid, shardParam string) string {
	return `INSERT INTO counts AS c (queue_id, shard, ready, inflight, delayed)
		SELECT ` + qid + `, ` + shardParam + `, -count(*) FILTER (WHERE state = 'r'),
			-count(*) FILTER (WHERE state = 'i'), -count(*) FILTER (WHERE state = 'd')
		FROM ` + cte + ` HAVING count(*) > 0
		ON CONFLICT (queue_id, shard) DO UPDATE SET ready = c.ready + excluded.ready,
			inflight = c.inflight + excluded.inflight, delayed = c.delayed + excluded.delayed`
}

// ListQueueStats implements storage.Backend: every live queue of account
// with its counts, in name order, in two queries: the queues with the sums
// of their counts' shards, then each one's oldest live message (by
// messages_age) and oldest visible one. Unlike GetQueue it promotes no
// message: a delay that ended since the last receive or GetQueue still
// counts as delayed until one of them runs (nothing else promotes it). Its
// OldestVisibleSince counts such a message all the same, from the end of its
// delay or backoff, and so a message whose lease ended on a queue without a
// RetryPolicy or RedrivePolicy, from that end: each is what GetQueue's
// promotion would make ready, visible since then (promoteSQL keeps
// visible_at). Health reads AllStats; a queue whose consumers are all gone
// is read by nothing else, and its messages' wait must show. (An ended
// lease of a queue with a policy is planned by the sweeper at its end.)
func (b *Backend) ListQueueStats(ctx context.Context, account string) (_ []model.QueueInfo, err error) {
	defer unavailable(ctx, &err)
	if err := b.enter(ctx); err != nil {
		return nil, err
	}
	defer b.life.Done()
	rows, err := b.pool.Query(ctx, `SELECT `+queueCols+`,
			coalesce(c.ready, 0), coalesce(c.inflight, 0), coalesce(c.delayed, 0)
		FROM queues LEFT JOIN (SELECT queue_id, sum(ready) AS ready, sum(inflight) AS inflight, sum(delayed) AS delayed
			FROM counts GROUP BY queue_id) c ON c.queue_id = mid
		WHERE NOT deleted AND account = $1 ORDER BY name`, account)
	if err != nil {
		return nil, dbErr("list queue stats", err)
	}
	var out []model.QueueInfo
	var mids, retention []int64
	var policy []bool
	for rows.Next() {
		var q queueRow
		var cfg, tags []byte
		var info model.QueueInfo
		if err := rows.Scan(&q.id, &q.mid, &q.name, &cfg, &tags, &q.createdAt, &q.modifiedAt, &q.lastPurge, &q.account,
			&info.Stats.Visible, &info.Stats.InFlight, &info.Stats.Delayed); err != nil {
			rows.Close()
			return nil, dbErr("list queue stats", err)
		}
		if err := json.Unmarshal(cfg, &q.cfg); err != nil {
			rows.Close()
			return nil, dbErr("list queue stats", err)
		}
		if err := json.Unmarshal(tags, &q.tags); err != nil {
			rows.Close()
			return nil, dbErr("list queue stats", err)
		}
		info.Queue = q.queue()
		out = append(out, info)
		mids, retention = append(mids, q.mid), append(retention, micros(q.cfg.Retention))
		policy = append(policy, hasRetryOrRedrive(q.cfg))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, dbErr("list queue stats", err)
	}
	if len(out) == 0 {
		return out, nil
	}
	rows, err = b.pool.Query(ctx, `SELECT (SELECT min(sent_at) FROM messages
			WHERE queue_id = u.mid AND sent_at > `+nowSQL+` - u.ret * interval '1 microsecond'),
			least((SELECT min(visible_at) FROM messages WHERE queue_id = u.mid AND state = 'r'),
				(SELECT min(visible_at) FROM messages WHERE queue_id = u.mid AND state <> 'r'
					AND visible_at <= `+nowSQL+` AND (state = 'd' OR NOT u.policy)))
		FROM unnest($2::bigint[], $3::bigint[], $4::boolean[]) WITH ORDINALITY AS u(mid, ret, policy, n) ORDER BY u.n`,
		b.tnow(), mids, retention, policy)
	if err != nil {
		return nil, dbErr("list queue stats", err)
	}
	defer rows.Close()
	for i := 0; rows.Next(); i++ {
		var oldest, visibleSince *time.Time
		if err := rows.Scan(&oldest, &visibleSince); err != nil {
			return nil, dbErr("list queue stats", err)
		}
		if oldest != nil && i < len(out) {
			out[i].Stats.OldestSentAt = *oldest
		}
		if visibleSince != nil && i < len(out) {
			out[i].Stats.OldestVisibleSince = *visibleSince
		}
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("list queue stats", err)
	}
	return out, nil
}
