package model

import (
	"time"
	"unicode/utf8"
)

// LeaseOutcome is what a backend did with one receipt of Delete or
// ChangeVisibility; the front turns it into the answer (LeaseError).
type LeaseOutcome uint8

// The lease outcomes.
const (
	// LeaseApplied: the receipt is the message's latest lease; the change was made.
	LeaseApplied LeaseOutcome = iota
	// LeaseStale: the message is gone, or was leased again since.
	LeaseStale
	// LeaseOtherQueue: the receipt belongs to another queue (or an earlier
	// queue of the same name).
	LeaseOtherQueue
	// LeaseEnded: the receipt is the latest, but its lease has ended (the
	// message is visible again); nothing was changed.
	LeaseEnded
)

// VisibilityChange is one ChangeVisibility entry: a decoded receipt and what
// to do with its lease. The backend plans it with plan.LeaseChange against
// the message as it finds it, inside its atomic step.
type VisibilityChange struct {
	Receipt Receipt
	// Kind is what the consumer asks for (ChangeTimeout for SQS).
	Kind LeaseChangeKind
	// Timeout is the new remaining lease time (ChangeTimeout; 0..12 h,
	// checked by the front; 0 is a nack) or the snooze (Snooze; 0 = release).
	Timeout time.Duration
	// Delay is a Nack's explicit delay before the message is visible again
	// (nil: the queue's retry policy, or at once).
	Delay *time.Duration
	// Reason is a Nack's or DeadLetterNow's failure reason (at most
	// MaxReasonBytes).
	Reason string
}

// LeaseChangeKind is the kind of a VisibilityChange.
type LeaseChangeKind uint8

// The lease change kinds (plan.LeaseChange says what each does).
const (
	// ChangeTimeout is SQS's ChangeMessageVisibility and the native extend.
	ChangeTimeout LeaseChangeKind = iota
	// Nack is a failure, with an optional reason and delay.
	Nack
	// Snooze hands the message back for a while without counting an attempt.
	Snooze
	// DeadLetterNow moves the message to the dead-letter queue at once.
	DeadLetterNow
)

// LeaseEntry is one consumer control on a leased message (ChangeLeases).
type LeaseEntry struct {
	// ID is the batch entry id ("" for a single call).
	ID      string
	Receipt string
	// Kind, Timeout, Delay and Reason are VisibilityChange's. Timeout is
	// the new lease time for ChangeTimeout (0..12 h) and the snooze for
	// Snooze (0..12 h); Delay a Nack's explicit delay (0..12 h).
	Kind    LeaseChangeKind
	Timeout time.Duration
	Delay   *time.Duration
	Reason  string
}

// CutReason cuts a failure reason to MaxReasonBytes at a UTF-8 boundary.
func CutReason(s string) string {
	if len(s) <= MaxReasonBytes {
		return s
	}
	s = s[:MaxReasonBytes]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
