package model

// The failure reasons a backend records when no reason was given.
const (
	// ReasonLeaseExpired: the lease ended with neither a delete nor a nack.
	ReasonLeaseExpired = "lease expired"
	// ReasonNack: a nack without a reason (ChangeMessageVisibility to 0).
	ReasonNack = "nacked"
	// ReasonMaxAttempts: a receive found the message past its attempts (its
	// queue's maxReceiveCount was lowered, or its failure was not seen).
	ReasonMaxAttempts = "maximum attempts reached"
	// ReasonExpired: the message's time to live passed (config_ttl.go) and
	// its queue moved it to the dead-letter queue.
	ReasonExpired = "expired"
)

// MaxReasonBytes bounds a failure reason; a longer one is cut (at a UTF-8
// boundary) by the front.
const MaxReasonBytes = 1024

// MaxAttempts is a message's attempt limit: its own Sluice.MaxAttempts when
// set (> 0), else its queue's maxReceiveCount; 0 when the queue has no
// RedrivePolicy (no limit: nothing to move to).
func MaxAttempts(r *RedrivePolicy, own int) int {
	if r == nil {
		return 0
	}
	if own > 0 {
		return own
	}
	return r.MaxReceiveCount
}
