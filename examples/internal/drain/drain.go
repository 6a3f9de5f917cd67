// Package drain is what the examples share while they wait for their
// worker pool to empty a queue: a progress line whenever the queue's counts
// change, and a deadline that says what was left instead of waiting for
// ever.
package drain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/worker"
)

// Wait polls queue's counts every interval until it holds no message,
// writing a line to out each time they change. When ctx ends first (the
// example's --timeout, or Ctrl-C) it answers an error naming what the queue
// still holds and how to look at it.
// A failed read of the counts is said on out and tried again.
func Wait(ctx context.Context, c *client.Client, queue string, interval time.Duration, out io.Writer) error {
	return wait(ctx, c, queue, interval, out, nil)
}

// wait is Wait, also ended by a worker pool's end (ran: Pool.Run's error).
func wait(ctx context.Context, c *client.Client, queue string, interval time.Duration, out io.Writer, ran <-chan error) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	var last *client.Stats // nil until read once
	for {
		st, err := c.Stats(ctx, queue)
		switch {
		case err != nil && ctx.Err() != nil:
			return stopped(ctx, queue, last)
		case err != nil:
			fmt.Fprintf(out, "%s: reading the counts failed (%v); trying again\n", queue, err)
		case st.Depth == 0:
			return nil
		default:
			if last == nil || counts(st) != counts(*last) {
				fmt.Fprintf(out, "%s: %s\n", queue, counts(st))
			}
			last = &st
		}
		select {
		case <-ctx.Done():
			return stopped(ctx, queue, last)
		case err := <-ran:
			return fmt.Errorf("the worker pool stopped before %s was empty: %w", queue, err)
		case <-t.C:
		}
	}
}

// counts is a progress line's counts.
func counts(s client.Stats) string {
	line := fmt.Sprintf("%d visible, %d in flight, %d delayed", s.Visible, s.InFlight, s.Delayed)
	if s.DeadLetters != nil {
		line += fmt.Sprintf(", %d dead letters", *s.DeadLetters)
	}
	return line
}

// stopped is Wait's error when ctx ends: what the queue held when last
// read (nil: never read).
func stopped(ctx context.Context, queue string, last *client.Stats) error {
	why := "interrupted"
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		why = "timed out"
	}
	if last == nil {
		return fmt.Errorf("%s before the counts of %s could be read: is the broker up? (a longer -timeout waits more)", why, queue)
	}
	return fmt.Errorf("%s while %s still held %s: look at them with `sluice peek %s` (a longer -timeout waits more)",
		why, queue, counts(*last), queue)
}

// Context is an example's context: cancelled by Ctrl-C or SIGTERM, and
// after timeout (0: no deadline).
func Context(timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	if timeout <= 0 {
		return ctx, stop
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	return ctx, func() { cancel(); stop() }
}

// Work runs pool until queue holds no message (Wait, progress on progress)
// or ctx ends, then shuts the pool down, letting handlers under way finish
// for up to 30 s. It answers Wait's error, else the pool's.
func Work(ctx context.Context, c *client.Client, queue string, pool *worker.Pool, progress io.Writer) error {
	ran := make(chan error, 1)
	go func() { ran <- pool.Run(context.Background()) }()
	waitErr := wait(ctx, c, queue, time.Second, progress, ran)
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pool.Shutdown(shutdown); err != nil && !errors.Is(err, worker.ErrPoolClosed) {
		return err
	}
	if waitErr != nil {
		return waitErr // the pool's own error, when it stopped first
	}
	if err := <-ran; !errors.Is(err, worker.ErrPoolClosed) {
		return err
	}
	return nil
}
