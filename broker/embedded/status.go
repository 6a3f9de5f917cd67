package embedded

import (
	"context"
	"strings"

	"github.com/sluicemq/sluice/broker/model"
)

// LookupMessage implements storage.Backend. The index has no map by message
// id (it would cost every queued message an entry), so the live message is
// found by one look through the queue's index under the lock, as
// DeleteMessages finds its ids; its body is read from the store after.
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
	now := b.now()
	b.promoteLocked(q, nil, now)
	var found *msg
	for _, m := range q.msgs {
		if (isUUID && m.uuid == want && (m.x == nil || m.x.id == "")) || (!isUUID && m.id() == id) {
			found = m
			break
		}
	}
	var bm model.BrowsedMessage
	var key uint64
	qid := q.ID
	if found != nil && (q.expired(found, now) || (found.ttlPassed(now) && found.state != stateInflight)) {
		found = nil // going (an expired message in flight is still its holder's)
	}
	if found != nil {
		key = found.key
		bm = model.BrowsedMessage{Message: messageOf(found)}
		bm.ID = found.id()
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
	return model.MessageLookup{Live: &bm}, nil
}
