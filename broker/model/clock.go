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
