package embedded

import (
	"container/heap"
	"time"

	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
)

// msgState is where a message sits in its queue's schedule. It is also stored
// in the metadata record (except stateDoomed): on restart a delayed or
// backing-off message whose visibleAt has passed is ready, and an in-flight
// one whose lease ended is planned as an expiry (plan.LeaseExpiry).
type msgState uint8

const (
	stateReady    msgState = 1 // in queue.ready, receivable now
	stateDelayed  msgState = 2 // in queue.timed, not yet received, visible at visibleAt
	stateInflight msgState = 3 // in queue.timed, leased until visibleAt
	// stateBackoff: in queue.timed, delayed after a failure (a nack's
	// backoff or delay, a snooze, an expired lease's backoff) until
	// visibleAt. Counted as delayed; its receipt is stale; on a FIFO queue
	// it holds its group (it stays the head of the group's pending list and
	// is not ready, so the group is not receivable).
	//
	// A backoff after an expired lease is not written: the record keeps
	// saying stateInflight with the lease's end, and recover plans the
	// expiry again (plan.ExpiryVisibleAt computes the same instant).
	stateBackoff msgState = 4
	// stateDoomed (memory only): the lease ended on the message's last
	// attempt; it waits in queue.doomed for its move to the dead-letter
	// queue, which needs a write batch (flushDoomedLocked). Counted as in
	// flight and holding its FIFO group until then; its record still says
	// stateInflight, so a restart plans the expiry again.
	stateDoomed msgState = 5
)

// msg is the in-memory index entry of one message: its metadata, never its
// body. All fields are guarded by Backend.mu.
//
// It is kept small, since a deep queue holds millions (96 bytes: the
// common fields inline, 32-bit counters and positions, the message id as 16
// bytes; the fields most queued messages never set live in x). Queue depth
// is bounded by the 32-bit heap positions (2^31 messages per queue).
type msg struct {
	key       uint64 // unique across the store and never reused (the key ceiling)
	visibleAt int64  // Unix ns: for ready messages when they became visible
	lease     uint64 // lease version, bumped by every receive; 0 = never received
	sentAt    int64  // Unix ns; retention counts from it
	turn      uint64 // fair-queue turn (fair.go; memory only); 0 on FIFO queues
	// uuid is the message id (also in the body record): see msgID, id, setID.
	uuid msgID
	// x holds the rarely set fields (msgid.go): nil until one is set.
	x            *msgExtra
	receiveCount int32
	priority     int32
	size         int32 // body + attribute bytes (MessageSize)
	// attempts is Sluice's attempts count (broker/internal/plan/retry.go); maxAttempts the
	// message's own Sluice.MaxAttempts (0: the queue's maxReceiveCount).
	attempts, maxAttempts int32

	pos    int32 // index in queue.ready or queue.timed, -1 when in neither
	agePos int32 // index in queue.age
	state  msgState
}

// queue is the in-memory state of one queue. Every field is guarded by
// Backend.mu; the heaps and counters are exact at every moment once promote
// has run for the current time.
//
// Invariants:
//   - every message of msgs is in exactly one of ready (stateReady), timed
//     (stateDelayed, stateInflight, stateBackoff) or doomed (stateDoomed),
//     and in age;
//   - ttlCount is the number of messages of msgs with an expiry; ttl
//     holds those of them whose expiry is after the last expireDueLocked,
//     and those in flight when it ran are out of it;
//   - inflight + delayed == len(timed) + len(doomed), Visible == len(ready);
//   - after promote(now), no entry of timed has visibleAt <= now;
//   - on a standard queue, every message of msgs is counted once in
//     fair[priority].tenants[its tenant].live, and no entry counts 0.
type queue struct {
	queueRecord
	// recordDue is the earliest due time of the queue's message records
	// (records.go; Unix ns, 0: none), a lower bound; recordWrites counts
	// the records written, so that the sweeper knows it read them all.
	recordDue    int64
	recordWrites uint64
	msgs         map[uint64]*msg
	ready        readyHeap // (priority desc, turn, key)
	timed        timedHeap // visibleAt
	age          ageHeap   // sentAt: the retention sweeper's order
	// readyAge counts the ready messages by when they became visible
	// (readyage.go): every push to ready adds, unplace drops.
	readyAge readyAges
	inflight int64 // stateInflight and stateDoomed
	delayed  int64 // stateDelayed and stateBackoff
	// doomed are the messages whose lease ended on their last attempt,
	// waiting for flushDoomedLocked to move them to the dead-letter queue.
	doomed []*msg
	// fifo is the FIFO state (groups, attempt cache; fifo.go), nil on
	// standard queues. The index hooks below keep it in step.
	fifo *fifoState
	// window is the dedup window (dedup.go), of FIFO and standard queues.
	window dedupWindow
	// live holds, on a standard queue, the messages that carry a dedup id,
	// by that id (plan.LiveCarrier; nil until one does): what
	// DeduplicationUntil=settled reads. The index hooks keep it in step.
	live map[string][]*msg
	// fair is the fair-queue state by priority level (fair.go), nil on FIFO
	// queues. The index hooks keep it in step.
	fair map[int]*fairLevel
	// ttl holds the messages with an expiry not yet reached or handled,
	// by expiry; ttlCount counts the messages with an expiry (ttl.go). The
	// index hooks keep them in step.
	ttl      ttlHeap
	ttlCount int

	// wake is closed (and replaced) to wake the receives waiting on this
	// queue: a message became ready, the earliest timed deadline moved
	// earlier, or the queue was deleted. waiters counts them so that wake is
	// only churned when someone listens.
	wake    chan struct{}
	waiters int
	deleted bool
	// rateAt is the MaxReceivesPerSecond rate's instant (plan.RateTaken),
	// Unix ns, 0 until a receive takes a message while the queue has a
	// rate (set only then): memory only, so a restart forgets it and
	// allows at most one burst more.
	rateAt int64
}

func newQueue(rec queueRecord) *queue {
	q := &queue{queueRecord: rec, msgs: map[uint64]*msg{}, wake: make(chan struct{}), fair: newFairState(rec.Config)}
	if rec.Config.Fifo {
		q.fifo = newFifoState()
	}
	return q
}

func (q *queue) info() model.QueueInfo {
	cfg, _ := model.ApplyAttributes(q.Config, nil) // deep copy
	tags := make(map[string]string, len(q.Tags))
	for k, v := range q.Tags {
		tags[k] = v
	}
	return model.QueueInfo{
		Queue: model.Queue{ID: q.ID, Account: q.Account, Name: q.Name, Config: cfg, Tags: tags,
			CreatedAt: q.CreatedAt, ModifiedAt: q.ModifiedAt},
		Stats: model.QueueStats{Visible: int64(len(q.ready)), InFlight: q.inflight, Delayed: q.delayed,
			OldestSentAt: q.oldestSentAt(), OldestVisibleSince: q.oldestVisibleSince()},
	}
}

// oldestVisibleSince is when the longest-visible ready message became
// visible, to the second (zero if none is ready).
func (q *queue) oldestVisibleSince() time.Time {
	s, ok := q.readyAge.oldest()
	if !ok {
		return time.Time{}
	}
	return time.Unix(s, 0)
}

// oldestSentAt is the SentAt of the queue's oldest message (zero if empty).
func (q *queue) oldestSentAt() time.Time {
	if len(q.age) == 0 {
		return time.Time{}
	}
	return fromNanos(q.age[0].sentAt)
}

// depth is what MaxDepth limits: visible + in flight + delayed.
func (q *queue) depth() int64 { return int64(len(q.ready)) + q.inflight + q.delayed }

// notify wakes the waiting receives.
func (q *queue) notify() {
	if q.waiters > 0 {
		close(q.wake)
		q.wake = make(chan struct{})
	}
}

// nextTimed is the earliest visibleAt of the timed messages (ok false if none).
func (q *queue) nextTimed() (int64, bool) {
	if len(q.timed) == 0 {
		return 0, false
	}
	return q.timed[0].visibleAt, true
}

// add indexes a new message according to its state and visibleAt, and
// gives it its fair-queue turn.
func (q *queue) add(m *msg, now int64) {
	q.msgs[m.key] = m
	heap.Push(&q.age, m)
	q.fifoInsert(m)
	q.fairInsert(m)
	q.dedupInsert(m)
	q.ttlInsert(m)
	q.place(m, now)
}

// load indexes the messages of a queue being recovered, all at once and in
// key order, on an empty index: what add does for each (with every timed
// message kept in timed, as stored), with the heaps built once at the end
// (heap.Init, linear) rather than by a push per message, and the map sized
// once. The map is filled on a second goroutine: it touches no field that
// the rest of load writes (a message's key is fixed), and the age heap,
// which reorders ms itself, is built only after it is done.
func (q *queue) load(ms []*msg) {
	q.msgs = make(map[uint64]*msg, len(ms))
	done := make(chan struct{})
	go func() {
		for _, m := range ms {
			q.msgs[m.key] = m
		}
		close(done)
	}()
	ready := 0
	for _, m := range ms {
		if m.state == stateReady {
			ready++
		}
	}
	q.ready = make(readyHeap, 0, ready) // sized once: no append slack
	q.timed = make(timedHeap, 0, len(ms)-ready)
	for i, m := range ms {
		m.agePos = int32(i)
		q.fifoInsert(m)
		q.fairInsert(m)
		q.dedupInsert(m)
		q.ttlInsert(m)
		if m.state == stateReady {
			m.pos = int32(len(q.ready))
			q.ready = append(q.ready, m)
			q.readyAge.add(m.visibleAt)
			q.fifoReady(m)
			continue
		}
		q.countTimed(m)
		m.pos = int32(len(q.timed))
		q.timed = append(q.timed, m)
	}
	heap.Init(&q.ready)
	heap.Init(&q.timed)
	<-done // the map's goroutine reads ms, which the age heap reorders
	q.age = ms
	heap.Init(&q.age)
}

// countTimed counts m, about to join timed, as in flight (its FIFO group
// leased) or delayed; a message in no timed state becomes delayed.
func (q *queue) countTimed(m *msg) {
	switch m.state {
	case stateInflight:
		q.inflight++
		q.fifoLeased(m, 1)
	case stateBackoff:
		q.delayed++
	default:
		m.state = stateDelayed
		q.delayed++
	}
}

// place puts a message that is in no schedule heap into ready or timed. An
// in-flight message whose lease already ended (a receive with a visibility
// timeout of 0) goes to timed all the same: its end is an expiry, which
// promote plans (plan.LeaseExpiry: a backoff, a dead letter, the
// reason), not a plain return to ready.
func (q *queue) place(m *msg, now int64) {
	if m.state == stateReady || (m.visibleAt <= now && m.state != stateInflight) {
		m.state = stateReady
		heap.Push(&q.ready, m)
		q.readyAge.add(m.visibleAt)
		q.fifoReady(m)
		q.notify()
		return
	}
	q.countTimed(m)
	if next, ok := q.nextTimed(); !ok || m.visibleAt < next {
		q.notify() // waiters re-arm their timers for the earlier deadline
	}
	heap.Push(&q.timed, m)
}

// unplace takes a message out of ready or timed. A message that leaves
// flight on a queue with a MaxInFlight wakes the waiting receives: there
// may be room again (a delete, a nack, a release).
func (q *queue) unplace(m *msg) {
	if (m.state == stateInflight || m.state == stateDoomed) && q.Config.MaxInFlight > 0 {
		q.notify()
	}
	switch m.state {
	case stateReady:
		heap.Remove(&q.ready, int(m.pos))
		q.readyAge.drop(m.visibleAt)
	case stateInflight:
		heap.Remove(&q.timed, int(m.pos))
		m.pos = -1 // before fifoLeased, which checks whether groups are receivable
		q.inflight--
		q.fifoLeased(m, -1)
	case stateDelayed, stateBackoff:
		heap.Remove(&q.timed, int(m.pos))
		q.delayed--
	case stateDoomed:
		for i, d := range q.doomed {
			if d == m {
				q.doomed = append(q.doomed[:i], q.doomed[i+1:]...)
				break
			}
		}
		m.pos = -1
		q.inflight--
		q.fifoLeased(m, -1)
	}
	m.pos = -1
}

// remove forgets a message entirely.
func (q *queue) remove(m *msg) {
	q.unplace(m)
	q.forget(m)
}

// forget drops an unplaced message from the age order and the map.
func (q *queue) forget(m *msg) {
	heap.Remove(&q.age, int(m.agePos))
	m.agePos = -1
	delete(q.msgs, m.key)
	q.fifoDrop(m)
	q.fairDrop(m)
	q.dedupDrop(m)
	q.ttlDrop(m)
}

// promote applies what the clock says to the timed messages whose visibleAt
// has passed: an ended delay or backoff makes its message ready; an expired
// lease is planned with plan.LeaseExpiry (from the lease's end, however
// late this runs): ready, backing off (stateBackoff, holding its FIFO group),
// or doomed (queue.doomed, for flushDoomedLocked: a dead letter, or an
// expiry of its time to live, whose reason stays its last failure's). It
// reports whether any message became ready. (A message whose time to live
// passed while it was delayed or backing off becomes ready here all the
// same: expireDueLocked, which runs after it, removes it.)
func (q *queue) promote(now int64) bool {
	moved, rearm := false, false
	for len(q.timed) > 0 && q.timed[0].visibleAt <= now {
		m := heap.Pop(&q.timed).(*msg)
		if m.state != stateInflight {
			q.delayed--
			m.state = stateReady
			heap.Push(&q.ready, m)
			q.readyAge.add(m.visibleAt)
			q.fifoReady(m)
			moved = true
			continue
		}
		// The lease ended unsettled at m.visibleAt.
		lp := plan.LeaseExpiry(q.Config, m.facts(), fromNanos(m.visibleAt))
		if lp.SetReason && lp.Fate != plan.FateExpired {
			// Written with the next change of the record. An expiry's
			// reason and failure are the dead letter's alone
			// (flushDoomedLocked, expireLocked).
			m.addFailure(lp.Reason, m.visibleAt)
		}
		m.attempts = int32(lp.Attempts)
		switch {
		case lp.Fate == plan.FateDeadLetter || lp.Fate == plan.FateExpired:
			m.state = stateDoomed // still counted in flight, the group still held
			q.doomed = append(q.doomed, m)
			continue
		case lp.Fate == plan.FateDelayed && nanos(lp.At) > now:
			m.state, m.visibleAt = stateBackoff, nanos(lp.At)
			q.inflight--
			q.delayed++
			heap.Push(&q.timed, m)
			q.fifoLeased(m, -1) // the head is not ready: the group stays held
			rearm = true        // waiters re-arm their timers for the backoff's end
			continue
		}
		q.inflight--
		m.state, m.visibleAt = stateReady, nanos(lp.At)
		heap.Push(&q.ready, m)
		q.readyAge.add(m.visibleAt)
		q.fifoLeased(m, -1)
		moved = true
	}
	if moved || rearm {
		q.notify()
	}
	return moved
}

// facts is what the retry planners know of m.
func (m *msg) facts() plan.LeaseFacts {
	return plan.LeaseFacts{MessageID: m.id(), Attempts: int(m.attempts), MaxAttempts: int(m.maxAttempts),
		ExpiresAt: fromNanos(m.expiresAt())}
}

// expired reports whether m is past its queue's retention at now.
func (q *queue) expired(m *msg, now int64) bool {
	return m.sentAt+int64(q.Config.Retention) <= now
}

// nextExpiry is when the oldest message of q expires (ok false if empty).
func (q *queue) nextExpiry() (int64, bool) {
	if len(q.age) == 0 {
		return 0, false
	}
	return q.age[0].sentAt + int64(q.Config.Retention), true
}

func nanos(t time.Time) int64 { return t.UnixNano() }

func fromNanos(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// readyHeap orders ready messages by priority (higher first), then
// fair-queue turn (lower first), then key (send order). On a FIFO queue
// every turn is 0, and receives go by group (fifo.go's avail), not by this
// order.
type readyHeap []*msg

func (h readyHeap) Len() int { return len(h) }
func (h readyHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	if a.turn != b.turn {
		return a.turn < b.turn
	}
	return a.key < b.key
}
func (h readyHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].pos = int32(i); h[j].pos = int32(j) }
func (h *readyHeap) Push(x any)   { m := x.(*msg); m.pos = int32(len(*h)); *h = append(*h, m) }
func (h *readyHeap) Pop() any {
	old := *h
	m := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	m.pos = -1
	return m
}

// timedHeap orders delayed and in-flight messages by visibleAt.
type timedHeap []*msg

func (h timedHeap) Len() int { return len(h) }
func (h timedHeap) Less(i, j int) bool {
	if h[i].visibleAt != h[j].visibleAt {
		return h[i].visibleAt < h[j].visibleAt
	}
	return h[i].key < h[j].key
}
func (h timedHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].pos = int32(i); h[j].pos = int32(j) }
func (h *timedHeap) Push(x any)   { m := x.(*msg); m.pos = int32(len(*h)); *h = append(*h, m) }
func (h *timedHeap) Pop() any {
	old := *h
	m := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	m.pos = -1
	return m
}

// ageHeap orders all messages of a queue by sentAt (retention order).
type ageHeap []*msg

func (h ageHeap) Len() int { return len(h) }
func (h ageHeap) Less(i, j int) bool {
	if h[i].sentAt != h[j].sentAt {
		return h[i].sentAt < h[j].sentAt
	}
	return h[i].key < h[j].key
}
func (h ageHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].agePos = int32(i)
	h[j].agePos = int32(j)
}
func (h *ageHeap) Push(x any) { m := x.(*msg); m.agePos = int32(len(*h)); *h = append(*h, m) }
func (h *ageHeap) Pop() any {
	old := *h
	m := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	m.agePos = -1
	return m
}
