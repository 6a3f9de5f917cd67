package postgres

// Fair queues (broker/fair.go) in SQL.
//
// On a standard queue a message's tenant is its group_id (NULL: the tenant
// ""), and its turn is stored in messages.turn for life. The rule's state is
// derived, never kept apart:
//
//   - last[T] is the highest turn of T's messages still in the queue, in any
//     state: the last entry of T's range of messages_tenant (lastTurnSQL).
//     A tenant without messages has none (0), which is how the rule's
//     "forget last[T]" happens: per-tenant state is the tenant's messages.
//   - the cursor is the max of the cursor column of the queue's counter
//     shards (cursorSQL); a claim raises the cursor of the shard whose
//     counters it updates to the highest turn it leased (claimSQL's cnt),
//     which is broker.AdvanceCursor over the shards: the max of the shards'
//     maxima is the max of every claimed turn.
//
// A new message takes broker.NextTurn(last[T], cursor) = max(last[T],
// cursor) + 1, computed in the statement that inserts it (turnSQL); the
// n-th message of one tenant in one statement takes max(last[T], cursor) +
// n, which is NextTurn applied n times. Every place that adds a message to
// a standard queue does so: Send, the claim's move to the dead-letter queue
// (claimSQL's red), the planned moves to it (moveToDLQ) and move tasks
// (insertMoved). A redelivered, nacked or backed-off message keeps its turn.
//
// The statements run under READ COMMITTED without a lock per tenant, so two
// sends of one tenant that run at once may read the same last[T] and take
// the same turn: such ties are served in send order (visible_at, then id,
// the ready index's next keys), and a tenant's weight per turn is at most
// the number of its sends in flight at once. docs/postgres.md bounds the
// effect.

// lastTurnSQL is the SQL expression of last[T]: the highest turn of the
// messages of tenant group (an SQL expression, NULL for the tenant "") in
// the standard queue whose mid is the SQL expression q, or 0. One index
// probe of messages_tenant (max() reads the end of the tenant's range).
func lastTurnSQL(q, group string) string {
	return `coalesce(CASE WHEN ` + group + ` IS NULL
		THEN (SELECT max(lt.turn) FROM messages lt WHERE lt.queue_id = ` + q + ` AND lt.seq IS NULL AND lt.group_id IS NULL)
		ELSE (SELECT max(lt.turn) FROM messages lt WHERE lt.queue_id = ` + q + ` AND lt.seq IS NULL AND lt.group_id = ` + group + `) END, 0)`
}

// cursorSQL is the SQL expression of the cursor of the queue whose mid is
// the SQL expression q: the max over its counter shards (0 before any
// claim of a turn).
func cursorSQL(q string) string {
	return `(SELECT coalesce(max(kc.cursor), 0) FROM counts kc WHERE kc.queue_id = ` + q + `)`
}

// turnSQL is the SQL expression of the turn of the n-th (an SQL expression,
// from 1) message of tenant group added by one statement to the standard
// queue q: broker.NextTurn applied n times, max(last[T], cursor) + n.
func turnSQL(q, group, n string) string {
	return `greatest(` + lastTurnSQL(q, group) + `, ` + cursorSQL(q) + `) + ` + n
}
