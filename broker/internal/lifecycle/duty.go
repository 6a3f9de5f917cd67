package lifecycle

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// Duty is the one skeleton of every background duty of a backend (the
// retention sweeper, the move-task runner): a goroutine that runs Step, then
// sleeps on the Clock until the instant Step asked for (at most Idle), a Kick,
// or Stop. A backend supplies the step over its own storage; the loop, its
// timer and its lifecycle are written here once.
//
// The loop holds one timer, re-armed with Reset, so that the number of armed
// timers on a FakeClock stays steady (tests count them to see receives
// block). Start and Stop are idempotent; Stop before Start does nothing.
// The goroutine owns nothing but its timer; Step's state is the backend's.
type Duty struct {
	// Name is the duty's name in logs ("sweeper", "move tasks").
	Name string
	// Clock is the backend's clock.
	Clock model.Clock
	// Logger receives the failed steps (Warn). Nil: discard.
	Logger *slog.Logger
	// Idle is the longest sleep between two steps, and the sleep when Step
	// asks for none (a zero instant). Required (> 0).
	Idle time.Duration
	// Retry is the sleep after a failed step. Default Idle. Failures in a
	// row double it, up to MaxRetry, and a Kick does not cut such a sleep
	// short: a step that fails (a full disk, a store out of file
	// descriptors) is not run again at every request's kick, nor logged at
	// each.
	Retry time.Duration
	// MaxRetry caps the doubled sleep after failures in a row. Default 32
	// times Retry, at most Idle (when Idle is longer than Retry); a duty
	// whose work is due at instants (the schedules' runs) sets it below
	// what a late run may be.
	MaxRetry time.Duration
	// Step does one bounded piece of work and returns the instant it wants
	// to run again: zero for "after Idle", an instant at or before now for
	// "at once" (more work is due). A failed step is logged and retried
	// after Retry. Step must return promptly once ctx is cancelled.
	Step func(ctx context.Context) (next time.Time, err error)

	mu      sync.Mutex
	kick    chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
	started bool
}

// Start starts the goroutine; ctx's values are kept, its cancellation stops
// the duty as Stop does. A second Start does nothing.
func (d *Duty) Start(ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started {
		return
	}
	d.started = true
	if d.kick == nil {
		d.kick = make(chan struct{}, 1)
	}
	ctx, d.cancel = context.WithCancel(ctx)
	d.done = make(chan struct{})
	go d.loop(ctx, d.kick, d.done)
}

// Kick makes the duty run its step now (or right after the step in
// progress). It never blocks, and works before Start (the first step runs
// at once anyway).
func (d *Duty) Kick() {
	d.mu.Lock()
	if d.kick == nil {
		d.kick = make(chan struct{}, 1)
	}
	k := d.kick
	d.mu.Unlock()
	select {
	case k <- struct{}{}:
	default:
	}
}

// Stop cancels the duty and waits until its goroutine returned or ctx ends
// (ctx's error is returned then). Idempotent; a duty never started stops at once.
func (d *Duty) Stop(ctx context.Context) error {
	d.mu.Lock()
	cancel, done := d.cancel, d.done
	d.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *Duty) loop(ctx context.Context, kick <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	log := d.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	retry := d.Retry
	if retry <= 0 {
		retry = d.Idle
	}
	t := d.Clock.NewTimer(d.Idle)
	defer t.Stop()
	fails := 0
	for {
		select {
		case <-kick: // the step covers the kicks before it (one kept from a failure's backoff too)
		default:
		}
		next, err := d.Step(ctx)
		if ctx.Err() != nil {
			return
		}
		now := d.Clock.Now()
		wakeAt := now.Add(d.Idle)
		wake := kick
		switch {
		case err != nil:
			fails++
			sleep := failureBackoff(retry, d.Idle, d.MaxRetry, fails)
			wakeAt = now.Add(sleep)
			wake = nil // a kick does not cut a failure's backoff short
			log.Warn(d.Name+" step failed; retrying", "err", err, "retry_in", sleep, "failures_in_a_row", fails)
		case !next.IsZero() && next.Before(wakeAt):
			wakeAt = next
		}
		if err == nil {
			fails = 0
		}
		if !wakeAt.After(now) {
			continue // more is due at once
		}
		// Armed for the instant, not for wakeAt-now from the clock's
		// reading at the arming: a clock moved since now (a test's fake
		// clock advanced past next) would make the step late by the move.
		model.ResetAt(d.Clock, t, wakeAt)
		select {
		case <-t.C():
		case <-wake:
		case <-ctx.Done():
			return
		}
	}
}

// failureBackoff is the sleep after the fails-th failed step in a row:
// retry doubled for each failure before it, up to maxRetry (0: 32 times
// retry, and no more than idle unless retry itself is longer), never below
// retry.
func failureBackoff(retry, idle, maxRetry time.Duration, fails int) time.Duration {
	limit := max(retry, min(idle, 32*retry))
	if maxRetry > 0 {
		limit = max(retry, maxRetry)
	}
	d := retry
	for i := 1; i < fails && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}
