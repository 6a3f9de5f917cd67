package broker

// Fair queues: on a standard queue, a message's MessageGroupId names its
// tenant (as AWS's fair queues do since 2025); messages without one form one
// tenant, "". Priority levels are strict; within a level, tenants with ready
// messages take turns; within a tenant, send order holds. So one tenant's
// million-message backlog does not delay another tenant's single message by
// more than about one message per consumer.
//
// The rule is a virtual clock of turns, as in fair queueing:
//
//   - the queue keeps a cursor: the highest turn a receive has claimed;
//   - a message sent by tenant T takes turn NextTurn(last[T], cursor), where
//     last[T] is the turn of T's latest message still in the queue (0 when
//     none), and last[T] becomes that turn;
//   - ready messages are served by priority (higher first), then turn (lower
//     first), then send order; a receive that claims a message of turn t
//     moves the cursor to max(cursor, t) (AdvanceCursor).
//
// A tenant with a backlog has turns far ahead of the cursor; a quiet tenant's
// new message takes cursor+1 and is served next. A message keeps its turn
// for life (a redelivery is served before its tenant's later messages).
// Per-tenant state is one number per tenant with messages in the queue
// (bounded by the queue's depth; a backend may forget last[T] once it is at
// or below the cursor, which NextTurn makes equivalent to 0).

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
func Tenant(c QueueConfig, groupID string) string {
	if c.Fifo {
		return ""
	}
	return groupID
}
