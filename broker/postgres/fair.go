package postgres

// Fair queues (broker/fair.go) in SQL.
//
// On a standard queue a message's tenant is its group_id (NULL: the tenant
// ""), and its turn within its priority level is stored in messages.turn for
// life. The rule's state is derived or sharded, never one hot row:
//
//   - last[p][T] is the highest turn of T's messages at level p still in the
//     queue, in any state: the end of T's range of messages_tenant
//     (lastTurnSQL). A tenant without messages at the level has none (0):
//     that is how the rule's "forget last[p][T]" happens, so per-tenant
//     state is the tenant's messages themselves, bounded by the queue's
//     depth.
//   - cursor[p] is the max of the cursor column of the queue's rows of level
//     p in table cursors, one row per counter shard (cursorSQL). A claim
//     raises, in the same statement, the row of its shard for each level it
//     leased to the highest turn it leased there (claimSQL's cur): that is
//     broker.AdvanceCursor, as the max over the shards of their maxima is
//     the max of every claimed turn. At most 201 levels × countShards rows
//     per queue; the sweeper deletes them with the counters.
//
// A new message takes broker.NextTurn(last[p][T], cursor[p]) = max(last,
// cursor) + 1, computed in the statement that inserts it (turnsSQL); the
// n-th message of one tenant and level in one statement takes max(last,
// cursor) + n, which is NextTurn applied n times. Every place that adds a
// message to a standard queue does so: Send, the claim's move to the
// dead-letter queue (claimSQL's dl), the planned moves to it (moveToDLQ) and
// move tasks (insertMoved). A redelivered, nacked, snoozed or backed-off
// message keeps its turn.
//
// The statements run under READ COMMITTED without a lock per tenant, so two
// sends of one tenant that run at once may read the same last[p][T] and take
// the same turns: ties are served in send order (visible_at, then id, the
// ready index's next keys). docs/postgres.md bounds the effect.

// lastTurnSQL is the SQL expression of last[p][T]: the highest turn of the
// messages of tenant group (an SQL expression, NULL for the tenant "") at
// priority prio in the standard queue whose mid is the SQL expression q, or
// 0. One probe of messages_tenant, whose key spells the tenant as group_id
// with NULL as the empty string: an equality, so that max() reads the end of
// the tenant's range (with "group_id IS NULL" PostgreSQL cannot use the index
// order and scans the whole tenant). A MessageGroupId is never empty.
func lastTurnSQL(q, group, prio string) string {
	return `coalesce((SELECT max(lt.turn) FROM messages lt WHERE lt.queue_id = ` + q + ` AND lt.seq IS NULL
		AND coalesce(lt.group_id, '') = coalesce(` + group + `, '') AND lt.priority = ` + prio + `), 0)`
}

// cursorSQL is the SQL expression of cursor[p] of level prio of the queue
// whose mid is the SQL expression q: the max over its shards (0 before any
// claim at that level).
func cursorSQL(q, prio string) string {
	return `(SELECT coalesce(max(kc.cursor), 0) FROM cursors kc WHERE kc.queue_id = ` + q + ` AND kc.priority = ` + prio + `)`
}

// turnsSQL is a SELECT of (k, turn): the fair-queue turn of each row of in,
// a relation (a parenthesized subquery) of the messages one statement adds
// to the standard queue whose mid is the SQL expression q, with columns k
// (a key for the caller's join), group_id, priority and ord (their order).
// The n-th row of a tenant and level in ord order takes max(last[p][T],
// cursor[p]) + n; last and cursor are read once per tenant and level.
func turnsSQL(q, in string) string {
	return `SELECT i.k, b.base + row_number() OVER (PARTITION BY i.group_id, i.priority ORDER BY i.ord) AS turn
	FROM ` + in + ` i JOIN (
		SELECT d.group_id, d.priority, greatest(` + lastTurnSQL(q, "d.group_id", "d.priority") + `, ` + cursorSQL(q, "d.priority") + `) AS base
		FROM (SELECT DISTINCT group_id, priority FROM ` + in + ` i0) d) b
	ON b.group_id IS NOT DISTINCT FROM i.group_id AND b.priority = i.priority`
}

// advanceCursorsSQL is the CTE body that raises queue @queue's cursors
// (shard @shard) to the highest turn leased at each level among the rows of
// claimed (a relation with columns priority and turn): broker.AdvanceCursor.
// Only claims write cursors rows, all with this statement, in priority
// order; a row that would not rise is locked but not rewritten.
func advanceCursorsSQL(claimed string) string {
	return `INSERT INTO cursors AS kc (queue_id, priority, shard, cursor)
	SELECT @queue::bigint, x.priority, @shard, max(x.turn) FROM ` + claimed + ` x GROUP BY x.priority ORDER BY x.priority
	ON CONFLICT (queue_id, priority, shard) DO UPDATE SET cursor = excluded.cursor WHERE kc.cursor < excluded.cursor`
}
