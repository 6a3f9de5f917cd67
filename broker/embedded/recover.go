package embedded

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/broker/model"
)

// recover rebuilds the in-memory index from the store: the counters, the
// queue records, and each queue's message metadata (bodies are not read).
// It runs in Open before any other goroutine exists.
func (b *Backend) recover() error {
	var err error
	if b.nextQID, err = b.getU64(keyNextQueueID); err != nil {
		return err
	}
	if b.nextQID == 0 {
		b.nextQID = 1
	}
	ceiling, err := b.getU64(keyKeyCeiling)
	if err != nil {
		return err
	}
	if ceiling == 0 {
		ceiling = 1 // key 0 is never used
	}
	b.nextKey = ceiling

	it, err := b.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxQueue}, UpperBound: []byte{pfxQueue + 1}})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		var rec queueRecord
		if err := json.Unmarshal(it.Value(), &rec); err != nil {
			_ = it.Close()
			return fmt.Errorf("embedded: queue record %q: %w", it.Key(), err)
		}
		q := newQueue(rec)
		b.queues[rec.ref()] = q
		b.byID[rec.ID] = q
		if rec.ID >= b.nextQID {
			b.nextQID = rec.ID + 1
		}
	}
	if err := it.Close(); err != nil {
		return err
	}

	now := b.now()
	total := 0
	upgrade := b.db.NewBatch() // version-1 metadata records rewritten as the current version
	defer upgrade.Close()
	defer gcPaused()()
	for _, q := range b.queues {
		n, last, err := b.loadQueue(q, upgrade)
		if err != nil {
			return err
		}
		if n > 0 && last >= b.nextKey {
			b.nextKey = last + 1
		}
		total += n
		q.promote(now) // doomed messages are moved by the sweeper's first step
		if q.recordDue, err = b.firstRecordDue(q.ID); err != nil {
			return fmt.Errorf("embedded: message records of queue %s: %w", q.Name, err)
		}
		if err := b.recoverDedup(q, now); err != nil {
			return fmt.Errorf("embedded: dedup window of queue %s: %w", q.Name, err)
		}
		if q.fifo != nil {
			if err := b.recoverFifo(q, now); err != nil {
				return fmt.Errorf("embedded: FIFO state of queue %s: %w", q.Name, err)
			}
		}
	}

	if !upgrade.Empty() {
		if err := upgrade.Commit(pebble.Sync); err != nil {
			return err
		}
	}
	// Reserve a block of keys durably before handing any out.
	b.keyCeiling = b.nextKey + keyBlock
	if err := b.db.Set(keyKeyCeiling, u64Bytes(b.keyCeiling), pebble.Sync); err != nil {
		return err
	}
	b.log.Info("embedded store opened", "queues", len(b.queues), "messages", total)
	return nil
}

// getU64 reads a counter of the store (0 when absent).
func (b *Backend) getU64(key []byte) (uint64, error) { return getU64(b.db, key) }

// upgradeMeta fills in the message id of m, decoded from a version-1
// metadata record, from its body record, and writes m in the current
// version in batch.
func (b *Backend) upgradeMeta(q *queue, m *msg, batch *pebble.Batch) error {
	v, closer, err := b.db.Get(msgKey(q.ID, kindBody, m.key))
	if err != nil {
		return fmt.Errorf("read body to upgrade metadata: %w", err)
	}
	var body model.Message
	err = decodeBody(v, &body)
	_ = closer.Close()
	if err != nil {
		return err
	}
	m.setID(body.ID)
	return batch.Set(msgKey(q.ID, kindMeta, m.key), encodeMeta(m), nil)
}

// loadQueue reads the metadata records of q into its index and reports how
// many there were and the highest key among them. The records are read and
// decoded in parallel over slices of the queue's key range (scanMeta), then
// indexed in key order on this goroutine: the order is what the fair-queue
// turns and the FIFO groups are built from (fair.go, fifo.go). Messages
// are indexed as stored (every timed message in timed); the caller promotes
// them: a lease that ended while the broker was down is planned as any expiry
// (plan.LeaseExpiry from its end), so a backoff ends at the instant it would
// have without the restart.
func (b *Backend) loadQueue(q *queue, upgrade *pebble.Batch) (n int, last uint64, err error) {
	parts, err := b.scanMeta(q)
	if err != nil {
		return 0, 0, err
	}
	for _, p := range parts {
		for _, m := range p.v1 {
			if err := b.upgradeMeta(q, m, upgrade); err != nil {
				return 0, 0, fmt.Errorf("embedded: message %d of queue %s: %w", m.key, q.Name, err)
			}
		}
		if p.err != nil {
			return 0, 0, p.err
		}
		n += len(p.msgs)
	}
	if n == 0 {
		return 0, 0, nil
	}
	// One slice of all the messages in key order: the retention heap once
	// heapified (nearly in order already), sized once.
	all := make([]*msg, 0, n)
	for _, p := range parts {
		all = append(all, p.msgs...)
	}
	last = all[n-1].key
	q.load(all)
	return n, last, nil
}

// metaPart is what scanMeta read from one slice of a queue's key range.
type metaPart struct {
	msgs []*msg // decoded, in key order
	v1   []*msg // those stored as version 1 (to be upgraded)
	err  error  // the first error of the slice, which ends it
}

// scanParallelMin is the key span below which a queue is read by a single
// goroutine.
var scanParallelMin uint64 = 1 << 14

// scanMeta reads and decodes the metadata records of q, in parallel over
// GOMAXPROCS slices of its key range (keys are handed out in send order
// across the store, so a queue's keys spread over its range). The parts come
// back in key order; each stops at its first error, so the first error in
// key order is the first error of the first part that has one.
func (b *Backend) scanMeta(q *queue) ([]metaPart, error) {
	lo, hi := kindRange(q.ID, kindMeta)
	it, err := b.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, err
	}
	var first, last uint64
	empty := !it.First()
	if !empty {
		k := it.Key()
		first = u64(k[len(k)-8:])
		if it.Last() {
			k = it.Key()
			last = u64(k[len(k)-8:])
		}
	}
	if err := it.Close(); err != nil {
		return nil, b.metaDamaged(q, err)
	}
	if empty {
		return nil, nil
	}
	workers := runtime.GOMAXPROCS(0)
	if last < first || last-first < scanParallelMin || workers < 2 { // last < first: a damaged key, reported by the scan
		workers = 1
	}
	parts := make([]metaPart, workers)
	step := (last - first) / uint64(workers)
	var wg sync.WaitGroup
	for i := range parts {
		plo, phi := lo, hi
		if i > 0 {
			plo = msgKey(q.ID, kindMeta, first+step*uint64(i))
		}
		if i < workers-1 {
			phi = msgKey(q.ID, kindMeta, first+step*uint64(i+1))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			parts[i] = b.scanMetaRange(q, plo, phi)
		}()
	}
	wg.Wait()
	return parts, nil
}

// scanMetaRange reads and decodes the metadata records of q in [lo, hi).
func (b *Backend) scanMetaRange(q *queue, lo, hi []byte) (p metaPart) {
	it, err := b.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		p.err = err
		return p
	}
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		key := u64(k[len(k)-8:])
		v := it.Value()
		m, err := decodeMeta(key, v)
		if err != nil {
			_ = it.Close()
			p.err = fmt.Errorf("embedded: message %d of queue %s: %w", key, q.Name, err)
			return p
		}
		if v[0] == metaV1 {
			p.v1 = append(p.v1, m)
		}
		p.msgs = append(p.msgs, m)
	}
	if err := it.Close(); err != nil {
		p.err = b.metaDamaged(q, err)
	}
	return p
}

// metaDamaged is the error of a metadata scan that the store failed.
func (b *Backend) metaDamaged(q *queue, err error) error {
	return fmt.Errorf("embedded: read the metadata of queue %s: %s: the store is damaged; `sluice store verify` lists what, `sluice store salvage` copies the rest", q.Name, problemText(err))
}

// gcPauses counts the recovers running (Open may run concurrently for
// several stores in one process); gcPercent is the setting they restore.
var (
	gcPauseMu sync.Mutex
	gcPauses  int
	gcPercent int
)

// gcPaused relaxes the garbage collector's pacing (GOGC 400, unless the
// process runs with a higher one or with the collector off) until the
// function it returns is called, and returns that function. Nearly all that
// recover allocates stays live (the index), so collecting at the default
// pace marks a growing heap again and again for little to free (at 10
// million messages, most of the restart's CPU); at 400 the heap is marked
// a few times in all, and what is not live stays bounded by four times
// what is (a memory limit, GOMEMLIMIT, still applies).
const recoverGCPercent = 400

func gcPaused() (restore func()) {
	gcPauseMu.Lock()
	if gcPauses == 0 {
		gcPercent = debug.SetGCPercent(recoverGCPercent)
		if gcPercent < 0 || gcPercent > recoverGCPercent {
			debug.SetGCPercent(gcPercent) // the process's own is laxer: kept
		}
	}
	gcPauses++
	gcPauseMu.Unlock()
	return func() {
		gcPauseMu.Lock()
		if gcPauses--; gcPauses == 0 {
			debug.SetGCPercent(gcPercent)
		}
		gcPauseMu.Unlock()
	}
}
