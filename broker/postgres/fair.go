package postgres

import (
	"strconv"
	"strings"
)

// Fair queues (broker/internal/plan/fair.go) in SQL.
//
// On a standard queue a message's tenant is its group_id (NULL: the tenant
// ""), and its turn within its priority level is stored in messages.turn for
// life. The rule's state is derived or sharded, never one hot row:
//
//   - last[p][T] is the highest turn of T's messages at level p still in the
//     queue (ready or delayed; the ones in flight have turns at most
//     cursor[p]): the end of T's range of messages_tenant (lastTurnSQL). A tenant without messages at the level has none (0):
//     that is how the rule's "forget last[p][T]" happens, so per-tenant
//     state is the tenant's messages themselves, bounded by the queue's
//     depth.
//   - cursor[p] is the max of the cursor column of the queue's rows of level
//     p in table cursors, one row per counter shard (cursorSQL). A claim
//     raises, in the same statement, the row of its shard for each level it
//     leased to the highest turn it leased there (claimSQL's cur): that is
//     plan.AdvanceCursor, as the max over the shards of their maxima is
//     the max of every claimed turn. At most 201 levels × countShards rows
//     per queue; the sweeper deletes them with the counters.
//
// A new message takes plan.NextTurn(last[p][T], cursor[p]) = max(last,
// cursor) + 1, computed in the statement that inserts it (sendTurns for
// Send, turnsSQL elsewhere); the n-th message of one tenant and level in one statement takes max(last,
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
// order and scans the whole tenant). A MessageGroupId is never empty. The
// index leaves out the messages in flight: each has a turn at most its
// level's cursor (the claim that leased it raised the cursor to it in the
// same statement), so it cannot change max(last, cursor).
func lastTurnSQL(q, group, prio string) string {
	return `coalesce((SELECT max(lt.turn) FROM messages lt WHERE lt.queue_id = ` + q + ` AND lt.seq IS NULL AND lt.state <> 'i'
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
func turnsSQL(q, in string) string {
	return `SELECT i.k, ` + turnSQL("i") + ` AS turn
	FROM ` + in + ` i JOIN (` + turnBasesSQL(q, in) + `) b ON ` + turnJoinSQL("i")
}

// turnSQL is the turn of row r (with columns group_id, priority, ord) of a
// SELECT joined with turnBasesSQL as b on turnJoinSQL(r): the n-th row of a
// tenant and level in ord order takes max(last[p][T], cursor[p]) + n.
func turnSQL(r string) string {
	return `b.base + row_number() OVER (PARTITION BY ` + r + `.group_id, ` + r + `.priority ORDER BY ` + r + `.ord)`
}

// turnBasesSQL is a SELECT of (group_id, priority, base): max(last[p][T],
// cursor[p]) of each tenant and level among the rows of in (see turnsSQL),
// read once for each (OFFSET 0 keeps the planner from evaluating the
// lookups once per row of in instead).
func turnBasesSQL(q, in string) string {
	return `SELECT d.group_id, d.priority, greatest(` + lastTurnSQL(q, "d.group_id", "d.priority") + `, ` + cursorSQL(q, "d.priority") + `) AS base
		FROM (SELECT DISTINCT group_id, priority FROM ` + in + ` i0) d OFFSET 0`
}

// turnJoinSQL is the join condition of row r with turnBasesSQL's b.
func turnJoinSQL(r string) string {
	return `b.group_id IS NOT DISTINCT FROM ` + r + `.group_id AND b.priority = ` + r + `.priority`
}

// advanceCursorsSQL is the CTE body that raises queue @queue's cursors
// (shard @shard) to the highest turn leased at each level among the rows of
// claimed (a relation with columns priority and turn): plan.AdvanceCursor.
// Only claims write cursors rows, all with this statement, in priority
// order; a row that would not rise is locked but not rewritten.
func advanceCursorsSQL(claimed string) string {
	return `INSERT INTO cursors AS kc (queue_id, priority, shard, cursor)
	SELECT @queue::bigint, x.priority, @shard, max(x.turn) FROM ` + claimed + ` x GROUP BY x.priority ORDER BY x.priority
	ON CONFLICT (queue_id, priority, shard) DO UPDATE SET cursor = excluded.cursor WHERE kc.cursor < excluded.cursor`
}

// sendTurns numbers the messages of one send by tenant and level, in send
// order, so that the send's INSERT computes each turn without a join or a
// window: the n-th message of a tenant and level takes base + n, where the
// base, max(last[p][T], cursor[p]), is an uncorrelated subquery per tenant
// and level (evaluated once, and only if used).
type sendTurns struct {
	keys []tenantLevel
	n    []int
}

// tenantLevel is a tenant (a MessageGroupId, "" for none) at a priority.
type tenantLevel struct {
	group    string
	priority int
}

// add counts a message of tenant group at priority and returns its tenant
// and level's slot and its rank among them (from 1).
func (t *sendTurns) add(group string, priority int) (slot, nth int) {
	k := tenantLevel{group, priority}
	for i, x := range t.keys {
		if x == k {
			t.n[i]++
			return i, t.n[i]
		}
	}
	t.keys, t.n = append(t.keys, k), append(t.n, 1)
	return len(t.keys) - 1, 1
}

// sql is the SQL expression of the turn of row r (with columns slot and n)
// in the standard queue whose mid is the SQL expression q; the tenants and
// levels are appended to args as parameters.
func (t *sendTurns) sql(q, r string, args *[]any) string {
	base := func(k tenantLevel) string {
		var g any
		if k.group != "" {
			g = k.group
		}
		*args = append(*args, g, k.priority)
		gp, pp := "$"+strconv.Itoa(len(*args)-1)+"::text", "$"+strconv.Itoa(len(*args))+"::smallint"
		return `greatest(` + lastTurnSQL(q, gp, pp) + `, ` + cursorSQL(q, pp) + `)`
	}
	if len(t.keys) == 1 {
		return base(t.keys[0]) + ` + ` + r + `.n`
	}
	var b strings.Builder
	b.WriteString("CASE " + r + ".slot")
	for i, k := range t.keys {
		b.WriteString(" WHEN " + strconv.Itoa(i) + " THEN " + base(k))
	}
	b.WriteString(" END + " + r + ".n")
	return b.String()
}
