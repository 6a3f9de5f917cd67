package embedded

import (
	"container/heap"
	"encoding/binary"
	"sort"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
)

// FIFO queues.
//
// # Where the state lives
//
//   - Group lock: derived, never stored on its own. A message's metadata
//     record holds its state and lease deadline; a group is locked while any
//     of its messages is in flight. Restart rebuilds the groups from the
//     metadata records, so a lock survives it with its deadline.
//   - Order: the message key. Keys are handed out under Backend.mu in send
//     order and never reused (the key ceiling), so within a queue they are
//     the send order; a group's messages are kept sorted by key.
//   - Sequence numbers: the message key as well (monotonic per queue and
//     across restarts, never reused). A dead-lettered message gets the key,
//     hence the sequence number, of its new place in the dead-letter queue.
//   - Dedup window: the queue's (dedup.go, shared with standard queues),
//     whose entries hold the sequence number a duplicate is answered with.
//   - Receive-attempt cache: one record per ReceiveRequestAttemptId,
//     0x03 <qid> 0x04 <attempt id>, holding its expiry, whether it was
//     invalidated, and the (key, lease, receipt handle) of each message it
//     returned; written in the batch of the receive (or of the delete or
//     visibility change that invalidates it).
//
// Attempt records lie inside the queue's range (deleted with the queue)
// and inside the purge range. Expired records are dropped lazily: by
// receives of their queue (gcAttemptsLocked) and by the restart scan.
//
// # Receiving
//
// avail is a heap of groups that may be receivable, by their head's key
// (oldest first). It is validated lazily: an entry is checked when popped,
// and groups are pushed whenever they may have become receivable (a message
// became ready, a lease ended, the head went away): touch. A receive pops
// groups and takes from each as many consecutive ready messages from its head
// as it may ("as many messages of the same group as possible"), then the
// next group. A group with a message in flight, or whose head is still
// delayed, yields nothing: strict order within a group.

const kindAttempt byte = 0x04

// fifoState is the FIFO part of a queue (nil on standard queues). Every
// field is guarded by Backend.mu.
type fifoState struct {
	groups map[string]*group
	avail  availHeap
	// attempts is the receive-attempt cache by attempt id; attemptOrder the
	// same entries in the order they were added (expiry order unless the
	// clock stepped back, which only delays their cleanup: lookups check the
	// expiry); byMsg maps a message key to the latest attempt that returned
	// it (to invalidate that attempt on a delete or visibility change).
	attempts     map[string]*attempt
	attemptOrder []*attempt
	byMsg        map[uint64]*attempt
}

func newFifoState() *fifoState {
	return &fifoState{
		groups: map[string]*group{}, attempts: map[string]*attempt{}, byMsg: map[uint64]*attempt{},
	}
}

// group is one MessageGroupId of a FIFO queue.
type group struct {
	id string
	// pending is every message of the group still in the queue, whatever
	// its state, in key (send) order. The head, pending[0], is the next to
	// deliver.
	pending []*msg
	// inflight counts the leased messages of pending: the lock is inflight > 0.
	inflight int
	// queued: avail holds an entry for this group.
	queued bool
}

// receivable reports whether a receive may take the group's head now.
func (g *group) receivable() bool {
	return g.inflight == 0 && len(g.pending) > 0 && g.pending[0].state == stateReady && g.pending[0].pos >= 0
}

type availEntry struct {
	head uint64 // key of the head when pushed (heads only move forward)
	g    *group
}

type availHeap []availEntry

func (h availHeap) Len() int           { return len(h) }
func (h availHeap) Less(i, j int) bool { return h[i].head < h[j].head }
func (h availHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *availHeap) Push(x any)        { *h = append(*h, x.(availEntry)) }
func (h *availHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// ---- index hooks (called from index.go; no-ops on standard queues) ----

func (q *queue) fifoGroup(m *msg) *group {
	g := q.fifo.groups[m.groupID()]
	if g == nil {
		g = &group{id: m.groupID()}
		q.fifo.groups[m.groupID()] = g
	}
	return g
}

// fifoInsert adds a new message (not yet placed) to its group, in key order.
func (q *queue) fifoInsert(m *msg) {
	if q.fifo == nil {
		return
	}
	g := q.fifoGroup(m)
	if n := len(g.pending); n == 0 || g.pending[n-1].key < m.key {
		g.pending = append(g.pending, m)
		return
	}
	i := sort.Search(len(g.pending), func(i int) bool { return g.pending[i].key >= m.key })
	g.pending = append(g.pending, nil)
	copy(g.pending[i+1:], g.pending[i:])
	g.pending[i] = m
}

// fifoLeased counts a message entering (+1) or leaving (-1) the in-flight set.
func (q *queue) fifoLeased(m *msg, delta int) {
	if q.fifo == nil {
		return
	}
	g := q.fifoGroup(m)
	g.inflight += delta
	if delta < 0 {
		q.touch(g)
	}
}

// fifoReady notes that m became ready.
func (q *queue) fifoReady(m *msg) {
	if q.fifo != nil {
		q.touch(q.fifoGroup(m))
	}
}

// fifoDrop removes a forgotten message from its group.
func (q *queue) fifoDrop(m *msg) {
	if q.fifo == nil {
		return
	}
	g := q.fifo.groups[m.groupID()]
	if g == nil {
		return
	}
	i := sort.Search(len(g.pending), func(i int) bool { return g.pending[i].key >= m.key })
	if i < len(g.pending) && g.pending[i] == m {
		if i == 0 {
			g.pending[0] = nil
			g.pending = g.pending[1:]
		} else {
			g.pending = append(g.pending[:i], g.pending[i+1:]...)
		}
	}
	if len(g.pending) == 0 && g.inflight == 0 {
		delete(q.fifo.groups, g.id) // a stale avail entry is dropped when popped
		return
	}
	q.touch(g)
}

// touch pushes g to avail if it is receivable and not queued, and wakes the
// waiting receives: a group lock ending is a message becoming available.
func (q *queue) touch(g *group) {
	if g.queued || !g.receivable() {
		return
	}
	g.queued = true
	heap.Push(&q.fifo.avail, availEntry{head: g.pending[0].key, g: g})
	q.notify()
}

// popAvail returns the receivable group with the oldest head, or nil.
func (f *fifoState) popAvail() *group {
	for len(f.avail) > 0 {
		e := heap.Pop(&f.avail).(availEntry)
		g := e.g
		if f.groups[g.id] != g || !g.receivable() {
			g.queued = false
			continue
		}
		if head := g.pending[0].key; head != e.head {
			heap.Push(&f.avail, availEntry{head: head, g: g}) // stale position
			continue
		}
		g.queued = false
		return g
	}
	return nil
}

// ---- receive ----

// claimFifoLocked is claimLocked for a FIFO queue: up to n messages, whole
// runs of a group's head first. With attemptID set, a non-empty result is
// recorded in the receive-attempt cache (in batch).
func (b *Backend) claimFifoLocked(q *queue, batch *pebble.Batch, n int, vis, now int64, attemptID string) []claimed {
	q.gcDedupLocked(batch, now)
	b.gcAttemptsLocked(q, batch, now)
	var out []claimed
	var leased []*msg
	for len(out) < n {
		g := q.fifo.popAvail()
		if g == nil {
			break
		}
		// Messages leased by this claim stay at the front of g.pending
		// (unplaced until the end); taken counts them.
		for taken := 0; len(out) < n && taken < len(g.pending); {
			m := g.pending[taken]
			if m.state != stateReady || m.pos < 0 {
				break
			}
			q.unplace(m)
			if !b.leaseLocked(q, m, batch, vis, now) {
				continue
			}
			leased = append(leased, m)
			out = append(out, claimed{key: m.key, lease: m.lease, msg: messageOf(m),
				receipt: b.receipts.Encode(model.Receipt{QueueID: q.ID, Key: m.key, Lease: m.lease})})
			taken++
		}
	}
	for _, m := range leased {
		q.place(m, now)
	}
	if attemptID != "" && len(out) > 0 {
		a := &attempt{id: attemptID, expiresAt: now + int64(model.AttemptWindow)}
		for _, c := range out {
			a.items = append(a.items, attemptItem{key: c.key, lease: c.lease, receipt: c.receipt})
			q.fifo.byMsg[c.key] = a
		}
		q.fifo.attempts[attemptID] = a
		q.fifo.attemptOrder = append(q.fifo.attemptOrder, a)
		_ = batch.Set(fifoKey(q.ID, kindAttempt, attemptID), a.encode(), nil)
	}
	return out
}

// messageOf is the metadata part of a delivery of m.
func messageOf(m *msg) model.Message {
	out := model.Message{
		SentAt: fromNanos(m.sentAt), GroupID: m.groupID(), DedupID: m.dedupID(),
		Priority: int(m.priority), ReceiveCount: int(m.receiveCount),
		Attempts: int(m.attempts), MaxAttempts: int(m.maxAttempts),
		FirstReceiveAt: fromNanos(m.firstReceiveAt()), LastReceiveAt: fromNanos(m.lastReceiveAt()),
		FailureReason: m.failureReason(), DeadLetterSource: m.deadLetterSource(),
	}
	if m.seq() != 0 {
		out.SequenceNumber = model.FormatSequenceNumber(m.seq())
	}
	return out
}

// replayAttemptLocked answers a receive whose attempt id is in the cache:
// the same messages and receipt handles, if every one is still under the
// lease that receive gave it (a lease whose deadline is now has ended, even
// before promote ran) and none was deleted or had its visibility changed;
// AttemptNotRetryableError otherwise. ok is false when the id is
// unknown (or expired): the receive then proceeds as a new one.
func (q *queue) replayAttemptLocked(id string, now int64) (claims []claimed, ok bool, err error) {
	a := q.fifo.attempts[id]
	if a == nil || a.expiresAt <= now {
		return nil, false, nil
	}
	if a.invalid {
		return nil, true, model.AttemptNotRetryableError(id)
	}
	for _, it := range a.items {
		m := q.msgs[it.key]
		if m == nil || m.lease != it.lease || m.state != stateInflight || m.visibleAt <= now {
			return nil, true, model.AttemptNotRetryableError(id)
		}
		claims = append(claims, claimed{key: it.key, lease: it.lease, msg: messageOf(m), receipt: it.receipt})
	}
	return claims, true, nil
}

// invalidateAttemptLocked marks the attempt that returned m under its
// current lease as no longer retryable (m is being deleted or its
// visibility changed), writing the change in batch.
func (q *queue) invalidateAttemptLocked(m *msg, batch *pebble.Batch) {
	if q.fifo == nil {
		return
	}
	a := q.fifo.byMsg[m.key]
	if a == nil || a.invalid {
		return
	}
	for _, it := range a.items {
		if it.key == m.key && it.lease == m.lease {
			a.invalid = true
			_ = batch.Set(fifoKey(q.ID, kindAttempt, a.id), a.encode(), nil)
			return
		}
	}
}

// gcAttemptsLocked forgets the receive attempts that expired, deleting
// their records in batch.
func (b *Backend) gcAttemptsLocked(q *queue, batch *pebble.Batch, now int64) {
	f := q.fifo
	for len(f.attemptOrder) > 0 && f.attemptOrder[0].expiresAt <= now {
		a := f.attemptOrder[0]
		f.attemptOrder[0] = nil
		f.attemptOrder = f.attemptOrder[1:]
		if f.attempts[a.id] == a {
			delete(f.attempts, a.id)
			_ = batch.Delete(fifoKey(q.ID, kindAttempt, a.id), nil)
		}
		for _, it := range a.items {
			if f.byMsg[it.key] == a {
				delete(f.byMsg, it.key)
			}
		}
	}
}

// ---- dead-letter move ----

// deadLetter adjusts nm, a copy of a message moving into the dead-letter
// queue dlq under key nm.key, by plan.DeadLetter (a new sequence
// number is the new key).
func deadLetter(nm *msg, body []byte, dlqFifo bool, now int64) {
	var m model.Message
	if decodeBody(body, &m) != nil {
		m.ID = "" // unreadable: no message id to take as dedup id
	}
	d := plan.DeadLetter(m.ID, fromNanos(nm.sentAt), dlqFifo, fromNanos(now))
	if d.DedupID != "" {
		nm.setDedupID(d.DedupID)
	}
	if d.NewSequence {
		nm.setSeq(nm.key)
	}
	nm.sentAt = nanos(d.SentAt)
}

// ---- records ----

func fifoKey(qid uint64, kind byte, id string) []byte {
	return append(append(dataPrefix(qid), kind), id...)
}

// attempt is one cached receive.
type attempt struct {
	id        string
	expiresAt int64
	invalid   bool
	items     []attemptItem
}

type attemptItem struct {
	key, lease uint64
	receipt    string
}

// Attempt record, version 1: ver(1) expiresAt(varint ns) invalid(1)
// count(uvarint) then per message key(uvarint) lease(uvarint) receipt(str).
const attemptV1 = 1

func (a *attempt) encode() []byte {
	b := []byte{attemptV1}
	b = binary.AppendVarint(b, a.expiresAt)
	inv := byte(0)
	if a.invalid {
		inv = 1
	}
	b = append(b, inv)
	b = binary.AppendUvarint(b, uint64(len(a.items)))
	for _, it := range a.items {
		b = binary.AppendUvarint(b, it.key)
		b = binary.AppendUvarint(b, it.lease)
		b = appendStr(b, it.receipt)
	}
	return b
}

func decodeAttempt(id string, v []byte) (*attempt, error) {
	if len(v) < 2 || v[0] != attemptV1 {
		return nil, errCorrupt
	}
	dec := decoder{b: v[1:]}
	a := &attempt{id: id, expiresAt: dec.varint()}
	if dec.err == nil && len(dec.b) > 0 {
		a.invalid = dec.b[0] == 1
		dec.b = dec.b[1:]
	}
	n := dec.uvarint()
	if n > model.MaxReceiveMessages {
		return nil, errCorrupt
	}
	for i := uint64(0); i < n && dec.err == nil; i++ {
		a.items = append(a.items, attemptItem{key: dec.uvarint(), lease: dec.uvarint(), receipt: dec.str()})
	}
	return a, dec.err
}

// recoverFifo loads q's receive-attempt cache (after its messages),
// deleting the records that expired while the broker was down.
func (b *Backend) recoverFifo(q *queue, now int64) error {
	batch := b.db.NewBatch()
	defer batch.Close()
	lo, hi := kindRange(q.ID, kindAttempt)
	it, err := b.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		id := string(it.Key()[len(lo):])
		a, err := decodeAttempt(id, it.Value())
		if err != nil {
			_ = it.Close()
			return err
		}
		if a.expiresAt <= now {
			_ = batch.Delete(it.Key(), nil)
			continue
		}
		q.fifo.attempts[id] = a
		q.fifo.attemptOrder = append(q.fifo.attemptOrder, a)
		for _, x := range a.items {
			if m := q.msgs[x.key]; m != nil && m.lease == x.lease {
				q.fifo.byMsg[x.key] = a
			}
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	f := q.fifo
	sort.Slice(f.attemptOrder, func(i, j int) bool { return f.attemptOrder[i].expiresAt < f.attemptOrder[j].expiresAt })
	if batch.Empty() {
		return nil
	}
	return batch.Commit(pebble.Sync)
}
