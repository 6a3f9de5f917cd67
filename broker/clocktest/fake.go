package clocktest

import (
	"sort"
	"sync"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// FakeClock is a manual clock for tests: time moves only when Advance or Set is
// called, and timers whose deadline has passed fire then. Safe for concurrent use.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*fakeTimer]struct{}
	// fired are the timers that fired and whose owner has not yet acted on
	// it (a Reset or a Stop): Settle waits for them.
	fired map[*fakeTimer]struct{}
}

// NewFakeClock returns a fake clock reading start.
func NewFakeClock(start time.Time) *FakeClock {
	return &FakeClock{now: start, timers: map[*fakeTimer]struct{}{}, fired: map[*fakeTimer]struct{}{}}
}

// Settle waits until every timer that has fired was acted on by its owner
// (Reset again, as a duty does after its step, or Stopped, as a waiting
// receive does when it returns), or until timeout of real time passes; it
// reports whether they were. A test that advances the clock and then checks
// what the woken goroutines did calls it between the two, instead of
// waiting a fixed real time that a loaded machine can outlast.
func (c *FakeClock) Settle(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		c.mu.Lock()
		n := len(c.fired)
		c.mu.Unlock()
		if n == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// Now returns the fake time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Offset is how far the fake time is from the wall clock (for backends, such as
// PostgreSQL, that compute time from their own clock plus an offset).
func (c *FakeClock) Offset() time.Duration { return time.Until(c.Now()) }

// Advance moves the clock forward by d and fires the timers that are due.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.fireLocked()
	c.mu.Unlock()
}

// Set moves the clock to t (never backwards) and fires the timers that are due.
func (c *FakeClock) Set(t time.Time) {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	c.fireLocked()
	c.mu.Unlock()
}

// Timers returns the number of armed timers (for tests that wait for a
// goroutine to block on the clock).
func (c *FakeClock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// NextDeadline returns the earliest armed timer's deadline, or false if none.
func (c *FakeClock) NextDeadline() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ds []time.Time
	for t := range c.timers {
		ds = append(ds, t.deadline)
	}
	if len(ds) == 0 {
		return time.Time{}, false
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].Before(ds[j]) })
	return ds[0], true
}

func (c *FakeClock) fireLocked() {
	for t := range c.timers {
		if !t.deadline.After(c.now) {
			delete(c.timers, t)
			c.fired[t] = struct{}{}
			select {
			case t.ch <- c.now:
			default:
			}
		}
	}
}

// NewTimer returns a timer on the fake clock.
func (c *FakeClock) NewTimer(d time.Duration) model.Timer {
	t := &fakeTimer{c: c, ch: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

type fakeTimer struct {
	c        *FakeClock
	ch       chan time.Time
	deadline time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

// drainLocked empties the channel and reports whether it held a fire (the
// clock's mu held: fires only happen under it).
func (t *fakeTimer) drainLocked() bool {
	select {
	case <-t.ch:
		return true
	default:
		return false
	}
}

// Stop and Reset discard a fire not yet received, as time.Timer does since
// Go 1.23: a receive after them never sees a stale value.
func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	_, ok := t.c.timers[t]
	delete(t.c.timers, t)
	delete(t.c.fired, t)
	if t.drainLocked() {
		ok = true // a fire never received counts as stopped, as with time.Timer
	}
	return ok
}

func (t *fakeTimer) Reset(d time.Duration) {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.resetLocked(t.c.now.Add(d))
}

// ResetAt re-arms the timer to fire at the instant at: in one step under
// the clock's lock, so an Advance cannot come between reading the clock and
// arming the timer (model.ResetAt).
func (t *fakeTimer) ResetAt(at time.Time) {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.resetLocked(at)
}

func (t *fakeTimer) resetLocked(deadline time.Time) {
	t.drainLocked()
	delete(t.c.fired, t)
	t.deadline = deadline
	t.c.timers[t] = struct{}{}
	t.c.fireLocked()
}
