package model

import (
	"time"
	"unicode/utf8"
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
