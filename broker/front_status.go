package broker

import (
	"context"
	"errors"

	"github.com/sluicemq/sluice/broker/model"
)

// MessageStatus answers the status of message id on queue (the native
// API's GET /v1/queues/{queue}/messages/{id}); found is false when the queue
// knows no such message. The rules, in one place:
//   - A live message is ready, in flight (until LeaseEndsAt), delayed (not
//     received yet) or backing off (received before: a nack's delay, a
//     retry policy's backoff, a snooze), visible at VisibleAt; a message
//     in a dead-letter queue (it has a DeadLetterSource) is dead-lettered,
//     whatever its lease there.
//   - A message the queue no longer holds but keeps a record of (its
//     CompletedRetentionSeconds) is completed, expired or replayed (with
//     the id the replay gave it).
//   - A dead-lettered message keeps its id: asked on the queue it came
//     from, which no longer holds it, it is found in that queue's
//     dead-letter queue (its RedrivePolicy's, as it is now) and answered
//     dead-lettered there, with DeadLetterQueue naming it; once replayed
//     from there, it is answered replayed (with its new id) while the
//     dead-letter queue keeps the record.
func (b *Broker) MessageStatus(ctx context.Context, queue, id string) (st model.MessageStatus, found bool, err error) {
	ref, err := b.resolve(ctx, model.ActionBrowse, queue)
	if err != nil {
		return st, false, err
	}
	l, err := b.backend.LookupMessage(ctx, ref, id)
	if err != nil {
		return st, false, err
	}
	if l.Live == nil && l.Record == nil {
		// Moved to the dead-letter queue?
		q, err := b.backend.GetQueue(ctx, ref)
		if err != nil {
			return st, false, err
		}
		if r := q.Config.Redrive; r != nil && r.DeadLetterQueue != ref.Name {
			dl, err := b.backend.LookupMessage(ctx, model.QueueRef{Account: ref.Account, Name: r.DeadLetterQueue}, id)
			switch {
			case errors.Is(err, model.ErrQueueDoesNotExist):
				// The policy names a queue that is gone: nothing there.
			case err != nil:
				return st, false, err
			case dl.Live != nil && dl.Live.DeadLetterSource == ref.Name,
				dl.Record != nil && dl.Record.State == model.JobReplayed && dl.Record.Source == ref.Name:
				st = statusOf(r.DeadLetterQueue, dl)
				st.Queue = ref.Name
				return st, true, nil
			}
		}
		return st, false, nil
	}
	return statusOf(ref.Name, l), true, nil
}

// statusOf is the status of what a lookup on queue found (not nothing).
func statusOf(queue string, l model.MessageLookup) model.MessageStatus {
	if r := l.Record; r != nil {
		st := model.MessageStatus{ID: r.ID, Queue: queue, State: r.State, Attempts: r.Attempts, Reason: r.Reason}
		switch r.State {
		case model.JobCompleted:
			st.CompletedAt, st.Result = r.At, r.Result
		case model.JobExpired:
			st.ExpiredAt = r.At
		case model.JobReplayed:
			st.ReplayedAs = r.ReplayedAs
		}
		return st
	}
	m := l.Live
	st := model.MessageStatus{ID: m.ID, Queue: queue, Attempts: m.Attempts, ReceiveCount: m.ReceiveCount, Reason: m.FailureReason,
		Failures: l.Failures, FailureCount: l.FailureCount}
	switch {
	case m.DeadLetterSource != "":
		st.State, st.DeadLetterQueue, st.DeadLetterSource = model.JobDeadLettered, queue, m.DeadLetterSource
	case m.State == model.StateInFlight:
		st.State, st.LeaseEndsAt = model.JobInFlight, m.VisibleAt
	case m.State == model.StateDelayed && m.ReceiveCount > 0:
		st.State, st.VisibleAt = model.JobBackingOff, m.VisibleAt
	case m.State == model.StateDelayed:
		st.State, st.VisibleAt = model.JobDelayed, m.VisibleAt
	default:
		st.State, st.VisibleAt = model.JobReady, m.VisibleAt
	}
	return st
}
