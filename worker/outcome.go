package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxReasonBytes bounds a failure reason (Sluice keeps at most 1 KiB): a
// longer error text is cut at a UTF-8 boundary.
const MaxReasonBytes = 1024

// MaxDelay bounds a snooze's or a retry-after's delay: 12 h, the longest
// visibility timeout SQS and Sluice take. A longer one is cut to it.
const MaxDelay = 12 * time.Hour

// PanicError is the error a handler's panic becomes (Invoke): the panic's
// value and the stack of the goroutine that panicked.
type PanicError struct {
	Value any
	Stack []byte
}

// Error is "panic: <value>", without the stack (the failure reason kept with
// the message; the pool logs the stack).
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Unwrap returns the panic's value when it is an error (panic(err)).
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// Invoke calls h for m as a pool does: ctx carries m's trace context
// (TraceParent), and a panic is recovered and returned as a *PanicError.
// OutcomeOf(err) is then what the pool does with the message.
func Invoke(ctx context.Context, h Handler, m *Message) (err error) {
	if m.TraceContext != "" {
		ctx = WithTraceParent(ctx, m.TraceContext)
	}
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return h.HandleMessage(ctx, m)
}

// OutcomeOf is the outcome of a handler's result, the one rule the pool
// and package workertest share:
//   - nil: KindAck.
//   - a *DeadLetterError (errors.As, so wrapped too): KindDeadLetter with
//     its reason.
//   - a *SnoozeError: KindSnooze for its delay.
//   - a *RetryAfterError: KindNack with its delay, the text of the error
//     it wraps as the reason.
//   - any other error (a *PanicError too): KindNack with the error's text
//     as the reason and no delay (the queue's retry policy decides).
//
// A delay is cut to MaxDelay. A reason is made valid for every broker (invalid UTF-8 and characters
// outside XML's set, which SQS refuses, become U+FFFD) and cut to
// MaxReasonBytes.
func OutcomeOf(err error) Outcome {
	if err == nil {
		return Outcome{Kind: KindAck}
	}
	var dl *DeadLetterError
	var sn *SnoozeError
	var ra *RetryAfterError
	switch {
	case errors.As(err, &dl):
		return Outcome{Kind: KindDeadLetter, Reason: CleanReason(dl.Reason)}
	case errors.As(err, &sn):
		return Outcome{Kind: KindSnooze, Delay: min(max(sn.Delay, 0), MaxDelay)}
	case errors.As(err, &ra):
		reason := ra.Error()
		if ra.Err != nil {
			reason = ra.Err.Error()
		}
		return Outcome{Kind: KindNack, Reason: CleanReason(reason), Delay: min(max(ra.Delay, 0), MaxDelay)}
	}
	return Outcome{Kind: KindNack, Reason: CleanReason(err.Error())}
}

// CleanReason makes s a valid failure reason for every broker: invalid
// UTF-8 and characters outside XML 1.0's set (which SQS refuses in a
// message) become U+FFFD, and it is cut to MaxReasonBytes at a character
// boundary. OutcomeOf applies it; a Source that stores a reason given to
// Settle directly applies it too.
func CleanReason(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' || (r >= 0x20 && r <= 0xD7FF) || (r >= 0xE000 && r <= 0xFFFD) || r >= 0x10000 {
			return r
		}
		return '\uFFFD'
	}, s)
	if len(s) <= MaxReasonBytes {
		return s
	}
	i := MaxReasonBytes
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// String names the kind ("ack", "nack", ...).
func (k Kind) String() string {
	switch k {
	case KindAck:
		return "ack"
	case KindNack:
		return "nack"
	case KindSnooze:
		return "snooze"
	case KindRelease:
		return "release"
	case KindDeadLetter:
		return "dead-letter"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}
