package plan

import (
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// ValidateSendGroupParams checks the FIFO parameters of a whole send call,
// before anything is stored: on a FIFO queue every entry needs a
// MessageGroupId (ErrMissingParameter) and a MessageDeduplicationId unless
// the queue has ContentBasedDeduplication (ErrInvalidParameterValue). As in
// SQS, a missing FIFO parameter fails the whole call, batch or not; a
// malformed one fails only its entry (ValidateSendEntry).
func ValidateSendGroupParams(c model.QueueConfig, entries []model.SendEntry) error {
	if !c.Fifo {
		return nil
	}
	for i := range entries {
		if entries[i].GroupID == "" {
			return model.Errorf(model.ErrMissingParameter, "The request must contain the parameter MessageGroupId.")
		}
	}
	for i := range entries {
		if entries[i].DedupID == "" && !c.ContentBasedDedup {
			return model.Errorf(model.ErrInvalidParameterValue, "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly")
		}
	}
	return nil
}

// DedupID returns the dedup id of a send: the explicit
// MessageDeduplicationId, which wins, or on a FIFO queue with
// ContentBasedDeduplication the content-based one. It is "" when neither
// applies: a standard queue's send without an id (which is not
// deduplicated), or a FIFO send ValidateSendGroupParams refuses.
func DedupID(c model.QueueConfig, e *model.SendEntry) string {
	switch {
	case e.DedupID != "":
		return e.DedupID
	case c.Fifo && c.ContentBasedDedup:
		return model.ContentDedupID(e.Body)
	}
	return ""
}

// DedupKey is the key of the dedup window for a send with group id group
// and dedup id dedup: the dedup id alone with DeduplicationScope=queue (the
// same id in another group is a duplicate) and on every standard queue (a
// group is a tenant there, not a scope), or the pair (group, dedup id) with
// messageGroup. A NUL separates the pair; neither id can contain one.
func DedupKey(c model.QueueConfig, group, dedup string) string {
	if c.Fifo && c.DedupScope == model.DedupScopeMessageGroup {
		return group + "\x00" + dedup
	}
	return dedup
}

// DedupFound is what a backend found for a send's DedupKey, inside the
// send's atomic step.
type DedupFound struct {
	// WindowID is the message id of the key's dedup window entry ("" when
	// there is none), and WindowUntil when that entry expires.
	WindowID    string
	WindowUntil time.Time
	// LiveID is the message id of a message in the queue carrying the
	// dedup id ("" when none). A backend looks for one only on a queue
	// whose DedupUntilSettled holds; see LiveCarrier and CarrierStays for
	// which messages count.
	LiveID string
}

// Original is the dedup rule of a send on queue settings c at now, given
// what the backend found for its key: the message id the send is answered
// with as a duplicate (it stores nothing), or "" when it is not one and is
// stored (its window entry then replaces an expired one).
//
// An id is a duplicate while its window entry has not expired, FIFO or
// standard; the entry's message id is the answer. On a standard queue with
// DeduplicationUntil=settled it is also a duplicate while a message carrying
// it is in the queue, whatever its state; that message's id is then the
// answer. The PostgreSQL backend spells the same rule in SQL
// (broker/postgres/dedup.go).
func Original(c model.QueueConfig, f DedupFound, now time.Time) string {
	if f.WindowID != "" && f.WindowUntil.After(now) {
		return f.WindowID
	}
	if c.DedupUntilSettled() && f.LiveID != "" {
		return f.LiveID
	}
	return ""
}

// LiveCarrier reports whether a message counts for DeduplicationUntil=settled
// on its standard queue: it carries a dedup id and no FIFO sequence number.
// Messages sent to the queue with an id count, and so do dead letters moved
// into it from a standard source queue, which keep theirs (a message moved by
// a move task is a new message without one). A FIFO message (a sequence
// number) never counts: a FIFO queue has no settled mode, and its dead
// letters go to FIFO queues only; the rule keeps the FIFO queues' messages,
// which all carry a dedup id, out of the PostgreSQL index of carriers.
func LiveCarrier(dedupID string, seq uint64) bool {
	return dedupID != "" && seq == 0
}

// CarrierStays reports whether a live carrier (LiveCarrier) of a queue with
// settings c, sent at sentAt and expiring at expiresAt (zero: it has no time
// to live), still holds its dedup id at now; held reports that a lease that
// has not ended holds it. A message past its retention does not (the
// retention deletes it whatever its state), nor does one whose time to live
// passed and that no live lease holds (it is expired, and never handed out
// again): both are gone to a send, though the sweeper, or the next receive,
// may not have removed them yet. One held by a live lease past its time to
// live stays until its lease ends (its holder may still delete it). The
// PostgreSQL backend spells the same rule in SQL (broker/postgres/dedup.go).
func CarrierStays(c model.QueueConfig, sentAt, expiresAt time.Time, held bool, now time.Time) bool {
	if !sentAt.Add(c.Retention).After(now) {
		return false
	}
	return held || !model.Expired(expiresAt, now)
}
