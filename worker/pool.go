package worker

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
)

// ErrPoolClosed is what Run returns after Shutdown was called (at once if
// Shutdown came first): a pool runs once; make another with NewPool.
var ErrPoolClosed = errors.New("worker: the pool is closed (Shutdown was called); make a new one with NewPool to run again")

// ErrShutdown is the cause (context.Cause) of a handler's context
// cancellation when the pool stops: Shutdown's context ended before the
// handler did, or Run's context was cancelled.
var ErrShutdown = errors.New("worker: the pool is stopping and its grace has ended; return soon, the message will be handed back")

// settleTimeout bounds one Settle call (and one release at shutdown): it
// runs on a context of its own, so that an outcome is applied even when
// Run's context was cancelled.
const settleTimeout = 10 * time.Second

// shortPollPause is the pause after an empty receive that did not wait
// (WaitTime 0), so that short polling an empty queue does not spin.
const shortPollPause = time.Second

// maxReceive is the most messages one receive asks for (SQS's and Sluice's
// limit).
const maxReceive = 10

// Pool runs a Handler over the messages of a Source, with a concurrency
// limit, prefetch, lease heartbeats, and a graceful Shutdown shaped like
// http.Server's. Make one with NewPool, run it with Run, stop it with
// Shutdown. Its methods are safe for concurrent use.
//
// Goroutines (each owned by Run, which returns only after all have ended):
//   - the receiver: receives while the pool has room (receive), hands each
//     message to a free slot or to the prefetch queue;
//   - one per running handler (runHandlers): runs the handler, settles the
//     outcome, then takes the next prefetched message if a slot is free;
//   - the heartbeat: extends every held lease (heartbeat.go; a
//     StreamSource answers for the leases its broker keeps);
//   - the governor, when CPULimit or MinConcurrency is set: the CPU guard
//     and adaptive concurrency (heartbeat.go).
//
// Every field below mu is guarded by it. The invariant the receiver keeps:
// running + len(prefetched) + requested <= slots + Prefetch, so a pool
// never holds more than its slots + Prefetch leases (only a fall of slots,
// by adaptive concurrency, may leave it above until handlers end). With a
// StreamSource the same bound is the stream's credit (updateCredit), so
// that the broker pushes only what the pool has room for.
type Pool struct {
	cfg Config
	log *slog.Logger

	wake chan struct{} // capacity 1: room may have opened (notify)
	stop chan struct{} // closed by Shutdown
	// graceOver is closed when running handlers must be cancelled
	// (Shutdown's context ended, or Run's context was cancelled).
	graceOver chan struct{}
	done      chan struct{} // closed when Run has ended everything
	stopOnce  sync.Once
	graceOnce sync.Once
	doneOnce  sync.Once

	handlers sync.WaitGroup // the handler goroutines

	// stream is Source when it is a StreamSource (nil otherwise); credit
	// is the credit last set on it (-1: none yet), guarded by creditMu,
	// which is held while it is sent so that the latest value goes last.
	stream   StreamSource
	creditMu sync.Mutex
	credit   int

	mu         sync.Mutex
	state      poolState
	slots      int // handlers allowed to run now (Concurrency unless adaptive)
	running    int
	requested  int         // messages asked for by the receive in progress
	prefetched []*delivery // received, not started, oldest first
	// held is every message the pool holds a lease on: running and
	// prefetched (the heartbeat's set).
	held     map[*delivery]struct{}
	paused   bool // the CPU guard holds receiving
	stopping bool // no new handler starts, received messages are released
	handled  uint64
	failed   uint64
	base     context.Context // Run's context without its cancellation
}

type poolState int

const (
	poolIdle poolState = iota
	poolRunning
	poolClosed
)

// delivery is one held message. Its fields but m are guarded by Pool.mu.
type delivery struct {
	m     *Message
	state deliveryState
	// lost: the heartbeat found the lease ended; the outcome is not
	// applied.
	lost bool
	// interrupted: the pool cancelled the handler at shutdown.
	interrupted bool
	ctx         context.Context
	cancel      context.CancelCauseFunc
	// extending counts the heartbeat's extend calls in flight that carry
	// this message. The heartbeat adds to it under Pool.mu only while the
	// state is not settlingState; the outcome waits for it after setting
	// settlingState (extendAll documents the invariant).
	extending sync.WaitGroup
}

type deliveryState int

const (
	prefetchedState deliveryState = iota
	runningState
	settlingState // the handler returned (or the message is released)
)

// NewPool returns a pool for cfg, whose zero fields take DefaultConfig's
// values; it fails when the result does not Validate.
func NewPool(cfg Config) (*Pool, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Pool{
		cfg:       cfg,
		log:       cfg.Logger,
		wake:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		graceOver: make(chan struct{}),
		done:      make(chan struct{}),
		held:      map[*delivery]struct{}{},
		slots:     cfg.Concurrency,
		credit:    -1,
	}
	p.stream, _ = cfg.Source.(StreamSource)
	if cfg.adaptive() {
		p.slots = cfg.MinConcurrency
	}
	return p, nil
}

// PoolStats is a pool's live view.
type PoolStats struct {
	// Slots is how many handlers may run now: Concurrency, or with
	// adaptive concurrency the number the backlog decided.
	Slots int
	// Running counts the handlers running; Prefetched the messages held
	// but not started.
	Running, Prefetched int
	// Paused: the CPU guard holds receiving.
	Paused bool
	// Handled counts the handlers that returned nil, Failed those that
	// returned an error or panicked.
	Handled, Failed uint64
}

// Stats returns the pool's live view.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return PoolStats{Slots: p.slots, Running: p.running, Prefetched: len(p.prefetched),
		Paused: p.paused, Handled: p.handled, Failed: p.failed}
}

// Run receives and handles messages until Shutdown is called, then returns
// ErrPoolClosed once Shutdown's work is done: running handlers ended and
// settled, prefetched messages released, and a StreamSource's stream
// closed. Run returns ErrPoolClosed at once when Shutdown came first.
//
// When ctx is cancelled Run stops quickly and returns ctx.Err(): it stops
// receiving, releases the prefetched messages, cancels the running
// handlers' contexts at once (cause ErrShutdown), waits for the handlers
// and settles their outcomes (on a context of their own, at most 10 s
// each), then returns. The handlers' contexts carry ctx's values. ctx
// cancelled while a Shutdown waits for the running handlers ends the grace
// at once too (the handlers are cancelled with cause ErrShutdown; Run still
// returns ErrPoolClosed, since Shutdown came first).
func (p *Pool) Run(ctx context.Context) error {
	p.mu.Lock()
	switch p.state {
	case poolClosed:
		p.mu.Unlock()
		return ErrPoolClosed
	case poolRunning:
		p.mu.Unlock()
		return errors.New("worker: Run called while the pool runs: a pool has one Run")
	}
	p.state = poolRunning
	p.base = context.WithoutCancel(ctx)
	base := p.base
	p.mu.Unlock()

	bgCtx, stopBg := context.WithCancel(base)
	var bg sync.WaitGroup
	if p.cfg.CPULimit > 0 || p.cfg.adaptive() {
		// The first readings come before the first receive: a pool started
		// on a busy machine or a short backlog starts paused or small.
		p.readCPU()
		p.adapt(bgCtx)
		bg.Go(func() { p.govern(bgCtx) })
	}
	p.updateCredit()
	bg.Go(func() { p.heartbeat(bgCtx) })
	recvCtx, stopRecv := context.WithCancel(ctx)
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		p.receive(recvCtx)
	}()

	var err error
	select {
	case <-ctx.Done():
		err = ctx.Err()
		p.endGrace()
	case <-p.stop:
		err = ErrPoolClosed
	}

	// The stop, in order: no new starts; stop the receiver (a message it
	// receives meanwhile is released); release the prefetched messages at
	// once; let the running handlers end, cancelling them when the grace
	// ends; then stop the heartbeat, which kept the running leases alive
	// to the end.
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	stopRecv()
	<-recvDone
	p.stopStream()
	p.releasePrefetched()
	handlersDone := make(chan struct{})
	go func() {
		p.handlers.Wait()
		close(handlersDone)
	}()
	// The grace ends when Shutdown's context ends, or when Run's does, even
	// after Shutdown began (as with http.Server, the caller's cancellation
	// wins over a long grace).
	select {
	case <-handlersDone:
	case <-p.graceOver:
		p.interruptRunning()
		<-handlersDone
	case <-ctx.Done():
		p.endGrace()
		p.interruptRunning()
		<-handlersDone
	}
	stopBg()
	bg.Wait()
	p.closeStream()

	p.mu.Lock()
	p.state = poolClosed
	p.mu.Unlock()
	p.doneOnce.Do(func() { close(p.done) })
	return err
}

// Shutdown stops the pool gracefully, as http.Server's Shutdown does: it
// stops receiving, hands the prefetched messages back at once (KindRelease:
// the attempt does not count), and lets the running handlers end and
// settle. When ctx ends first, it cancels the handlers' contexts (cause
// ErrShutdown), still waits for them to return, and returns ctx.Err(). A
// handler that returns an ordinary error after that cancellation is
// released, not nacked: the interruption is not the message's failure
// (control errors and nil apply as usual). A handler that ignores its
// context holds Shutdown up. Run's context cancelled meanwhile ends the
// grace at once, as Shutdown's own context would (Shutdown then returns nil
// once the pool has stopped).
//
// Shutdown before Run closes the pool (Run then returns ErrPoolClosed);
// Shutdown after Shutdown, or after Run ended, returns nil once the pool
// has stopped.
func (p *Pool) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	if p.state == poolIdle {
		p.state = poolClosed
		p.doneOnce.Do(func() { close(p.done) })
	}
	p.mu.Unlock()
	p.stopOnce.Do(func() { close(p.stop) })
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		p.endGrace()
		<-p.done
		return ctx.Err()
	}
}

func (p *Pool) endGrace() { p.graceOnce.Do(func() { close(p.graceOver) }) }

// notify tells the receiver that room may have opened. Never blocks.
func (p *Pool) notify() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// receive is the receiver goroutine's loop: while the pool has room, it
// asks for as many messages as fit (at most 10), and waits for room
// otherwise. Receiving only into room is the fair share: what a pool
// cannot start (or prefetch) now is left to other pools.
func (p *Pool) receive(ctx context.Context) {
	rng := rand.New(rand.NewPCG(uint64(p.cfg.Clock.Now().UnixNano()), 0))
	failures := 0
	// A stream pushes: its receives wait as long as a long poll may, and
	// an empty one is no poll to pause after.
	wait := p.cfg.WaitTime
	if p.stream != nil {
		wait = maxStreamWait
	}
	for {
		n := p.reserve()
		if n == 0 {
			select {
			case <-p.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		msgs, err := p.cfg.Source.Receive(ctx, ReceiveRequest{Max: n, Wait: wait, Lease: p.cfg.Lease})
		p.accept(ctx, n, msgs)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			failures = 0
			if len(msgs) == 0 && wait == 0 && !p.pause(ctx, shortPollPause) {
				return
			}
			continue
		}
		// Back off after a failed receive: 100 ms doubling to 10 s, each
		// wait drawn from its upper half, so that pools that failed
		// together do not retry together.
		failures++
		d := min(100*time.Millisecond<<min(failures-1, 7), 10*time.Second)
		d = d/2 + time.Duration(rng.Int64N(int64(d/2)+1))
		p.log.Error("worker: receive failed; retrying", "err", err, "retry_in", d, "failures", failures)
		if !p.pause(ctx, d) {
			return
		}
	}
}

// updateCredit sets a stream's credit to the messages the pool may hold:
// its slots + Prefetch, or 0 while it is paused or stopping.
func (p *Pool) updateCredit() {
	if p.stream == nil {
		return
	}
	p.creditMu.Lock()
	defer p.creditMu.Unlock()
	p.mu.Lock()
	n := p.slots + p.cfg.Prefetch
	if p.paused || p.stopping {
		n = 0
	}
	p.mu.Unlock()
	if n != p.credit {
		p.credit = n
		p.stream.SetCredit(n)
	}
}

// stopStream stops a stream's deliveries as the pool stops receiving: its
// credit 0, and what it delivered that the pool did not receive released.
func (p *Pool) stopStream() {
	if p.stream == nil {
		return
	}
	p.creditMu.Lock()
	p.credit = 0
	p.creditMu.Unlock()
	ctx, cancel := context.WithTimeout(p.base, settleTimeout)
	defer cancel()
	if err := p.stream.Stop(ctx); err != nil {
		p.log.Warn("worker: releasing the messages the stream delivered and the pool did not start failed; the broker hands them back when the stream closes",
			"err", err)
	}
}

// closeStream ends a stream once every message the pool received is
// settled.
func (p *Pool) closeStream() {
	if p.stream == nil {
		return
	}
	ctx, cancel := context.WithTimeout(p.base, settleTimeout)
	defer cancel()
	if err := p.stream.Close(ctx); err != nil {
		p.log.Warn("worker: closing the stream", "err", err)
	}
}

// pause waits d on the pool's clock; false when ctx ended first.
func (p *Pool) pause(ctx context.Context, d time.Duration) bool {
	t := p.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// reserve returns how many messages the receiver may ask for now (0: no
// room, or paused, or stopping) and counts them as requested.
func (p *Pool) reserve() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused || p.stopping {
		return 0
	}
	room := p.slots + p.cfg.Prefetch - p.running - len(p.prefetched) - p.requested
	n := max(min(room, maxReceive), 0)
	p.requested += n
	return n
}

// accept takes the messages of a receive that asked for n: each starts on
// a free slot or waits in the prefetch queue, oldest first; when the pool
// is stopping (or ctx, the receiver's, ended) they are released at once.
func (p *Pool) accept(ctx context.Context, n int, msgs []*Message) {
	var start, release []*delivery
	p.mu.Lock()
	p.requested -= n
	stop := p.stopping || ctx.Err() != nil
	for _, m := range msgs {
		d := &delivery{m: m}
		if stop {
			d.state = settlingState
			release = append(release, d)
			continue
		}
		p.held[d] = struct{}{}
		if p.running < p.slots {
			p.startLocked(d)
			p.handlers.Add(1)
			start = append(start, d)
		} else {
			p.prefetched = append(p.prefetched, d)
		}
	}
	p.mu.Unlock()
	for _, d := range start {
		go p.runHandlers(d)
	}
	p.releaseAll(release)
}

// startLocked makes d running, with a context of its own. The caller holds
// p.mu and starts a handler goroutine for it (or runs it on its own).
func (p *Pool) startLocked(d *delivery) {
	p.running++
	d.state = runningState
	d.ctx, d.cancel = context.WithCancelCause(p.base)
}

// runHandlers is a handler goroutine: it handles d, then the oldest
// prefetched message while a slot is free for it.
func (p *Pool) runHandlers(d *delivery) {
	defer p.handlers.Done()
	for d != nil {
		p.handle(d)
		d = p.next()
	}
}

// next ends a handler's turn on its slot and returns the prefetched message
// to start on it, if any and the slot still counts (slots may have fallen).
func (p *Pool) next() *delivery {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running--
	defer p.notify()
	if p.stopping || len(p.prefetched) == 0 || p.running >= p.slots {
		return nil
	}
	d := p.prefetched[0]
	p.prefetched[0] = nil
	p.prefetched = p.prefetched[1:]
	p.startLocked(d)
	return d
}

// handle runs the handler for d and applies its outcome, unless the lease
// was lost meanwhile.
func (p *Pool) handle(d *delivery) {
	m := d.m
	start := p.cfg.Clock.Now()
	err := Invoke(d.ctx, p.cfg.Handler, m)
	dur := p.cfg.Clock.Now().Sub(start)
	var pe *PanicError
	if errors.As(err, &pe) {
		p.log.Error("worker: handler panicked; the message is nacked", "queue", m.Queue, "message_id", m.ID,
			"panic", pe.Value, "stack", string(pe.Stack))
	}
	if err == nil {
		if h := p.cfg.Hooks.OnHandled; h != nil {
			h(m, dur)
		}
	} else if h := p.cfg.Hooks.OnFailed; h != nil {
		h(m, err, dur)
	}
	o := OutcomeOf(err)

	p.mu.Lock()
	delete(p.held, d)
	d.state = settlingState
	lost, interrupted := d.lost, d.interrupted
	if err == nil {
		p.handled++
	} else {
		p.failed++
	}
	p.mu.Unlock()
	d.cancel(context.Canceled)
	// No extend of this message may be in flight when its outcome goes
	// out: a late extend would follow the ack.
	d.extending.Wait()

	if lost {
		p.log.Warn("worker: the handler ended after its message's lease was lost; its outcome is not applied (the message will be delivered again)",
			"queue", m.Queue, "message_id", m.ID, "outcome", o.Kind.String(), "err", err)
		return
	}
	var ra *RetryAfterError
	if interrupted && o.Kind == KindNack && !errors.As(err, &ra) {
		o = Outcome{Kind: KindRelease}
	}
	if err != nil && o.Kind != KindRelease {
		p.log.Info("worker: handler failed", "queue", m.Queue, "message_id", m.ID, "outcome", o.Kind.String(),
			"attempts", m.Attempts, "err", err)
	}
	p.settle(m, o)
}

// settle applies o to m on a context of its own (settleTimeout).
func (p *Pool) settle(m *Message, o Outcome) {
	ctx, cancel := context.WithTimeout(p.base, settleTimeout)
	defer cancel()
	err := p.cfg.Source.Settle(ctx, m, o)
	switch {
	case err == nil:
	case errors.Is(err, ErrLeaseLost):
		p.log.Warn("worker: the lease ended before the outcome was applied; the message will be delivered again",
			"queue", m.Queue, "message_id", m.ID, "outcome", o.Kind.String())
	default:
		// The request may have reached the broker before the connection
		// failed (a broker killed mid-answer): then the outcome was applied.
		hint := "unless the broker applied it before the failure, the message will be delivered again when its lease ends"
		if o.Kind == KindDeadLetter {
			hint += "; a dead-letter-now needs a queue with a dead-letter queue (RedrivePolicy)"
		}
		p.log.Error("worker: applying the outcome failed; "+hint, "queue", m.Queue, "message_id", m.ID,
			"outcome", o.Kind.String(), "err", err)
	}
}

// releasePrefetched hands every prefetched message back at once.
func (p *Pool) releasePrefetched() {
	p.mu.Lock()
	ds := p.prefetched
	p.prefetched = nil
	for _, d := range ds {
		delete(p.held, d)
		d.state = settlingState
	}
	p.mu.Unlock()
	for _, d := range ds {
		d.extending.Wait()
	}
	p.releaseAll(ds)
}

// releaseAll releases ds (KindRelease), up to 10 at a time, and returns
// when all are done.
func (p *Pool) releaseAll(ds []*delivery) {
	if len(ds) == 0 {
		return
	}
	sem := make(chan struct{}, 10)
	var wg sync.WaitGroup
	for _, d := range ds {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			p.settle(d.m, Outcome{Kind: KindRelease})
		})
	}
	wg.Wait()
	p.log.Info("worker: released unstarted messages", "count", len(ds))
}

// interruptRunning cancels every running handler's context (cause
// ErrShutdown): the grace has ended.
func (p *Pool) interruptRunning() {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for d := range p.held {
		if d.state == runningState {
			d.interrupted = true
			d.cancel(ErrShutdown)
			n++
		}
	}
	if n > 0 {
		p.log.Warn("worker: shutdown grace ended; cancelling running handlers", "count", n)
	}
}
