package plan

import "github.com/sluicemq/sluice/broker/model"

// Fair queues: on a standard queue, a message's MessageGroupId names its
// tenant (as AWS's fair queues do since 2025); messages without one form one
// tenant, "". Priority levels are strict; within a level, tenants with ready
// messages take turns; within a tenant, send order holds. So one tenant's
// million-message backlog does not delay another tenant's single message by
// more than about one message per consumer.
//
// The rule is a virtual clock of turns, as in fair queueing, kept for each
// priority level on its own (a level's turns are compared only within it):
//
//   - the queue keeps a cursor per level: the highest turn a receive has
//     claimed at that level;
//   - a message sent by tenant T at level p takes turn
//     NextTurn(last[p][T], cursor[p]), where last[p][T] is the turn of T's
//     latest message at level p still in the queue (0 when none), and
//     last[p][T] becomes that turn;
//   - ready messages are served by priority (higher first), then turn (lower
//     first), then send order; a receive that claims a message of level p
//     and turn t moves cursor[p] to max(cursor[p], t) (AdvanceCursor).
//
// One cursor for all levels would be wrong: claiming a noisy tenant's
// high-priority message (whose turn counts the noisy tenant's whole backlog)
// would move the cursor past that backlog, and a quiet tenant's next message
// at a lower level would then wait behind all of it.
//
// A tenant with a backlog has turns far ahead of the cursor; a quiet tenant's
// new message takes cursor+1 and is served next. A message keeps its turn
// for life (a redelivery is served before its tenant's later messages).
// Per-tenant state is one number per (level, tenant) with messages in the
// queue (bounded by the queue's depth; a backend may forget last[p][T] once
// it is at or below cursor[p], which NextTurn makes equivalent to 0, and a
// level's cursor once the level holds no message).

// NextTurn is the turn of a new message of a tenant whose latest message in
// the queue has turn last (0: none, or forgotten), on a queue whose cursor is
// cursor.
func NextTurn(last, cursor uint64) uint64 { return max(last, cursor) + 1 }

// AdvanceCursor is the queue's cursor after a receive claimed a message of
// turn t.
func AdvanceCursor(cursor, t uint64) uint64 { return max(cursor, t) }

// Tenant is the fair-queue tenant of a message sent to a standard queue: its
// MessageGroupId ("" when it has none). FIFO queues have no tenants (their
// groups keep their own order rule).
func Tenant(c model.QueueConfig, groupID string) string {
	if c.Fifo {
		return ""
	}
	return groupID
}
