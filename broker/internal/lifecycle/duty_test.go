package lifecycle

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/internal/testutil"
)

// The Duty tests run a duty on a FakeClock with a scripted step: script(n,
// now) answers the n-th step (1-based), now being the fake time when it
// started. They poll with testutil.Eventually; the only real-time wait is
// quiet, which shows that a step does NOT run.

const (
	dutyIdle    = time.Hour
	dutyTimeout = 5 * time.Second       // bound of every Eventually
	dutyQuiet   = 50 * time.Millisecond // how long "no further step" is watched
)

var dutyT0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

type dutyHarness struct {
	clk *clocktest.FakeClock
	d   *Duty

	mu     sync.Mutex
	starts []time.Time // fake time at the start of each step
}

func newDutyHarness(t *testing.T, retry time.Duration, script func(ctx context.Context, n int, now time.Time) (time.Time, error)) *dutyHarness {
	t.Helper()
	h := &dutyHarness{clk: clocktest.NewFakeClock(dutyT0)}
	h.d = &Duty{
		Name:  "test duty",
		Clock: h.clk,
		Idle:  dutyIdle,
		Retry: retry,
		Step: func(ctx context.Context) (time.Time, error) {
			now := h.clk.Now()
			h.mu.Lock()
			h.starts = append(h.starts, now)
			n := len(h.starts)
			h.mu.Unlock()
			return script(ctx, n, now)
		},
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), dutyTimeout)
		defer cancel()
		if err := h.d.Stop(ctx); err != nil {
			t.Errorf("cleanup Stop: %v", err)
		}
	})
	return h
}

func (h *dutyHarness) steps() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.starts)
}

// stepAt returns the fake time at which step n (1-based) started.
func (h *dutyHarness) stepAt(n int) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.starts[n-1]
}

// waitSteps waits until n steps started and checks that no more did.
func (h *dutyHarness) waitSteps(t *testing.T, n int) {
	t.Helper()
	testutil.Eventually(t, dutyTimeout, "step "+strconv.Itoa(n), func() bool { return h.steps() >= n })
	if got := h.steps(); got != n {
		t.Fatalf("%d steps ran, want %d", got, n)
	}
}

// waitSleep waits until the duty's single timer is armed for deadline (it
// has re-armed its timer after a step and is about to block or blocked).
func (h *dutyHarness) waitSleep(t *testing.T, deadline time.Time) {
	t.Helper()
	testutil.Eventually(t, dutyTimeout, "a sleep until "+deadline.Sub(dutyT0).String()+" after T0", func() bool {
		d, ok := h.clk.NextDeadline()
		return ok && d.Equal(deadline) && h.clk.Timers() == 1
	})
}

// quiet checks that the step count stays n for dutyQuiet (the one accepted
// real-time wait: it shows that nothing happens).
func (h *dutyHarness) quiet(t *testing.T, n int, why string) {
	t.Helper()
	time.Sleep(dutyQuiet)
	if got := h.steps(); got != n {
		t.Fatalf("%s: %d steps ran, want %d", why, got, n)
	}
}

// scriptOf answers step n with nexts[n-1] and, past the list, a zero
// instant.
func scriptOf(nexts ...time.Time) func(context.Context, int, time.Time) (time.Time, error) {
	return func(_ context.Context, n int, _ time.Time) (time.Time, error) {
		if n <= len(nexts) {
			return nexts[n-1], nil
		}
		return time.Time{}, nil
	}
}

func at(d time.Duration) time.Time { return dutyT0.Add(d) }

// movingClock is a FakeClock that, once asked to, advances itself right
// after a Now has read it: as if a test's Advance came just after the
// reading.
type movingClock struct {
	*clocktest.FakeClock
	mu   sync.Mutex
	move time.Duration
}

func (c *movingClock) moveAfterNextRead(d time.Duration) {
	c.mu.Lock()
	c.move = d
	c.mu.Unlock()
}

func (c *movingClock) Now() time.Time {
	now := c.FakeClock.Now()
	c.mu.Lock()
	d := c.move
	c.move = 0
	c.mu.Unlock()
	if d > 0 {
		c.Advance(d)
	}
	return now
}

func TestDuty(t *testing.T) {
	t.Parallel()
	errStep := errors.New("step failed")
	for _, tc := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"first step runs at Start", func(t *testing.T) {
			h := newDutyHarness(t, 0, scriptOf())
			h.quiet(t, 0, "before Start")
			h.d.Start(context.Background())
			h.waitSteps(t, 1)
			if got := h.stepAt(1); !got.Equal(dutyT0) {
				t.Errorf("first step at %v, want T0", got)
			}
			h.d.Start(context.Background()) // a second Start does nothing
			h.waitSleep(t, at(dutyIdle))
			h.quiet(t, 1, "after a second Start")
		}},
		{"a clock moved between the reading and the arming does not delay the step", func(t *testing.T) {
			// The stop-34 CI flake: a test advanced its fake clock right
			// after the loop read it and before it armed its timer, which
			// then counted the sleep from the moved clock and fired late
			// by the move. movingClock makes that interleaving certain.
			h := newDutyHarness(t, 0, scriptOf(at(10*time.Second)))
			mc := &movingClock{FakeClock: h.clk}
			h.d.Clock = mc
			mc.moveAfterNextRead(5 * time.Second)
			h.d.Start(context.Background())
			h.waitSteps(t, 1)
			h.waitSleep(t, at(10*time.Second))
			h.clk.Advance(5 * time.Second) // T0+10 s: the instant step 1 asked for
			h.waitSteps(t, 2)
		}},
		{"future instant runs only once the clock reaches it", func(t *testing.T) {
			h := newDutyHarness(t, 0, scriptOf(at(10*time.Second), at(25*time.Second)))
			h.d.Start(context.Background())
			h.waitSteps(t, 1)
			h.waitSleep(t, at(10*time.Second))
			h.quiet(t, 1, "clock not moved")
			h.clk.Advance(10*time.Second - time.Nanosecond)
			h.quiet(t, 1, "1ns before the instant")
			h.clk.Advance(time.Nanosecond)
			h.waitSteps(t, 2)
			if got := h.stepAt(2); !got.Equal(at(10 * time.Second)) {
				t.Errorf("second step at %v, want T0+10s", got.Sub(dutyT0))
			}
			h.waitSleep(t, at(25*time.Second))
			h.clk.Advance(14 * time.Second)
			h.quiet(t, 2, "1s before the second instant")
			h.clk.Advance(time.Second)
			h.waitSteps(t, 3)
		}},
		{"now or past instant runs again at once", func(t *testing.T) {
			h := newDutyHarness(t, 0, scriptOf(at(0), at(-time.Hour), at(-time.Nanosecond)))
			h.d.Start(context.Background())
			h.waitSteps(t, 4) // three "at once" answers, then a zero instant
			for n := 1; n <= 4; n++ {
				if got := h.stepAt(n); !got.Equal(dutyT0) {
					t.Errorf("step %d at T0+%v, want T0 (the clock never moved)", n, got.Sub(dutyT0))
				}
			}
			h.waitSleep(t, at(dutyIdle))
			h.quiet(t, 4, "after a zero instant")
		}},
		{"zero instant sleeps Idle", func(t *testing.T) {
			// Step 1 moves the sleep off the initial timer's deadline, so
			// that the zero instant's sleep (from T0+10s) is seen re-armed.
			h := newDutyHarness(t, 0, scriptOf(at(10*time.Second), time.Time{}))
			h.d.Start(context.Background())
			h.waitSteps(t, 1)
			h.waitSleep(t, at(10*time.Second))
			h.clk.Advance(10 * time.Second)
			h.waitSteps(t, 2)
			h.waitSleep(t, at(10*time.Second+dutyIdle))
			h.clk.Advance(dutyIdle - time.Second)
			h.quiet(t, 2, "1s before Idle")
			h.clk.Advance(time.Second)
			h.waitSteps(t, 3)
		}},
		{"sleep is capped at Idle", func(t *testing.T) {
			h := newDutyHarness(t, 0, scriptOf(at(10*time.Second), at(100*dutyIdle)))
			h.d.Start(context.Background())
			h.waitSteps(t, 1)
			h.waitSleep(t, at(10*time.Second))
			h.clk.Advance(10 * time.Second)
			h.waitSteps(t, 2)
			h.waitSleep(t, at(10*time.Second+dutyIdle))
			h.clk.Advance(dutyIdle)
			h.waitSteps(t, 3)
		}},
		{"Kick wakes a sleeping duty without the clock moving", func(t *testing.T) {
			h := newDutyHarness(t, 0, scriptOf(at(10*time.Second), at(20*time.Second)))
			h.d.Start(context.Background())
			h.waitSteps(t, 1)
			h.waitSleep(t, at(10*time.Second))
			h.d.Kick()
			h.waitSteps(t, 2)
			if got := h.stepAt(2); !got.Equal(dutyT0) {
				t.Errorf("kicked step at T0+%v, want T0", got.Sub(dutyT0))
			}
			h.waitSleep(t, at(20*time.Second))
			h.quiet(t, 2, "one Kick, one step")
		}},
		{"failed step is retried after Retry", func(t *testing.T) {
			h := newDutyHarness(t, 5*time.Second, func(_ context.Context, n int, _ time.Time) (time.Time, error) {
				if n == 1 {
					// A failure wins over the instant returned with it.
					return at(time.Minute), errStep
				}
				return time.Time{}, nil
			})
			h.d.Start(context.Background())
			h.waitSteps(t, 1)
			h.waitSleep(t, at(5*time.Second))
			h.clk.Advance(5*time.Second - time.Nanosecond)
			h.quiet(t, 1, "before Retry")
			h.clk.Advance(time.Nanosecond)
			h.waitSteps(t, 2)
			h.waitSleep(t, at(5*time.Second+dutyIdle))
		}},
		{"failures in a row back off, and a kick does not cut it short", func(t *testing.T) {
			h := newDutyHarness(t, 5*time.Second, func(_ context.Context, n int, _ time.Time) (time.Time, error) {
				if n <= 3 {
					return time.Time{}, errStep
				}
				return time.Time{}, nil
			})
			h.d.Start(context.Background())
			h.waitSteps(t, 1)
			h.waitSleep(t, at(5*time.Second))
			h.d.Kick()
			h.quiet(t, 1, "a kick during a failure's backoff")
			h.clk.Advance(5 * time.Second)
			h.waitSteps(t, 2)
			h.waitSleep(t, at(15*time.Second)) // 10 s after the second failure
			h.clk.Advance(10 * time.Second)
			h.waitSteps(t, 3)
			h.waitSleep(t, at(35*time.Second)) // 20 s after the third
			h.clk.Advance(20 * time.Second)
			h.waitSteps(t, 4)
			// A success ends the run of failures: the next failure waits
			// Retry again (failureBackoff), and a kick wakes a normal sleep.
			h.d.Kick()
			h.waitSteps(t, 5)
			if got := failureBackoff(5*time.Second, time.Hour, 0, 1); got != 5*time.Second {
				t.Errorf("failureBackoff after one failure: %v", got)
			}
			if got := failureBackoff(5*time.Second, time.Hour, 0, 100); got != 160*time.Second {
				t.Errorf("failureBackoff after 100 failures: %v, want 32 x Retry", got)
			}
			if got := failureBackoff(5*time.Second, 30*time.Second, 0, 100); got != 30*time.Second {
				t.Errorf("failureBackoff capped by Idle: %v", got)
			}
			if got := failureBackoff(time.Minute, 30*time.Second, 0, 3); got != time.Minute {
				t.Errorf("failureBackoff with Retry over Idle: %v", got)
			}
			if got := failureBackoff(10*time.Second, time.Hour, 30*time.Second, 100); got != 30*time.Second {
				t.Errorf("failureBackoff capped by MaxRetry: %v", got)
			}
		}},
		{"Retry defaults to Idle", func(t *testing.T) {
			h := newDutyHarness(t, 0, func(_ context.Context, n int, _ time.Time) (time.Time, error) {
				if n == 1 {
					return time.Time{}, errStep
				}
				return time.Time{}, nil
			})
			h.d.Start(context.Background())
			h.waitSteps(t, 1)
			h.waitSleep(t, at(dutyIdle))
			h.clk.Advance(dutyIdle - time.Second)
			h.quiet(t, 1, "before Idle")
			h.clk.Advance(time.Second)
			h.waitSteps(t, 2)
		}},
		{"one armed timer", func(t *testing.T) {
			h := newDutyHarness(t, 3*time.Second, func(_ context.Context, n int, now time.Time) (time.Time, error) {
				switch n {
				case 1:
					return now.Add(10 * time.Second), nil
				case 2:
					return time.Time{}, errStep
				case 3:
					return now, nil // at once
				}
				return now.Add(7 * time.Second), nil
			})
			if h.clk.Timers() != 0 {
				t.Fatalf("timers before Start: %d", h.clk.Timers())
			}
			h.d.Start(context.Background())
			h.waitSteps(t, 1)
			h.waitSleep(t, at(10*time.Second)) // checks Timers() == 1
			h.d.Kick()
			h.waitSteps(t, 2)
			h.waitSleep(t, at(3*time.Second)) // the failure's Retry
			h.clk.Advance(3 * time.Second)
			h.waitSteps(t, 4) // step 3 asked for "at once"
			h.waitSleep(t, at(10*time.Second))
			for i := 0; i < 5; i++ {
				h.clk.Advance(7 * time.Second)
				h.waitSteps(t, 5+i)
				h.waitSleep(t, at(time.Duration(17+7*i)*time.Second))
			}
			ctx, cancel := context.WithTimeout(context.Background(), dutyTimeout)
			defer cancel()
			if err := h.d.Stop(ctx); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			if n := h.clk.Timers(); n != 0 {
				t.Errorf("%d timers armed after Stop, want 0", n)
			}
		}},
		{"Stop before Start", func(t *testing.T) {
			h := newDutyHarness(t, 0, scriptOf())
			for i := 0; i < 2; i++ {
				if err := h.d.Stop(context.Background()); err != nil {
					t.Fatalf("Stop %d before Start: %v", i+1, err)
				}
			}
			h.quiet(t, 0, "Stop before Start")
			// Stop before Start does nothing: the duty can still start.
			h.d.Start(context.Background())
			h.waitSteps(t, 1)
		}},
		{"Stop is idempotent and ends the steps", func(t *testing.T) {
			h := newDutyHarness(t, 0, scriptOf(at(10*time.Second)))
			h.d.Start(context.Background())
			h.waitSteps(t, 1)
			h.waitSleep(t, at(10*time.Second))
			for i := 0; i < 2; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), dutyTimeout)
				err := h.d.Stop(ctx)
				cancel()
				if err != nil {
					t.Fatalf("Stop %d: %v", i+1, err)
				}
			}
			h.d.Kick()
			h.clk.Advance(2 * dutyIdle)
			h.d.Start(context.Background()) // no restart after Stop
			h.quiet(t, 1, "after Stop")
			if n := h.clk.Timers(); n != 0 {
				t.Errorf("%d timers armed after Stop, want 0", n)
			}
		}},
		{"cancelling Start's context stops the duty", func(t *testing.T) {
			h := newDutyHarness(t, 0, scriptOf(at(10*time.Second)))
			ctx, cancel := context.WithCancel(context.Background())
			h.d.Start(ctx)
			h.waitSteps(t, 1)
			h.waitSleep(t, at(10*time.Second))
			cancel()
			testutil.Eventually(t, dutyTimeout, "the timer to be stopped", func() bool { return h.clk.Timers() == 0 })
			h.clk.Advance(2 * dutyIdle)
			h.d.Kick()
			h.quiet(t, 1, "after the context ended")
		}},
		{"Stop returns ctx.Err when the step blocks past its deadline", func(t *testing.T) {
			release := make(chan struct{})
			h := newDutyHarness(t, 0, func(_ context.Context, n int, _ time.Time) (time.Time, error) {
				if n == 1 {
					<-release // ignores ctx: blocks past Stop's deadline
				}
				return time.Time{}, nil
			})
			h.d.Start(context.Background())
			h.waitSteps(t, 1)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			err := h.d.Stop(ctx)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Stop with a blocked step = %v, want context.DeadlineExceeded", err)
			}
			cctx, ccancel := context.WithCancel(context.Background())
			ccancel()
			if err := h.d.Stop(cctx); !errors.Is(err, context.Canceled) {
				t.Fatalf("Stop with a cancelled context and a blocked step = %v, want context.Canceled", err)
			}
			close(release)
			ctx, cancel = context.WithTimeout(context.Background(), dutyTimeout)
			defer cancel()
			if err := h.d.Stop(ctx); err != nil {
				t.Fatalf("Stop after the step returned: %v", err)
			}
			h.quiet(t, 1, "the step that returned after Stop")
		}},
		{"a timer that fired during a step does not cut the next sleep short", func(t *testing.T) {
			proceed := make(chan struct{})
			h := newDutyHarness(t, 0, nil)
			h.d.Step = func(ctx context.Context) (time.Time, error) {
				h.mu.Lock()
				h.starts = append(h.starts, h.clk.Now())
				n := len(h.starts)
				h.mu.Unlock()
				switch n {
				case 1:
					return at(10 * time.Second), nil
				case 2:
					<-proceed
					return h.clk.Now().Add(10 * time.Second), nil
				}
				return time.Time{}, nil
			}
			h.d.Start(context.Background())
			h.waitSteps(t, 1)
			h.waitSleep(t, at(10*time.Second))
			h.d.Kick()
			h.waitSteps(t, 2)
			// The sleep's deadline passes while step 2 runs: the timer fires
			// with nobody waiting on it.
			h.clk.Advance(10 * time.Second)
			close(proceed)
			testutil.Eventually(t, dutyTimeout, "step 2 to return", func() bool {
				d, ok := h.clk.NextDeadline()
				return h.steps() > 2 || ok && d.Equal(at(20*time.Second))
			})
			time.Sleep(dutyQuiet)
			if n := h.steps(); n != 2 {
				t.Errorf("BUG: step 2 asked for T0+20s at T0+10s, but step 3 ran at T0+%v, before the clock reached T0+20s: "+
					"the fire of the previous sleep's timer, left in its channel during step 2, woke the next sleep at once "+
					"(fakeTimer.Reset does not drain C, unlike time.Timer.Reset since Go 1.23, and Duty.loop does not drain it)",
					h.stepAt(3).Sub(dutyT0))
				return
			}
			h.clk.Advance(10 * time.Second)
			h.waitSteps(t, 3)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t)
		})
	}
}
