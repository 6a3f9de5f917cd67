package worker

import (
	"context"
	"errors"
	"time"
)

// The pool's background goroutines: the heartbeat, and the governor (the CPU
// guard and adaptive concurrency).

// heartbeat is the heartbeat goroutine: every HeartbeatInterval it extends
// the leases of every held message, running and prefetched, to Lease from
// now. It is one goroutine for the pool, independent of the handlers: a
// handler that blocks (or spins) keeps its lease all the same, and a lease
// found ended (ErrLeaseLost) cancels its handler's context with that
// cause. It runs until ctx ends, which Run does after the last handler
// returned.
func (p *Pool) heartbeat(ctx context.Context) {
	t := p.cfg.Clock.NewTimer(p.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		p.extendAll(ctx)
		t.Reset(p.cfg.HeartbeatInterval)
	}
}

// extendAll extends the held leases, 10 per call (the batch limit of SQS
// and Sluice). A call that fails as a whole is retried at the next beat
// (HeartbeatInterval is at most Lease/2, so one failure loses no lease).
//
// The invariant with the outcome: no extend of a message is in flight once
// its outcome is sent. Each batch is taken under p.mu from the messages
// not yet settling, and counted in their extending wait groups before the
// lock is released; handle (and a release) marks the message settling under
// p.mu, then waits for its extending group before it settles. So a late
// extend can never follow an ack (it would fail, or on SQS bring an acked
// receipt's error back), and an extend's answer about a message that is
// settling is not taken for a lost lease (lose ignores settling messages).
func (p *Pool) extendAll(ctx context.Context) {
	p.mu.Lock()
	ds := make([]*delivery, 0, len(p.held))
	for d := range p.held {
		ds = append(ds, d)
	}
	p.mu.Unlock()
	for len(ds) > 0 {
		p.mu.Lock()
		batch := make([]*delivery, 0, maxReceive)
		for len(ds) > 0 && len(batch) < maxReceive {
			d := ds[0]
			ds = ds[1:]
			if d.state == settlingState || d.lost {
				continue
			}
			d.extending.Add(1)
			batch = append(batch, d)
		}
		p.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		p.extendBatch(ctx, batch)
		for _, d := range batch {
			d.extending.Done()
		}
	}
}

// extendBatch extends the leases of batch, whose extending groups count
// this call, and handles the answers.
func (p *Pool) extendBatch(ctx context.Context, batch []*delivery) {
	msgs := make([]*Message, len(batch))
	for i, d := range batch {
		msgs[i] = d.m
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.HeartbeatInterval)
	errs, err := p.cfg.Source.Extend(cctx, msgs, p.cfg.Lease)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("worker: heartbeat failed; the leases are extended at the next beat", "messages", len(msgs), "err", err)
		}
		return
	}
	for i, e := range errs {
		if i >= len(batch) || e == nil {
			continue
		}
		if errors.Is(e, ErrLeaseLost) {
			p.lose(batch[i])
		} else if !p.settling(batch[i]) {
			p.log.Warn("worker: extending a lease failed; retried at the next beat", "queue", msgs[i].Queue, "message_id", msgs[i].ID, "err", e)
		}
	}
}

// settling reports whether d's outcome is being applied (or it is
// released): an extend's error about it no longer matters.
func (p *Pool) settling(d *delivery) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return d.state == settlingState
}

// lose marks d's lease lost: a running handler's context is cancelled with
// cause ErrLeaseLost and its outcome will not be applied; a prefetched
// message is dropped. A message the pool already settles is left alone.
func (p *Pool) lose(d *delivery) {
	p.mu.Lock()
	if d.lost || d.state == settlingState {
		p.mu.Unlock()
		return
	}
	d.lost = true
	delete(p.held, d)
	state := d.state
	switch state {
	case runningState:
		d.cancel(ErrLeaseLost)
	case prefetchedState:
		for i, q := range p.prefetched {
			if q == d {
				p.prefetched = append(p.prefetched[:i], p.prefetched[i+1:]...)
				break
			}
		}
		p.notify()
	}
	p.mu.Unlock()
	what := "its handler's context is cancelled"
	if state == prefetchedState {
		what = "it was not started"
	}
	p.log.Warn("worker: a message's lease was lost; "+what+" and it may be delivered again",
		"queue", d.m.Queue, "message_id", d.m.ID)
}

// govern is the governor goroutine, run when CPULimit or MinConcurrency is
// set: a CPU reading every CPUInterval, a backlog reading every
// AdaptInterval. Run took the first readings before the first receive.
func (p *Pool) govern(ctx context.Context) {
	var cpuC, adaptC <-chan time.Time // nil (never ready) when off
	var cpuT, adaptT Timer
	if p.cfg.CPULimit > 0 {
		cpuT = p.cfg.Clock.NewTimer(p.cfg.CPUInterval)
		defer cpuT.Stop()
		cpuC = cpuT.C()
	}
	if p.cfg.adaptive() {
		adaptT = p.cfg.Clock.NewTimer(p.cfg.AdaptInterval)
		defer adaptT.Stop()
		adaptC = adaptT.C()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-cpuC:
			p.readCPU()
			cpuT.Reset(p.cfg.CPUInterval)
		case <-adaptC:
			p.adapt(ctx)
			adaptT.Reset(p.cfg.AdaptInterval)
		}
	}
}

// readCPU is the CPU guard: receiving pauses while the process's CPU use
// is above CPULimit, and resumes at the first reading at or below it.
func (p *Pool) readCPU() {
	if p.cfg.CPULimit <= 0 {
		return
	}
	use := p.cfg.CPUSampler.CPUUsage()
	pause := use > p.cfg.CPULimit
	p.mu.Lock()
	changed := pause != p.paused
	p.paused = pause
	if !pause {
		p.notify()
	}
	p.mu.Unlock()
	if changed {
		p.updateCredit()
	}
	if changed && pause {
		p.log.Info("worker: CPU use above the limit; receiving paused", "cpu", use, "limit", p.cfg.CPULimit)
	} else if changed {
		p.log.Info("worker: CPU use back under the limit; receiving resumed", "cpu", use, "limit", p.cfg.CPULimit)
	}
}

// adapt is adaptive concurrency (Config.MinConcurrency documents the rule):
// it reads the backlog and moves the slots toward held + backlog, clamped
// to [MinConcurrency, Concurrency]; up at once, down by half the gap (at
// least one). Slots that opened start prefetched messages.
func (p *Pool) adapt(ctx context.Context) {
	if !p.cfg.adaptive() {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, max(p.cfg.AdaptInterval, time.Second))
	backlog, err := p.cfg.Source.(Backlogger).Backlog(cctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("worker: reading the backlog failed; concurrency unchanged", "err", err)
		}
		return
	}
	var start []*delivery
	p.mu.Lock()
	held := int64(p.running + len(p.prefetched))
	want := int(min(max(held+max(backlog, 0), int64(p.cfg.MinConcurrency)), int64(p.cfg.Concurrency)))
	old := p.slots
	if want >= p.slots {
		p.slots = want
	} else {
		p.slots -= max(1, (p.slots-want)/2)
	}
	for !p.stopping && len(p.prefetched) > 0 && p.running < p.slots {
		d := p.prefetched[0]
		p.prefetched = p.prefetched[1:]
		p.startLocked(d)
		p.handlers.Add(1)
		start = append(start, d)
	}
	slots := p.slots
	p.notify()
	p.mu.Unlock()
	for _, d := range start {
		go p.runHandlers(d)
	}
	if slots != old {
		p.updateCredit()
		p.log.Debug("worker: concurrency adapted to the backlog", "backlog", backlog, "slots", slots, "was", old)
	}
}
