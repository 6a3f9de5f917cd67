package embedded

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/broker/model"
)

// Message records (model.MessageRecord): what a queue with a
// CompletedRetention keeps of a message that left it (completed, expired,
// replayed), for its status by id. They live in the store only, never in
// memory, under two keys of the queue's range:
//
//	0x03 <qid:8> 0x06 <id>                the record (JSON storedRecord)
//	0x03 <qid:8> 0x07 <due:8> <id>        its due time (Unix ns), empty
//
// The second orders them by when they go, for the retention sweeper
// (sweepRecords), which deletes both. In memory a queue keeps only the
// earliest due time (queue.recordDue), read at open with one seek. A purge
// keeps the records; deleting the queue deletes them with its range.
const (
	kindRecord    byte = 0x06
	kindRecordDue byte = 0x07
)

func recordKey(qid uint64, id string) []byte {
	return append(append(dataPrefix(qid), kindRecord), id...)
}

func recordDueKey(qid uint64, due int64, id string) []byte {
	k := binary.BigEndian.AppendUint64(append(dataPrefix(qid), kindRecordDue), uint64(due))
	return append(k, id...)
}

// storedRecord is a record's stored form.
type storedRecord struct {
	State      model.JobState `json:"s"`
	At         int64          `json:"at"`
	Due        int64          `json:"due"`
	Attempts   int            `json:"n,omitempty"`
	Result     *string        `json:"r,omitempty"`
	ReplayedAs string         `json:"as,omitempty"`
	Reason     string         `json:"why,omitempty"`
	Source     string         `json:"src,omitempty"`
}

// putRecordLocked writes in batch the record of m, leaving q now, when q
// keeps records (its CompletedRetention); b.mu must be held.
func (b *Backend) putRecordLocked(q *queue, m *msg, batch *pebble.Batch, now int64, state model.JobState, result *string, replayedAs string) {
	keep := int64(q.Config.CompletedRetention)
	if keep <= 0 {
		return
	}
	id := m.id()
	rec := storedRecord{State: state, At: now, Due: now + keep, Attempts: int(m.attempts), Result: result,
		ReplayedAs: replayedAs, Reason: m.failureReason(), Source: m.deadLetterSource()}
	v, err := json.Marshal(rec)
	if err != nil {
		panic(err) // plain data: cannot fail
	}
	_ = batch.Set(recordKey(q.ID, id), v, nil)
	_ = batch.Set(recordDueKey(q.ID, rec.Due, id), nil, nil)
	q.recordWrites++
	if q.recordDue == 0 || rec.Due < q.recordDue {
		q.recordDue = rec.Due
	}
	if b.sweepAt == 0 || rec.Due < b.sweepAt {
		b.sweepAt = rec.Due
		b.sweeper.Kick()
	}
}

// readRecord reads the record of message id (lower case) of queue qid: nil
// when there is none, or it is due.
func (b *Backend) readRecord(qid uint64, id string) (*model.MessageRecord, error) {
	v, closer, err := b.db.Get(recordKey(qid, id))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rec storedRecord
	err = json.Unmarshal(v, &rec)
	_ = closer.Close()
	if err != nil {
		b.log.Error("lookup: corrupt message record", "queue_id", qid, "message_id", id, "err", err)
		return nil, nil
	}
	if rec.Due <= b.now() {
		return nil, nil // gone, before the sweeper deleted it
	}
	return &model.MessageRecord{ID: id, State: rec.State, At: fromNanos(rec.At), Attempts: rec.Attempts,
		Result: rec.Result, ReplayedAs: rec.ReplayedAs, Reason: rec.Reason, Source: rec.Source}, nil
}

// firstRecordDue is the earliest due time of queue qid's records (0: none).
func (b *Backend) firstRecordDue(qid uint64) (int64, error) {
	lo, hi := kindRange(qid, kindRecordDue)
	it, err := b.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	if !it.First() {
		return 0, it.Error()
	}
	k := it.Key()
	return int64(u64(k[len(lo) : len(lo)+8])), nil
}

// sweepRecords deletes the due records of every queue, sweepBudget at a
// time in one synced batch, and returns the earliest due time left (0:
// none) and whether more are due now. The records are read outside b.mu
// (nothing else deletes them); queue.recordDue is updated under it.
func (b *Backend) sweepRecords() (next int64, more bool) {
	type due struct {
		q      *queue
		writes uint64 // q.recordWrites when read
	}
	b.mu.Lock()
	if b.refusal() != nil {
		// The store refuses writes (a full disk): as sweepOnce, write
		// nothing; the records stay hidden past their due time (readRecord).
		b.mu.Unlock()
		return 0, false
	}
	now := b.now()
	var qs []due
	for _, q := range b.queues {
		if q.recordDue != 0 {
			if q.recordDue <= now {
				qs = append(qs, due{q, q.recordWrites})
			} else if next == 0 || q.recordDue < next {
				next = q.recordDue
			}
		}
	}
	b.mu.Unlock()
	if len(qs) == 0 {
		return next, false
	}
	batch := b.db.NewBatch()
	n := 0
	firsts := make([]int64, len(qs))
	for i, d := range qs {
		lo, hi := kindRange(d.q.ID, kindRecordDue)
		it, err := b.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			b.log.Error("record sweep failed", "err", err)
			_ = batch.Close()
			return now, false
		}
		valid := it.First()
		for ; valid; valid = it.Next() {
			k := it.Key()
			at := int64(u64(k[len(lo) : len(lo)+8]))
			if at > now || n >= sweepBudget {
				firsts[i] = at
				break
			}
			id := string(k[len(lo)+8:])
			_ = batch.Delete(append([]byte(nil), k...), nil)
			_ = batch.Delete(recordKey(d.q.ID, id), nil)
			n++
		}
		_ = it.Close()
		if n >= sweepBudget && valid && firsts[i] <= now {
			more = true
		}
	}
	b.mu.Lock()
	for i, d := range qs {
		switch {
		case d.q.recordWrites == d.writes:
			d.q.recordDue = firsts[i] // exact: nothing written since
		case firsts[i] != 0 && firsts[i] < d.q.recordDue:
			d.q.recordDue = firsts[i]
		}
		// Else q.recordDue stays a lower bound (at worst a spare sweep).
		if f := d.q.recordDue; f != 0 && (next == 0 || f < next) {
			next = f
		}
	}
	err := b.applyLocked(batch)
	b.mu.Unlock()
	if err := b.wait(batch, err); err != nil {
		b.log.Error("record sweep failed", "err", err)
	}
	return next, more
}

// recordID is a message id as records key it (ids compare in any case).
func recordID(id string) string { return strings.ToLower(id) }
