package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/worker"
)

// run makes a pool from cfg and runs it on ctx; the channel gets Run's
// result.
func run(t *testing.T, ctx context.Context, cfg worker.Config) (*worker.Pool, chan error) {
	t.Helper()
	cfg.Logger = testutil.Logger(t)
	p, err := worker.NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- p.Run(ctx) }()
	return p, ran
}

// Shutdown releases the prefetched messages at once (their attempts
// unchanged), while the running handler goes on to its end and is acked.
func TestShutdownReleasesPrefetchedAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := e.queue(t, "q", nil)
	e.send(t, "q", nil, "a", "b", "c")
	g := newGate()
	cfg := config(src, g.handler())
	cfg.Concurrency, cfg.Prefetch = 1, 2
	p, ran := run(t, context.Background(), cfg)
	testutil.Eventually(t, wait, "1 running, 2 prefetched", func() bool {
		st := p.Stats()
		return st.Running == 1 && st.Prefetched == 2
	})

	shut := make(chan error, 1)
	go func() { shut <- p.Shutdown(context.Background()) }()
	testutil.Eventually(t, wait, "the prefetched messages visible again", func() bool { return e.stats(t, "q").Visible == 2 })
	if g.running.Load() != 1 {
		t.Fatal("the running handler ended before its time")
	}
	for _, m := range e.browse(t, "q") {
		if m.State == "visible" && m.Attempts != 0 {
			t.Errorf("released message %s has attempts %d, want 0 (a release does not count)", m.Body, m.Attempts)
		}
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v while a handler runs", err)
	default:
	}
	g.release()
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-ran; !errors.Is(err, worker.ErrPoolClosed) {
		t.Fatalf("Run: %v, want ErrPoolClosed", err)
	}
	if st := e.stats(t, "q"); st.Visible != 2 || st.InFlight != 0 {
		t.Fatalf("stats %+v: want the running message acked, the 2 others visible", st)
	}
}

// Past Shutdown's deadline the handlers' contexts are cancelled (cause
// ErrShutdown); Shutdown waits for them, and their messages are released.
func TestShutdownCancelsPastDeadline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := e.queue(t, "q", nil)
	e.send(t, "q", nil, "a", "b")
	causes := make(chan error, 2)
	cfg := config(src, worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return context.Cause(ctx)
	}))
	cfg.Concurrency = 2
	p, ran := run(t, context.Background(), cfg)
	testutil.Eventually(t, wait, "2 running", func() bool { return p.Stats().Running == 2 })

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := p.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v, want DeadlineExceeded", err)
	}
	for range 2 {
		if c := <-causes; !errors.Is(c, worker.ErrShutdown) {
			t.Fatalf("cause %v, want ErrShutdown", c)
		}
	}
	if err := <-ran; !errors.Is(err, worker.ErrPoolClosed) {
		t.Fatalf("Run: %v", err)
	}
	assertReleased(t, e, 2)
}

// assertReleased checks that queue q holds n visible messages with no
// attempt counted.
func assertReleased(t *testing.T, e *env, n int) {
	t.Helper()
	if st := e.stats(t, "q"); st.Visible != int64(n) {
		t.Fatalf("stats %+v, want %d visible", st, n)
	}
	for _, m := range e.browse(t, "q") {
		if m.Attempts != 0 {
			t.Errorf("message %s has attempts %d, want 0: an interrupted handler's message is released", m.Body, m.Attempts)
		}
	}
}

// Cancelling Run's context stops at once: handlers cancelled, messages
// released, Run returns the context's error.
func TestRunContextCancelled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := e.queue(t, "q", nil)
	e.send(t, "q", nil, "a", "b", "c")
	causes := make(chan error, 3)
	cfg := config(src, worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	}))
	cfg.Concurrency, cfg.Prefetch = 2, 1
	ctx, cancel := context.WithCancel(context.Background())
	p, ran := run(t, ctx, cfg)
	testutil.Eventually(t, wait, "2 running, 1 prefetched", func() bool {
		st := p.Stats()
		return st.Running == 2 && st.Prefetched == 1
	})
	cancel()
	if err := <-ran; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want context.Canceled", err)
	}
	for range 2 {
		if c := <-causes; !errors.Is(c, worker.ErrShutdown) {
			t.Fatalf("cause %v, want ErrShutdown", c)
		}
	}
	assertReleased(t, e, 3)
	if err := p.Run(context.Background()); !errors.Is(err, worker.ErrPoolClosed) {
		t.Fatalf("Run after Run ended: %v", err)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown after Run ended: %v", err)
	}
}

// Shutdown before Run, twice, and Run after it.
func TestLifecycleIdempotent(t *testing.T) {
	t.Parallel()
	cfg := config(&brokerSource{}, worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error { return nil }))
	p, err := worker.NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := p.Shutdown(context.Background()); err != nil {
			t.Fatalf("Shutdown before Run: %v", err)
		}
	}
	if err := p.Run(context.Background()); !errors.Is(err, worker.ErrPoolClosed) {
		t.Fatalf("Run after Shutdown: %v, want ErrPoolClosed", err)
	}
}

// Shutdown twice at once while running: both wait for the end.
func TestShutdownTwiceWhileRunning(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := e.queue(t, "q", nil)
	cfg := config(src, worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error { return nil }))
	p, ran := run(t, context.Background(), cfg)
	testutil.Eventually(t, wait, "a receive", func() bool { return src.receives.Load() > 0 })
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- p.Shutdown(context.Background()) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-ran; !errors.Is(err, worker.ErrPoolClosed) {
		t.Fatal(err)
	}
	if err := p.Run(context.Background()); !errors.Is(err, worker.ErrPoolClosed) {
		t.Fatal(err)
	}
}

// Run's context cancelled while a Shutdown with a long grace waits for the
// running handler ends the grace at once: the handler is cancelled (cause
// ErrShutdown), its message released, and both calls return.
func TestRunCancelEndsShutdownGrace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := e.queue(t, "q", nil)
	e.send(t, "q", nil, "a", "b")
	causes := make(chan error, 1)
	cfg := config(src, worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return context.Cause(ctx)
	}))
	cfg.Concurrency, cfg.Prefetch = 1, 1
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, ran := run(t, ctx, cfg)
	testutil.Eventually(t, wait, "1 running, 1 prefetched", func() bool {
		st := p.Stats()
		return st.Running == 1 && st.Prefetched == 1
	})
	shut := make(chan error, 1)
	go func() { shut <- p.Shutdown(context.Background()) }() // a grace without end
	// Run is in its stop: it released the prefetched message.
	testutil.Eventually(t, wait, "the prefetched message released", func() bool { return e.stats(t, "q").Visible == 1 })
	cancel()
	select {
	case c := <-causes:
		if !errors.Is(c, worker.ErrShutdown) {
			t.Fatalf("cause %v, want ErrShutdown", c)
		}
	case <-time.After(wait):
		t.Fatal("Run's cancellation did not end Shutdown's grace: the handler still runs")
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-ran; !errors.Is(err, worker.ErrPoolClosed) {
		t.Fatalf("Run: %v, want ErrPoolClosed", err)
	}
	assertReleased(t, e, 2)
}
