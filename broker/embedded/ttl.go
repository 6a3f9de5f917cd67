package embedded

import (
	"container/heap"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/broker/model"
)

// Time to live (model/config_ttl.go) in the embedded backend.
//
//   - A message's expiry (msgExtra.expiresAt, Unix ns) is set by its send
//     (the send's instant plus plan.SendPlan.TTL) and stored in its
//     metadata record (version 3, codec.go); a move to another queue (a
//     dead letter, a move task) leaves it behind.
//   - queue.ttl is a heap of the queue's messages with an expiry not yet
//     reached or handled, by expiry; queue.ttlCount counts the messages with
//     an expiry. The index hooks keep both (add, load, forget).
//   - expireDueLocked pops the heap up to now: a message that is ready,
//     delayed or backing off expires (expireLocked: to the dead-letter
//     queue with model.ReasonExpired, or dropped); a message in flight
//     keeps its lease and only leaves the heap: its lease's end (promote,
//     plan.LeaseExpiry) or a change of it (changeLeaseLocked,
//     plan.LeaseChange) expires it then (plan.FateExpired), since its
//     expiry is still in its record. It runs after promote, whose planning
//     of ended leases must come first (a lease that ended before the
//     expiry made its message visible or backing off by then, which the
//     expiry then removes).
//   - It runs in promoteLocked, so every write to the queue (a receive,
//     a delete, a visibility change, a move-task step) expires what is due
//     first; a receive also checks each message it claims (leaseLocked).
//     The retention sweeper runs it for every queue, waking at the next
//     expiry (noteExpiryLocked, sweepOnce) and, on a queue holding
//     messages with an expiry, at its next lease end (an expired message's
//     lease may end then).

// ttlPassed reports whether m's time to live has passed at now.
func (m *msg) ttlPassed(now int64) bool {
	e := m.expiresAt()
	return e != 0 && e <= now
}

// ttlInsert indexes a message with an expiry (add and load call it).
func (q *queue) ttlInsert(m *msg) {
	if m.expiresAt() == 0 {
		return
	}
	q.ttlCount++
	heap.Push(&q.ttl, m)
}

// ttlDrop forgets m's expiry (forget calls it).
func (q *queue) ttlDrop(m *msg) {
	if m.x == nil || m.x.expiresAt == 0 {
		return
	}
	q.ttlCount--
	if m.x.ttlPos > 0 {
		heap.Remove(&q.ttl, int(m.x.ttlPos-1))
	}
}

// nextTTL is the earliest expiry in q.ttl (ok false if none).
func (q *queue) nextTTL() (int64, bool) {
	if len(q.ttl) == 0 {
		return 0, false
	}
	return q.ttl[0].x.expiresAt, true
}

// admitDepth is q's depth for the backpressure rule (plan.AdmitSend) at
// now: without its messages whose time to live passed and that no live
// lease holds, which are gone though no one may have removed them yet (a
// send runs no expiry pass); at most sweepBudget of them are looked for.
// b.mu must be held.
func (q *queue) admitDepth(now int64) int64 {
	if q.Config.MaxDepth == 0 && q.Config.LowPriorityMaxDepth == 0 {
		return q.depth()
	}
	return q.depth() - int64(q.expiredDue(now, sweepBudget))
}

// expiredDue counts, up to limit, the messages of q.ttl whose expiry is at
// or before now and that no live lease holds: the heap's entries up to now
// form a subtree at its root, walked depth first.
func (q *queue) expiredDue(now int64, limit int) int {
	n := 0
	stack := []int{0}
	for len(stack) > 0 && n < limit {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i >= len(q.ttl) || q.ttl[i].x.expiresAt > now {
			continue
		}
		if m := q.ttl[i]; m.state != stateInflight || m.visibleAt <= now {
			n++
		}
		stack = append(stack, 2*i+1, 2*i+2)
	}
	return n
}

// expireDueLocked expires up to limit (< 0: all) of q's messages whose time
// to live has passed at now and that are not in flight, in batch, and lets
// the in-flight ones leave the heap (see above). It returns how many it
// expired and whether more are due. b.mu must be held.
func (b *Backend) expireDueLocked(q *queue, batch *pebble.Batch, now int64, limit int) (n int, more bool) {
	for len(q.ttl) > 0 && q.ttl[0].x.expiresAt <= now {
		if limit >= 0 && n >= limit {
			return n, true
		}
		m := heap.Pop(&q.ttl).(*msg)
		if m.state == stateInflight || m.state == stateDoomed {
			continue // its lease's end or change expires it
		}
		q.unplace(m)
		b.expireLocked(q, m, batch, now, now)
		n++
	}
	return n, false
}

// expireLocked removes m (unplaced) from q in batch, its time to live
// passed: to q's dead-letter queue with model.ReasonExpired when q's
// ExpiredMessageAction is dead-letter and that queue exists (and m's body
// reads), else dropped, leaving an expired record when q keeps records
// (its CompletedRetention), with m's last failure reason. at is when it
// expired (the dead letter's failure). b.mu must be held.
func (b *Backend) expireLocked(q *queue, m *msg, batch *pebble.Batch, now, at int64) {
	if o := b.opts.Observer; o != nil {
		o.Count(q.ref().String(), model.CountExpired, 1)
	}
	if q.Config.ExpiredToDeadLetter() {
		if dlq := b.dlqLocked(q); dlq != nil && b.moveLocked(q, dlq, m, batch, now, model.ReasonExpired, at) {
			return
		}
	}
	b.putRecordLocked(q, m, batch, now, model.JobExpired, nil, "") // records.go
	q.forget(m)
	deleteMessageRecords(batch, q.ID, m.key)
}

// ttlHeap orders messages by expiry (then key).
type ttlHeap []*msg

func (h ttlHeap) Len() int { return len(h) }
func (h ttlHeap) Less(i, j int) bool {
	a, b := h[i].x.expiresAt, h[j].x.expiresAt
	if a != b {
		return a < b
	}
	return h[i].key < h[j].key
}
func (h ttlHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].x.ttlPos = int32(i + 1)
	h[j].x.ttlPos = int32(j + 1)
}
func (h *ttlHeap) Push(x any) { m := x.(*msg); m.x.ttlPos = int32(len(*h) + 1); *h = append(*h, m) }
func (h *ttlHeap) Pop() any {
	old := *h
	m := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	m.x.ttlPos = 0
	return m
}
