package model

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
)

// The pure FIFO rules every backend shares: id formats, the dedup id of a
// send, the dedup key by scope, the wire form of sequence numbers, the
// errors of the receive-attempt cache. The state they act on (group locks,
// the dedup window, attempt caches, sequence counters) is durable backend
// state (docs/architecture.md).
//
// FifoThroughputLimit=perMessageGroupId (high-throughput mode) is accepted,
// stored and returned, and behaves as perQueue: Sluice applies no per-API
// throughput limit, so the two modes differ only in the dedup scope that
// high-throughput mode requires (DeduplicationScope=messageGroup).

const (
	// DedupWindow is how long a FIFO dedup id is remembered after the send
	// that introduced it, on the injected clock. It is not extended by
	// duplicates, and it outlives the message (a delete does not end it);
	// PurgeQueue clears it.
	DedupWindow = 5 * time.Minute
	// AttemptWindow is how long a ReceiveRequestAttemptId is remembered after
	// the receive that introduced it.
	AttemptWindow = 5 * time.Minute
	// MaxFifoIDLength bounds MessageGroupId, MessageDeduplicationId and
	// ReceiveRequestAttemptId (1..128 characters).
	MaxFifoIDLength = 128
	// SequenceNumberDigits is the width of a FIFO sequence number on the wire
	// (zero-padded decimal, so that string order is numeric order).
	SequenceNumberDigits = 20
)

// DedupScope is a FIFO queue's DeduplicationScope: which sends a dedup id
// is remembered for (plan.DedupKey).
type DedupScope string

// The dedup scopes.
const (
	// DedupScopeQueue: a dedup id is a duplicate in any group (the default).
	DedupScopeQueue DedupScope = "queue"
	// DedupScopeMessageGroup: a dedup id is a duplicate within its group.
	DedupScopeMessageGroup DedupScope = "messageGroup"
)

// ThroughputLimit is a FIFO queue's FifoThroughputLimit. Sluice applies no
// per-API throughput limit, so both behave alike; perMessageGroupId (AWS's
// high-throughput mode) needs DedupScopeMessageGroup.
type ThroughputLimit string

// The throughput limits.
const (
	ThroughputPerQueue          ThroughputLimit = "perQueue"
	ThroughputPerMessageGroupID ThroughputLimit = "perMessageGroupId"
)

// ValidFifoID reports whether s is a valid MessageGroupId,
// MessageDeduplicationId or ReceiveRequestAttemptId: 1..128 characters, each
// alphanumeric or ASCII punctuation (that is, printable ASCII except space).
func ValidFifoID(s string) bool {
	if len(s) < 1 || len(s) > MaxFifoIDLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// ValidateFifoID checks one of the FIFO ids (param names it: MessageGroupId,
// MessageDeduplicationId or ReceiveRequestAttemptId) and gives SQS's
// InvalidParameterValue text when it is malformed.
func ValidateFifoID(param, value string) error {
	if ValidFifoID(value) {
		return nil
	}
	return InvalidParameterError(value, param, param+" can only include alphanumeric and punctuation characters. 1 to 128 in length.")
}

// validateGroupFields is the per-entry part of the FIFO rules, called by
// ValidateSendEntry. A MessageGroupId is allowed on a standard queue too
// (fair queues: it carries no ordering there) and is validated the same way;
// so is a MessageDeduplicationId (idempotent sends: config_dedup.go).
func validateGroupFields(c QueueConfig, e *SendEntry) error {
	if e.GroupID != "" {
		if err := ValidateFifoID("MessageGroupId", e.GroupID); err != nil {
			return err
		}
	}
	if e.DedupID != "" {
		if err := ValidateFifoID("MessageDeduplicationId", e.DedupID); err != nil {
			return err
		}
	}
	return nil
}

// ContentDedupID is the dedup id of content-based deduplication: the
// lower-case hex SHA-256 of the body only (attributes do not count).
func ContentDedupID(body string) string {
	sum := sha256.Sum256([]byte(body))
	return hex.EncodeToString(sum[:])
}

// FormatSequenceNumber renders a FIFO sequence number as SQS does: a decimal
// string, here zero-padded to 20 digits so that string order is numeric order.
func FormatSequenceNumber(n uint64) string {
	return fmt.Sprintf("%0*d", SequenceNumberDigits, n)
}

// AttemptNotRetryableError is the error of a receive whose
// ReceiveRequestAttemptId names a receive within AttemptWindow that can no
// longer be replayed: one of its messages was deleted, had its visibility
// changed, or was leased again.
func AttemptNotRetryableError(attemptID string) error {
	return InvalidParameterError(attemptID, "ReceiveRequestAttemptId", "The receiveRequestAttemptId is not valid anymore since the receive call is not retryable.")
}

// ReceiptExpiredError is the error of a FIFO delete whose receipt is the latest
// lease of its message but that lease has expired (the group lock it held is
// gone, so the delete could break the group's order).
func ReceiptExpiredError(receipt string) error {
	return InvalidParameterError(receipt, "ReceiptHandle", "The receipt handle has expired.")
}
