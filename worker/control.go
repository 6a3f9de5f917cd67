package worker

import (
	"fmt"
	"time"
)

// DeadLetterError, returned by a handler (wrapped or not), moves the message
// to its queue's dead-letter queue at once, with Reason: for a message that
// can never succeed. Make one with DeadLetterNow; match it with errors.As.
type DeadLetterError struct {
	Reason string
}

func (e *DeadLetterError) Error() string { return "dead-letter now: " + e.Reason }

// DeadLetterNow returns a *DeadLetterError with the reason.
func DeadLetterNow(reason string) error { return &DeadLetterError{Reason: reason} }

// SnoozeError, returned by a handler, makes the message visible again after
// Delay without counting the attempt (on Sluice; on plain SQS a snooze is a
// visibility change and the receive counts). Make one with Snooze.
type SnoozeError struct {
	Delay time.Duration
}

func (e *SnoozeError) Error() string { return fmt.Sprintf("snooze for %s", e.Delay) }

// Snooze returns a *SnoozeError for d. A negative d is 0 (visible again at
// once), and a d past MaxDelay is cut to it when the outcome is applied.
func Snooze(d time.Duration) error { return &SnoozeError{Delay: max(d, 0)} }

// RetryAfterError, returned by a handler, is a failed attempt (it counts,
// and past the last one the message is dead-lettered) retried after Delay
// instead of the queue's backoff. Make one with RetryAfter.
type RetryAfterError struct {
	Delay time.Duration
	Err   error
}

func (e *RetryAfterError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("retry after %s", e.Delay)
	}
	return fmt.Sprintf("retry after %s: %v", e.Delay, e.Err)
}

func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryAfter returns a *RetryAfterError for d, wrapping err (which may be
// nil): its text is the failure reason kept with the message. A negative d
// is 0, and a d past MaxDelay is cut to it when the outcome is applied.
//
// Delay 0 means no delay of the handler's own: on Sluice the queue's
// RetryPolicy backoff applies (or the message is visible again at once
// without one); on plain SQS sqssource's client-side backoff applies.
func RetryAfter(d time.Duration, err error) error {
	return &RetryAfterError{Delay: max(d, 0), Err: err}
}
