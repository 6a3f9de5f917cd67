package model

import (
	"time"
)

// Clock is the source of time for every lease, delay, backoff and retention
// rule. Production code uses RealClock; tests use a *FakeClock and advance it.
type Clock interface {
	// Now returns the current instant.
	Now() time.Time
	// NewTimer returns a timer that fires once, d from now on this clock.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer that backends use.
type Timer interface {
	// C delivers the time when the timer fires (buffered, at most once per Reset).
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it was active.
	// A fire not yet received is discarded.
	Stop() bool
	// Reset re-arms the timer to fire d from now, discarding a fire not yet
	// received (as time.Timer does since Go 1.23).
	Reset(d time.Duration)
}

// NewTimerAt returns a timer of c that fires at c's instant at (at once if
// that has passed). See ResetAt.
func NewTimerAt(c Clock, at time.Time) Timer {
	t := c.NewTimer(at.Sub(c.Now()))
	if r, ok := t.(resetterAt); ok {
		r.ResetAt(at)
	}
	return t
}

// ResetAt re-arms t, a timer of c, to fire at c's instant at (at once if
// that has passed), discarding a fire not yet received.
//
// t.Reset(at.Sub(c.Now())) leaves a window between the clock's reading and
// the arming: a clock that moves in it makes the timer late by the move. On
// the wall clock that is microseconds; on a fake clock that a test advances
// by seconds it made a sweeper sleep through the expiry it was armed for.
// A timer that can be armed for an instant in one step (clocktest's) is
// armed so.
func ResetAt(c Clock, t Timer, at time.Time) {
	if r, ok := t.(resetterAt); ok {
		r.ResetAt(at)
		return
	}
	t.Reset(at.Sub(c.Now()))
}

// resetterAt is a Timer that can be armed for an instant of its clock.
type resetterAt interface{ ResetAt(at time.Time) }

// RealClock is the wall clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// NewTimer wraps time.NewTimer.
func (RealClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time   { return r.t.C }
func (r realTimer) Stop() bool            { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) { r.t.Reset(d) }

// OffsetClock is a Clock that is a fixed offset from the wall clock (a
// *FakeClock): a backend whose store keeps time of its own (PostgreSQL's
// now()) then computes with the clock's reading instead of the store's.
type OffsetClock interface {
	Clock
	Offset() time.Duration
}
