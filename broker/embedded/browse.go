package embedded

import (
	"context"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/broker/model"
)

// browseChunk is how many body records Browse reads between two looks at
// the index (each look holds Backend.mu briefly).
const browseChunk = 256

// Browse implements storage.Backend. It walks the queue's body records in key
// order (send order; backwards for Newest) from the cursor, which is the last
// key examined, and takes each message's state and counts from the index:
// a body whose message is no longer indexed (deleted, moved, not yet
// committed) is passed over, as is an expired one. At most
// model.BrowseScanLimit records are examined per page; nothing is changed
// (no lease, no count).
func (b *Backend) Browse(ctx context.Context, name model.QueueRef, req model.BrowseRequest) (model.BrowsePage, error) {
	if err := b.enter(ctx); err != nil {
		return model.BrowsePage{}, err
	}
	defer b.life.Done()
	var after uint64
	if req.After != "" {
		k, err := strconv.ParseUint(req.After, 10, 64)
		if err != nil {
			return model.BrowsePage{}, model.Errorf(model.ErrInvalidParameterValue, "Value %s for parameter after is invalid. Reason: not a cursor of this queue.", req.After)
		}
		after = k
	}
	limit := req.Limit
	if limit <= 0 {
		limit = 20
	}
	b.mu.Lock()
	q := b.queues[name]
	if q == nil {
		b.mu.Unlock()
		return model.BrowsePage{}, model.QueueNotFoundError()
	}
	b.promoteLocked(q, nil, b.now())
	qid := q.ID
	b.mu.Unlock()

	lo, hi := kindRange(qid, kindBody)
	switch {
	case req.After != "" && req.Newest:
		hi = msgKey(qid, kindBody, after)
	case req.After != "":
		lo = msgKey(qid, kindBody, after+1)
	}
	it, err := b.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return model.BrowsePage{}, err
	}
	defer it.Close()
	step := it.Next
	valid := it.First()
	if req.Newest {
		step, valid = it.Prev, it.Last()
	}

	type rec struct {
		key  uint64
		body []byte
	}
	var page model.BrowsePage
	examined := 0
	var last uint64 // the last key examined: the cursor
	more := false   // records examined past the last one taken remain
	for valid && !more && examined < model.BrowseScanLimit {
		if err := ctx.Err(); err != nil {
			return model.BrowsePage{}, err
		}
		if err := b.space.stalledRefusal(); err != nil { // the lock may be held by a stalled write
			return model.BrowsePage{}, err
		}
		var chunk []rec
		for ; valid && len(chunk) < browseChunk && examined+len(chunk) < model.BrowseScanLimit; valid = step() {
			k := it.Key()
			chunk = append(chunk, rec{key: u64(k[len(k)-8:]), body: append([]byte(nil), it.Value()...)})
		}
		// Their state, under the lock.
		metas := make([]*model.BrowsedMessage, len(chunk))
		b.mu.Lock()
		if q.deleted {
			b.mu.Unlock()
			return model.BrowsePage{}, model.QueueNotFoundError()
		}
		now := b.now()
		for i, r := range chunk {
			m := q.msgs[r.key]
			if m == nil || q.expired(m, now) || (m.ttlPassed(now) && m.state != stateInflight) {
				continue // gone, or going (an expired message in flight is still its holder's)
			}
			bm := &model.BrowsedMessage{Message: messageOf(m)}
			switch m.state {
			case stateReady:
				bm.State = model.StateVisible
			case stateInflight, stateDoomed:
				bm.State, bm.VisibleAt = model.StateInFlight, fromNanos(m.visibleAt)
			default:
				bm.State, bm.VisibleAt = model.StateDelayed, fromNanos(m.visibleAt)
			}
			metas[i] = bm
		}
		b.mu.Unlock()
		for i, r := range chunk {
			if len(page.Messages) == limit {
				more = true // chunk[i:] are left for the next page
				break
			}
			examined++
			last = r.key
			bm := metas[i]
			if bm == nil {
				continue
			}
			if err := decodeBody(r.body, &bm.Message); err != nil {
				b.log.Error("browse: corrupt body", "queue", name.String(), "key", r.key, "err", err)
				continue
			}
			if req.Filter.Match(&bm.Message) {
				page.Messages = append(page.Messages, *bm)
			}
		}
		if len(page.Messages) == limit && valid {
			more = true
		}
	}
	if more || valid {
		page.Next = strconv.FormatUint(last, 10)
	}
	if err := it.Error(); err != nil {
		return model.BrowsePage{}, err
	}
	return page, nil
}

// DeleteMessages implements storage.Backend: one look through the queue's
// index for the ids, and the deletes in one synced batch. A message in
// flight loses its lease (its FIFO group is free), a doomed or backing-off
// one is gone too.
func (b *Backend) DeleteMessages(ctx context.Context, name model.QueueRef, ids []string) ([]bool, error) {
	found := make([]bool, len(ids))
	err := b.update(ctx, name, func(q *queue, batch *pebble.Batch) error {
		// Ids compare as UUIDs do, in any case (message ids are stored in
		// lower case), as on PostgreSQL; an id asked for twice is found at
		// both places.
		want := make(map[string][]int, len(ids))
		for i, id := range ids {
			id = strings.ToLower(id)
			want[id] = append(want[id], i)
		}
		var hit []*msg
		for _, m := range q.msgs {
			if at, ok := want[m.id()]; ok {
				for _, i := range at {
					found[i] = true
				}
				hit = append(hit, m)
			}
		}
		for _, m := range hit {
			q.invalidateAttemptLocked(m, batch)
			q.remove(m)
			deleteMessageRecords(batch, q.ID, m.key)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return found, nil
}
