package postgres

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/testutil"
)

// blockedCombiner is a combiner of width 1 whose run records each batch and
// blocks the first until release is closed.
type blockedCombiner struct {
	c       combiner[string, int]
	release chan struct{}
	mu      sync.Mutex
	batches [][]int
	ctxs    []context.Context
	err     error
}

func newBlocked() *blockedCombiner {
	return &blockedCombiner{c: combiner[string, int]{width: 1, maxJobs: 3}, release: make(chan struct{})}
}

func (b *blockedCombiner) run(ctx context.Context, jobs []int) error {
	b.mu.Lock()
	first := len(b.batches) == 0
	b.batches, b.ctxs = append(b.batches, jobs), append(b.ctxs, ctx)
	b.mu.Unlock()
	if first {
		<-b.release
	}
	return b.err
}

func (b *blockedCombiner) waiting(t *testing.T, n int) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, "calls waiting", func() bool {
		b.c.mu.Lock()
		defer b.c.mu.Unlock()
		l := b.c.lines["q"]
		return l != nil && len(l.waiting) == n
	})
}

// TestCombinerBatchesWaitingCalls: while a batch runs, the calls that come
// wait, and the next batches take them in arrival order, at most maxJobs
// each; a batch's error reaches each of its calls; the key's line is gone
// once nothing runs.
func TestCombinerBatchesWaitingCalls(t *testing.T) {
	b := newBlocked()
	b.err = errors.New("boom")
	ctx := context.Background()
	errs := make(chan error, 6)
	go func() { errs <- b.c.do(ctx, "q", 0, b.run) }()
	testutil.Eventually(t, 10*time.Second, "first batch running", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.batches) == 1
	})
	for i := 1; i <= 5; i++ {
		go func() { errs <- b.c.do(ctx, "q", i, b.run) }()
		b.waiting(t, i) // in order
	}
	close(b.release)
	for range 6 {
		if err := <-errs; err != b.err {
			t.Fatalf("call returned %v, want the batch's error", err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.batches) != 3 || len(b.batches[1]) != 3 || len(b.batches[2]) != 2 ||
		b.batches[1][0] != 1 || b.batches[1][2] != 3 || b.batches[2][0] != 4 || b.batches[2][1] != 5 {
		t.Fatalf("batches %v, want [0] [1 2 3] [4 5]", b.batches)
	}
	b.c.mu.Lock()
	defer b.c.mu.Unlock()
	if len(b.c.lines) != 0 {
		t.Fatalf("%d lines left", len(b.c.lines))
	}
}

// TestCombinerCancelledCalls: a call cancelled while it waits leaves at once
// and its job never runs; a batch's context outlives the cancel of some of
// its calls (its leader's included) and ends with the last.
func TestCombinerCancelledCalls(t *testing.T) {
	b := newBlocked()
	errs := make(chan error, 4)
	go func() { errs <- b.c.do(context.Background(), "q", 0, b.run) }()
	testutil.Eventually(t, 10*time.Second, "first batch running", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.batches) == 1
	})
	gone, cancelGone := context.WithCancel(context.Background())
	go func() { errs <- b.c.do(gone, "q", 1, b.run) }()
	b.waiting(t, 1)
	cancelGone()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiting call returned %v", err)
	}
	b.waiting(t, 0)

	// Two calls batched together, the second blocked inside its batch.
	ctx2, cancel2 := context.WithCancel(context.Background())
	ctx3, cancel3 := context.WithCancel(context.Background())
	second := make(chan struct{})
	run := func(ctx context.Context, jobs []int) error {
		if len(jobs) == 2 {
			b.mu.Lock()
			b.batches, b.ctxs = append(b.batches, jobs), append(b.ctxs, ctx)
			b.mu.Unlock()
			close(second)
			<-ctx.Done()
			return ctx.Err()
		}
		return b.run(ctx, jobs)
	}
	go func() { errs <- b.c.do(ctx2, "q", 2, run) }()
	b.waiting(t, 1)
	go func() { errs <- b.c.do(ctx3, "q", 3, run) }()
	b.waiting(t, 2)
	close(b.release)
	if err := <-errs; err != nil {
		t.Fatalf("first call: %v", err)
	}
	<-second
	b.mu.Lock()
	batchCtx := b.ctxs[len(b.ctxs)-1]
	b.mu.Unlock()
	cancel2() // the batch's leader: it leaves at once, the batch runs on
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled leader returned %v", err)
	}
	if batchCtx.Err() != nil {
		t.Fatal("the batch's context ended with one of its two calls")
	}
	cancel3()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled member returned %v", err)
	}
	testutil.Eventually(t, 10*time.Second, "the batch's context to end with its last call", func() bool { return batchCtx.Err() != nil })
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, batch := range b.batches {
		for _, j := range batch {
			if j == 1 {
				t.Fatalf("the cancelled call's job ran: %v", b.batches)
			}
		}
	}
}

// TestCombinerPanic: a batch whose run panics fails each of its calls with
// an error and frees its place: the next call runs.
func TestCombinerPanic(t *testing.T) {
	c := combiner[string, int]{width: 1, maxJobs: 10}
	err := c.do(context.Background(), "q", 1, func(context.Context, []int) error { panic("boom") })
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("panicking batch returned %v", err)
	}
	ran := false
	if err := c.do(context.Background(), "q", 2, func(context.Context, []int) error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("the next call: ran %v, %v", ran, err)
	}
}
