package postgres

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
)

// combineWidth is how many combined statements of one queue run at once.
const combineWidth = 2

// combiner runs concurrent calls on one key (a queue) as fewer statements:
// the application's group commit, used for deletes (Delete). Every
// statement is a commit, and what a commit costs PostgreSQL (parse, plan,
// the WAL record, the round trip) hardly depends on how many rows it
// carries, so 32 consumers deleting what they received are better served
// by a few statements of many rows than by 32 of a few.
//
// Sends are not combined: measured, combining them cut the inserts per
// message eight times and still lost a quarter of the steady throughput.
// PostgreSQL already shares one WAL flush among concurrent commits, so the wait for
// the running insert only added latency to every send, and the consumers,
// starved in a closed loop, spent the saving on receives that found
// nothing (docs/performance.md).
//
// At most width batches of one key run at once. A call that finds fewer
// running runs at once, alone: at low load nothing waits. A call that finds
// width running waits; when a batch ends, every call waiting then (up to
// maxJobs) becomes the next batch, handed to the first of them, which runs
// it itself when it is alone and on a new goroutine otherwise (lead). A
// batch's statement runs on a context that ends only when every call in it
// has ended its own, so one client's disconnect does not fail the others'
// work; a call whose context ends while it waits leaves at once (if it was
// not yet in a batch nothing of it runs; if it was, its outcome is unknown,
// as for any call cancelled during its statement, and run must do whatever
// follows the statement for every call of the batch, such as wake-ups).
type combiner[K comparable, J any] struct {
	width, maxJobs int
	// running counts the batches running on goroutines of their own.
	running sync.WaitGroup

	mu    sync.Mutex
	lines map[K]*combineLine[J]
}

// combineLine is one key's state: its running batches and waiting calls.
// Invariant: a call waits only while width batches run.
type combineLine[J any] struct {
	running int
	waiting []*combineCall[J]
}

type combineCall[J any] struct {
	ctx context.Context
	job J
	// lead receives the batch this call is to run (buffered: the sender
	// holds the combiner's lock); done is closed when its batch has run.
	lead chan []*combineCall[J]
	done chan struct{}
	err  error
}

// do runs job, alone or in one batch with other calls' jobs of key k:
// run(ctx, jobs) sets each job's own results and returns the error of the
// whole batch, which do then returns to each of its calls.
func (c *combiner[K, J]) do(ctx context.Context, k K, job J, run func(context.Context, []J) error) error {
	call := &combineCall[J]{ctx: ctx, job: job}
	c.mu.Lock()
	l := c.lines[k]
	if l == nil {
		if c.lines == nil {
			c.lines = map[K]*combineLine[J]{}
		}
		l = &combineLine[J]{}
		c.lines[k] = l
	}
	if l.running < c.width {
		l.running++
		c.mu.Unlock()
		c.runBatch(k, l, []*combineCall[J]{call}, run)
		return call.err
	}
	call.lead, call.done = make(chan []*combineCall[J], 1), make(chan struct{})
	l.waiting = append(l.waiting, call)
	c.mu.Unlock()
	select {
	case batch := <-call.lead:
		c.lead(k, l, batch, run)
		return c.wait(ctx, call)
	case <-call.done:
		return call.err
	case <-ctx.Done():
	}
	c.mu.Lock()
	if i := slices.Index(l.waiting, call); i >= 0 {
		l.waiting = slices.Delete(l.waiting, i, i+1)
		c.mu.Unlock()
		return ctx.Err()
	}
	c.mu.Unlock()
	// Already in a batch (handed out under the lock): if it leads, the
	// batch must run all the same, since the others wait on it.
	select {
	case batch := <-call.lead:
		c.lead(k, l, batch, run)
	default:
	}
	return c.wait(ctx, call)
}

// lead runs a batch handed to one of its calls: on the calling goroutine
// when it is that call alone (its statement ends with its context), on a
// new one otherwise, so that the leading call, like the others, can leave
// when its own context ends while the batch runs on for the rest.
func (c *combiner[K, J]) lead(k K, l *combineLine[J], batch []*combineCall[J], run func(context.Context, []J) error) {
	if len(batch) == 1 {
		c.runBatch(k, l, batch, run)
		return
	}
	c.running.Add(1)
	go func() {
		defer c.running.Done()
		c.runBatch(k, l, batch, run)
	}()
}

// drain waits for the batches running on goroutines of their own (Close:
// once every call has left, a batch's context has ended and its statement
// ends soon).
func (c *combiner[K, J]) drain() { c.running.Wait() }

// wait waits for call's batch to have run, or for ctx to end.
func (c *combiner[K, J]) wait(ctx context.Context, call *combineCall[J]) error {
	select {
	case <-call.done: // ran already: its outcome, even if ctx ended meanwhile
		return call.err
	default:
	}
	select {
	case <-call.done:
		return call.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runBatch runs batch, hands each call its outcome, then hands the calls
// waiting meanwhile to the next batch's leader.
func (c *combiner[K, J]) runBatch(k K, l *combineLine[J], batch []*combineCall[J], run func(context.Context, []J) error) {
	ctx, release := batchContext(batch)
	jobs := make([]J, len(batch))
	for i, call := range batch {
		jobs[i] = call.job
	}
	err := safeRun(ctx, jobs, run)
	release()
	for _, call := range batch {
		call.err = err
		if call.done != nil {
			close(call.done)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	l.running--
	if len(l.waiting) == 0 {
		if l.running == 0 {
			delete(c.lines, k)
		}
		return
	}
	n := min(len(l.waiting), c.maxJobs)
	next := slices.Clone(l.waiting[:n])
	l.waiting = slices.Delete(l.waiting, 0, n)
	l.running++
	next[0].lead <- next
}

// batchContext is the context of a batch's statement: the first call's
// values, ended when every call's context has ended. release frees it.
func batchContext[J any](batch []*combineCall[J]) (ctx context.Context, release func()) {
	if len(batch) == 1 {
		return batch[0].ctx, func() {}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(batch[0].ctx))
	var left atomic.Int32
	left.Store(int32(len(batch)))
	stops := make([]func() bool, len(batch))
	for i, call := range batch {
		stops[i] = context.AfterFunc(call.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// safeRun is run(ctx, jobs), with a panic turned into the batch's error: a
// batch may run on a goroutine of its own, where a panic would end the
// process, and a batch that never ends would hold its queue's line.
func safeRun[J any](ctx context.Context, jobs []J, run func(context.Context, []J) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("postgres: a combined statement panicked: %v\n%s", r, debug.Stack())
		}
	}()
	return run(ctx, jobs)
}
