package embedded

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/broker"
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
	upgrade := b.db.NewBatch() // version-1 metadata records rewritten as version 2
	defer upgrade.Close()
	for _, q := range b.queues {
		lo, hi := kindRange(q.ID, kindMeta)
		it, err := b.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return err
		}
		for it.First(); it.Valid(); it.Next() {
			k := it.Key()
			key := u64(k[len(k)-8:])
			v := it.Value()
			m, err := decodeMeta(key, v)
			if err == nil && v[0] == metaV1 {
				err = b.upgradeMeta(q, m, upgrade)
			}
			if err != nil {
				_ = it.Close()
				return fmt.Errorf("embedded: message %d of queue %s: %w", key, q.Name, err)
			}
			// Indexed as stored (every timed message in timed), then
			// promoted below: a lease that ended while the broker was down
			// is planned as any expiry (PlanLeaseExpiry from its end), so a
			// backoff ends at the instant it would have without the restart.
			// Added in key (send) order: the fair-queue turns start again
			// from 1 and keep each tenant's order (fair.go).
			q.add(m, math.MinInt64)
			if key >= b.nextKey {
				b.nextKey = key + 1
			}
			total++
		}
		if err := it.Close(); err != nil {
			return err
		}
		q.promote(now) // doomed messages are moved by the sweeper's first step
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

func (b *Backend) getU64(key []byte) (uint64, error) {
	v, c, err := b.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return u64(v), nil
}

// upgradeMeta fills in the message id of m, decoded from a version-1
// metadata record, from its body record, and writes m as version 2 in batch.
func (b *Backend) upgradeMeta(q *queue, m *msg, batch *pebble.Batch) error {
	v, closer, err := b.db.Get(msgKey(q.ID, kindBody, m.key))
	if err != nil {
		return fmt.Errorf("read body to upgrade metadata: %w", err)
	}
	var body broker.Message
	err = decodeBody(v, &body)
	_ = closer.Close()
	if err != nil {
		return err
	}
	m.id = body.ID
	return batch.Set(msgKey(q.ID, kindMeta, m.key), encodeMeta(m), nil)
}
