package embedded

import (
	"context"
	"runtime"
	"strings"

	"github.com/sluicemq/sluice/broker/model"
)

// lookupChunk is how many messages LookupMessage looks at per hold of
// Backend.mu (a millisecond or so).
var lookupChunk = 4096

// LookupMessage implements storage.Backend. The index has no map by message
// id (it would cost every queued message an entry), so the live message is
// found by one look through the queue's index, as DeleteMessages finds its
// ids; its body is read from the store after. A status is polled, so the
// look lets go of the lock every lookupChunk messages: one look at a queue
// of a million messages takes 100 ms or more, which, held at once, stalled
// every other call of the store that long. A Go map may change between
// the steps of a range over it (the changes are serialized by the lock): a
// message added meanwhile is new, so not the one sought, and one removed
// meanwhile has left the queue, as if looked up after.
func (b *Backend) LookupMessage(ctx context.Context, name model.QueueRef, id string) (model.MessageLookup, error) {
	if err := b.enter(ctx); err != nil {
		return model.MessageLookup{}, err
	}
	defer b.life.Done()
	id = strings.ToLower(id)
	want, isUUID := parseMsgID(id)
	b.mu.Lock()
	q := b.queues[name]
	if q == nil {
		b.mu.Unlock()
		return model.MessageLookup{}, model.QueueNotFoundError()
	}
	var found *msg
	n := 0
	for _, m := range q.msgs {
		if (isUUID && m.uuid == want && (m.x == nil || m.x.id == "")) || (!isUUID && m.id() == id) {
			found = m
			break
		}
		if n++; n%lookupChunk == 0 {
			b.mu.Unlock()
			runtime.Gosched()
			if err := ctx.Err(); err != nil {
				return model.MessageLookup{}, err
			}
			b.mu.Lock()
			if b.queues[name] != q {
				b.mu.Unlock()
				return model.MessageLookup{}, model.QueueNotFoundError() // deleted meanwhile
			}
		}
	}
	now := b.now()
	b.promoteLocked(q, nil, now)
	var bm model.BrowsedMessage
	var key uint64
	var failures []model.Failure
	var failureCount int
	qid := q.ID
	if found != nil && (q.expired(found, now) || (found.ttlPassed(now) && found.state != stateInflight)) {
		found = nil // going (an expired message in flight is still its holder's)
	}
	if found != nil {
		key = found.key
		bm = model.BrowsedMessage{Message: messageOf(found)}
		bm.ID = found.id()
		failures, failureCount = found.failureHistory()
		switch found.state {
		case stateReady:
			bm.State, bm.VisibleAt = model.StateVisible, fromNanos(found.visibleAt) // when it became visible
		case stateInflight, stateDoomed:
			bm.State, bm.VisibleAt = model.StateInFlight, fromNanos(found.visibleAt)
		default:
			bm.State, bm.VisibleAt = model.StateDelayed, fromNanos(found.visibleAt)
		}
	}
	b.mu.Unlock()
	if found == nil {
		rec, err := b.readRecord(qid, recordID(id))
		if err != nil || rec == nil {
			return model.MessageLookup{}, err
		}
		return model.MessageLookup{Record: rec}, nil
	}
	body, closer, err := b.db.Get(msgKey(qid, kindBody, key))
	if err != nil {
		// Deleted between the look and the read: it is gone now.
		return model.MessageLookup{}, nil
	}
	err = decodeBody(body, &bm.Message)
	_ = closer.Close()
	if err != nil {
		b.log.Error("lookup: corrupt body", "queue", name.String(), "key", key, "err", err)
		return model.MessageLookup{}, nil
	}
	return model.MessageLookup{Live: &bm, Failures: failures, FailureCount: failureCount}, nil
}
