package plan

import "github.com/sluicemq/sluice/broker/model"

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

// DedupID returns the dedup id of a FIFO send: the explicit
// MessageDeduplicationId, which wins, or the content-based one. It is "" on
// standard queues and when neither applies (ValidateSendGroupParams refuses
// that case).
func DedupID(c model.QueueConfig, e *model.SendEntry) string {
	switch {
	case !c.Fifo:
		return ""
	case e.DedupID != "":
		return e.DedupID
	case c.ContentBasedDedup:
		return model.ContentDedupID(e.Body)
	}
	return ""
}

// DedupKey is the key of the dedup window for a send with group id group
// and dedup id dedup: the dedup id alone with DeduplicationScope=queue (the
// same id in another group is a duplicate), or the pair (group, dedup id)
// with messageGroup. A NUL separates the pair; neither id can contain one.
func DedupKey(c model.QueueConfig, group, dedup string) string {
	if c.DedupScope == model.DedupScopeMessageGroup {
		return group + "\x00" + dedup
	}
	return dedup
}
