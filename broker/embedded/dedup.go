package embedded

import (
	"container/heap"
	"encoding/binary"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/broker/internal/plan"
)

// Deduplication: the dedup window of every queue (FIFO, and standard
// queues whose sends carry a MessageDeduplicationId), and the index of the
// messages that hold a dedup id on a standard queue (DeduplicationUntil=
// settled). plan.Original decides what is a duplicate; this file keeps the
// state it reads.
//
// # Where the state lives
//
//   - Window: one record per dedup key, 0x03 <qid> 0x03 <DedupKey>, holding
//     its expiry, message id and (FIFO) sequence number; written in the
//     batch of the send that introduced it, so it is as durable as the
//     message. Its expiry is fixed at that send (the window of the queue's
//     settings then: model.QueueConfig.DedupWindowOf). The records lie
//     inside the queue's range (deleted with the queue) and inside the purge
//     range (PurgeQueue clears the window). Expired records are dropped
//     lazily: by sends (and FIFO receives) of their queue, and by the
//     restart scan.
//   - Live carriers (standard queues): no record of their own. A message's
//     dedup id is in its metadata record, so the index (queue.live) is
//     rebuilt with the messages at restart; it is kept in step by the index
//     hooks (add, load, forget), so an id leaves it when its last message
//     leaves the queue (deleted, dead-lettered, expired, purged).
//
// A standard queue whose sends carry no dedup id has an empty window and
// an empty index: its sends pay one length check.

const kindDedup byte = 0x03

// dedupEntry is one dedup key in the window.
type dedupEntry struct {
	key       string // DedupKey
	expiresAt int64  // Unix ns
	messageID string
	seq       uint64 // the FIFO sequence number; 0 on standard queues
}

// dedupWindow is a queue's dedup window. Guarded by Backend.mu.
type dedupWindow struct {
	// entries holds the window by DedupKey (nil until the first entry);
	// expiry is the same entries by expiry (a heap). A key sent again after
	// its entry expired gets a new entry; the old one stays in expiry until
	// popped, and gc drops only the entry entries still maps.
	entries map[string]*dedupEntry
	expiry  expiryHeap
}

type expiryHeap []*dedupEntry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].expiresAt < h[j].expiresAt }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(*dedupEntry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

// originalLocked applies plan.Original to a send of dedup key key (and, on a
// standard queue, dedup id id) at now: the message id (and FIFO sequence
// number) a duplicate is answered with, or ok false.
func (q *queue) originalLocked(key, id string, now int64) (messageID string, seq uint64, ok bool) {
	var f plan.DedupFound
	d := q.window.entries[key]
	if d != nil {
		f.WindowID, f.WindowUntil = d.messageID, fromNanos(d.expiresAt)
	}
	if q.Config.DedupUntilSettled() {
		// A carrier past its retention or time to live that no one removed
		// yet (a send runs no expiry pass) is gone (plan.CarrierStays).
		for _, m := range q.live[id] {
			held := m.state == stateInflight && m.visibleAt > now
			if plan.CarrierStays(q.Config, fromNanos(m.sentAt), fromNanos(m.expiresAt()), held, fromNanos(now)) {
				f.LiveID = m.id()
				break
			}
		}
	}
	messageID = plan.Original(q.Config, f, fromNanos(now))
	if messageID == "" {
		return "", 0, false
	}
	if d != nil && messageID == d.messageID {
		seq = d.seq
	}
	return messageID, seq, true
}

// rememberLocked puts a dedup key in the window for the queue's window from
// now, in memory and in batch.
func (q *queue) rememberLocked(batch *pebble.Batch, key, messageID string, seq uint64, now int64) {
	d := &dedupEntry{key: key, expiresAt: now + int64(q.Config.DedupWindowOf()), messageID: messageID, seq: seq}
	if q.window.entries == nil {
		q.window.entries = map[string]*dedupEntry{}
	}
	q.window.entries[key] = d
	heap.Push(&q.window.expiry, d)
	_ = batch.Set(fifoKey(q.ID, kindDedup, key), d.encode(), nil)
}

// gcDedupLocked forgets the window entries that expired, deleting their
// records in batch.
func (q *queue) gcDedupLocked(batch *pebble.Batch, now int64) {
	w := &q.window
	for len(w.expiry) > 0 && w.expiry[0].expiresAt <= now {
		d := heap.Pop(&w.expiry).(*dedupEntry)
		if w.entries[d.key] == d {
			delete(w.entries, d.key)
			_ = batch.Delete(fifoKey(q.ID, kindDedup, d.key), nil)
		}
	}
}

// ---- live carriers (index hooks, called from index.go) ----

// dedupInsert adds m to the live carriers of a standard queue when it
// counts (plan.LiveCarrier).
func (q *queue) dedupInsert(m *msg) {
	if q.fifo != nil || m.x == nil || !plan.LiveCarrier(m.x.dedupID, m.x.seq) {
		return
	}
	if q.live == nil {
		q.live = map[string][]*msg{}
	}
	q.live[m.x.dedupID] = append(q.live[m.x.dedupID], m)
}

// dedupDrop removes a forgotten message from the live carriers.
func (q *queue) dedupDrop(m *msg) {
	if q.fifo != nil || m.x == nil || !plan.LiveCarrier(m.x.dedupID, m.x.seq) {
		return
	}
	id := m.x.dedupID
	ms := q.live[id]
	for i, x := range ms {
		if x == m {
			ms = append(ms[:i], ms[i+1:]...)
			break
		}
	}
	if len(ms) == 0 {
		delete(q.live, id)
	} else {
		q.live[id] = ms
	}
}

// ---- records ----

// Dedup record, version 1: ver(1) expiresAt(varint ns) seq(uvarint) messageID(str).
const dedupV1 = 1

func (d *dedupEntry) encode() []byte {
	b := make([]byte, 0, 24+len(d.messageID))
	b = append(b, dedupV1)
	b = binary.AppendVarint(b, d.expiresAt)
	b = binary.AppendUvarint(b, d.seq)
	return appendStr(b, d.messageID)
}

func decodeDedup(key string, v []byte) (*dedupEntry, error) {
	if len(v) < 1 || v[0] != dedupV1 {
		return nil, errCorrupt
	}
	dec := decoder{b: v[1:]}
	d := &dedupEntry{key: key, expiresAt: dec.varint(), seq: dec.uvarint(), messageID: dec.str()}
	return d, dec.err
}

// recoverDedup loads q's dedup window, deleting the records that expired
// while the broker was down. Every queue has one (a standard queue's is
// usually empty: one seek).
func (b *Backend) recoverDedup(q *queue, now int64) error {
	batch := b.db.NewBatch()
	defer batch.Close()
	lo, hi := kindRange(q.ID, kindDedup)
	it, err := b.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		key := string(it.Key()[len(lo):])
		d, err := decodeDedup(key, it.Value())
		if err != nil {
			_ = it.Close()
			return err
		}
		if d.expiresAt <= now {
			_ = batch.Delete(it.Key(), nil)
			continue
		}
		if q.window.entries == nil {
			q.window.entries = map[string]*dedupEntry{}
		}
		q.window.entries[key] = d
		q.window.expiry = append(q.window.expiry, d)
	}
	if err := it.Close(); err != nil {
		return err
	}
	heap.Init(&q.window.expiry)
	if batch.Empty() {
		return nil
	}
	return batch.Commit(pebble.Sync)
}
