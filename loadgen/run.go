package loadgen

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// run is the state of one Run: the counters every goroutine updates
// atomically, the histograms each goroutine merges in when it ends, and the
// measured window [from, end).
type run struct {
	cfg Config
	d   Driver
	now func() time.Time
	tr  *tracker

	from, end time.Time // the measured window (drain: set when consumers start)

	confirmed, deleted          atomic.Int64
	winSent, winDeleted         atomic.Int64
	sendErrs, recvErrs, delErrs atomic.Int64
	firstErr                    atomic.Value // string
	producersDone               atomic.Bool
	allIn                       chan struct{} // closed when every confirmed message was deleted after producers finished
	allInOnce                   sync.Once
	histMu                      sync.Mutex
	sendHist, e2eHist           Histogram
	tailTimedOut                bool // written by timed before the summary reads it
}

func (r *run) fail(counter *atomic.Int64, err error) {
	counter.Add(1)
	r.firstErr.CompareAndSwap(nil, err.Error())
}

func (r *run) inWindow(t time.Time) bool { return !t.Before(r.from) && t.Before(r.end) }

// Run runs cfg against d and returns the summary. It returns an error when
// the run could not start (setup, a producer or consumer could not be made)
// or when nothing at all got through; errors during the run are counted in
// the summary.
func Run(ctx context.Context, d Driver, cfg Config) (*Summary, error) {
	def := DefaultConfig()
	if cfg.ReceiveWait == 0 {
		cfg.ReceiveWait = def.ReceiveWait
	}
	if cfg.TailTimeout == 0 {
		cfg.TailTimeout = def.TailTimeout
	}
	if cfg.ProgressEvery == 0 {
		cfg.ProgressEvery = def.ProgressEvery
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, d: d, now: cfg.Now, tr: newTracker(), allIn: make(chan struct{})}
	if r.now == nil {
		r.now = time.Now
	}
	if err := d.Setup(ctx); err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	defer d.Close()

	prods := make([]Producer, cfg.Producers)
	for i := range prods {
		p, err := d.NewProducer(ctx, i)
		if err != nil {
			return nil, fmt.Errorf("producer %d: %w", i, err)
		}
		defer p.Close()
		prods[i] = p
	}
	var cons []Consumer
	if cfg.Mode != ModeProduce {
		cons = make([]Consumer, cfg.Consumers)
		for i := range cons {
			c, err := d.NewConsumer(ctx, i)
			if err != nil {
				return nil, fmt.Errorf("consumer %d: %w", i, err)
			}
			defer c.Close()
			cons[i] = c
		}
	}

	stopProgress := r.progress(ctx)
	defer stopProgress()
	var m meter
	var elapsed time.Duration
	if cfg.Mode == ModeDrain {
		elapsed = r.drain(ctx, prods, cons, &m)
	} else {
		elapsed = r.timed(ctx, prods, cons, &m)
	}
	stopProgress()
	return r.summary(&m, elapsed), nil
}

// meter holds the CPU readings at the window's ends.
type meter struct {
	brokerStart, brokerEnd time.Duration
	selfStart, selfEnd     time.Duration
	brokerErr              error
}

func (r *run) sample(start bool, m *meter) {
	self := selfCPU()
	var b time.Duration
	if len(r.cfg.PIDs) > 0 {
		var err error
		b, err = procCPU(r.cfg.PIDs)
		if err != nil && m.brokerErr == nil {
			m.brokerErr = err
		}
	}
	if start {
		m.brokerStart, m.selfStart = b, self
	} else {
		m.brokerEnd, m.selfEnd = b, self
	}
}

// timed runs produce or steady: warmup, the measured window, then (steady)
// the consumers' tail.
func (r *run) timed(ctx context.Context, prods []Producer, cons []Consumer, m *meter) time.Duration {
	start := r.now()
	r.from = start.Add(r.cfg.Warmup)
	r.end = r.from.Add(r.cfg.Duration)
	cctx, cancelConsumers := context.WithCancel(ctx)
	defer cancelConsumers()
	var pwg, cwg sync.WaitGroup
	for i, p := range prods {
		pwg.Add(1)
		go func() { defer pwg.Done(); r.produce(ctx, i, p, -1, start) }()
	}
	for i, c := range cons {
		cwg.Add(1)
		go func() { defer cwg.Done(); r.consume(cctx, ctx, i, c) }()
	}
	if waitUntil(ctx, r.from) {
		r.sample(true, m)
	}
	if waitUntil(ctx, r.end) {
		r.sample(false, m)
	}
	pwg.Wait()
	r.producersDone.Store(true)
	r.checkAllIn()
	if len(cons) > 0 {
		t := time.NewTimer(r.cfg.TailTimeout)
		select {
		case <-r.allIn:
		case <-t.C:
			r.tailTimedOut = true
		case <-ctx.Done():
		}
		t.Stop()
	}
	cancelConsumers()
	cwg.Wait()
	return r.cfg.Duration
}

// drain loads Messages messages, then measures the consumers taking them.
func (r *run) drain(ctx context.Context, prods []Producer, cons []Consumer, m *meter) time.Duration {
	// The load is not measured: the window opens when consumers start.
	r.from = r.now().Add(365 * 24 * time.Hour)
	r.end = r.from
	var pwg sync.WaitGroup
	n := r.cfg.Messages
	for i, p := range prods {
		quota := n / len(prods)
		if i < n%len(prods) {
			quota++
		}
		pwg.Add(1)
		go func() { defer pwg.Done(); r.produce(ctx, i, p, quota, r.now()) }()
	}
	pwg.Wait()
	r.producersDone.Store(true)
	start := r.now()
	r.from, r.end = start, start.Add(365*24*time.Hour)
	r.sample(true, m)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var cwg sync.WaitGroup
	for i, c := range cons {
		cwg.Add(1)
		go func() { defer cwg.Done(); r.consume(cctx, ctx, i, c) }()
	}
	r.checkAllIn()
	r.tailTimedOut = !r.waitAllIn(ctx)
	elapsed := r.now().Sub(start)
	r.sample(false, m)
	cancel()
	cwg.Wait()
	return elapsed
}

// waitAllIn waits until every confirmed message was deleted; false when
// no delete happened for TailTimeout first (messages were lost) or ctx
// ended.
func (r *run) waitAllIn(ctx context.Context) bool {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last, lastAt := r.deleted.Load(), r.now()
	for {
		select {
		case <-r.allIn:
			return true
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
		if d := r.deleted.Load(); d != last {
			last, lastAt = d, r.now()
		} else if r.now().Sub(lastAt) >= r.cfg.TailTimeout {
			return false
		}
	}
}

// waitUntil waits for t; false when ctx ended first.
func waitUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// produce sends until the window ends (quota < 0) or quota messages were
// confirmed. Under a fixed rate each producer sends one batch per interval,
// the producers' schedules offset evenly; a late send is not skipped, and
// its latency counts from its scheduled time.
func (r *run) produce(ctx context.Context, id int, p Producer, quota int, start time.Time) {
	var h Histogram
	defer func() { r.histMu.Lock(); r.sendHist.Merge(&h); r.histMu.Unlock() }()
	var interval time.Duration
	if r.cfg.Rate > 0 {
		interval = time.Duration(float64(r.cfg.Batch) * float64(r.cfg.Producers) / r.cfg.Rate * float64(time.Second))
	}
	next := start.Add(interval * time.Duration(id) / time.Duration(r.cfg.Producers))
	bodies := make([][]byte, r.cfg.Batch)
	ids := make([]uint64, r.cfg.Batch)
	var seq uint64
	sentN := 0
	for ctx.Err() == nil {
		n := r.cfg.Batch
		if quota >= 0 {
			if sentN >= quota {
				return
			}
			n = min(n, quota-sentN)
		}
		sched := r.now()
		if interval > 0 {
			sched = next
			next = next.Add(interval)
			// The window's end stops a producer even when it is behind
			// schedule: a backlog of late sends is not worked off after it.
			if quota < 0 && (!sched.Before(r.end) || !r.now().Before(r.end)) {
				return
			}
			if !waitUntil(ctx, sched) {
				return
			}
		} else if quota < 0 && !sched.Before(r.end) {
			return
		}
		for i := 0; i < n; i++ {
			ids[i] = MessageID(id, seq)
			seq++
			bodies[i] = AppendBody(bodies[i][:0], ids[i], sched, r.cfg.BodySize)
		}
		acc, err := p.Send(ctx, bodies[:n])
		done := r.now()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.fail(&r.sendErrs, err)
			continue
		}
		ok := ids[:0:0]
		for i := 0; i < n; i++ {
			if i < len(acc) && acc[i] {
				ok = append(ok, ids[i])
			}
		}
		if len(ok) < n {
			r.fail(&r.sendErrs, fmt.Errorf("%d of %d messages in a batch refused", n-len(ok), n))
		}
		r.tr.confirmed(ok)
		r.confirmed.Add(int64(len(ok)))
		sentN += len(ok)
		// Sends count in the window they complete in, so a producer far
		// behind a fixed rate's schedule still shows its latency.
		if r.inWindow(done) {
			r.winSent.Add(int64(len(ok)))
			h.Record(done.Sub(sched))
		}
	}
}

// consume receives and deletes until cctx ends; deletes use ctx so a
// delete in flight when consumers stop still completes.
func (r *run) consume(cctx, ctx context.Context, id int, c Consumer) {
	var h Histogram
	defer func() { r.histMu.Lock(); r.e2eHist.Merge(&h); r.histMu.Unlock() }()
	ids := make([]uint64, 0, r.cfg.ReceiveMax)
	for cctx.Err() == nil {
		msgs, err := c.Receive(cctx, r.cfg.ReceiveMax, r.cfg.ReceiveWait)
		t := r.now()
		if err != nil {
			if cctx.Err() != nil {
				return
			}
			r.fail(&r.recvErrs, err)
			continue
		}
		if len(msgs) == 0 {
			r.checkAllIn()
			continue
		}
		ids = ids[:0]
		for _, m := range msgs {
			mid, sent, err := ParseBody(m.Body)
			if err != nil {
				ids = append(ids, MessageID(foreignProducer, 0))
				continue
			}
			ids = append(ids, mid)
			if r.inWindow(t) {
				h.Record(t.Sub(sent))
			}
		}
		if err := c.Delete(ctx, msgs); err != nil {
			if ctx.Err() != nil {
				return
			}
			r.fail(&r.delErrs, err)
			continue
		}
		r.tr.receivedIDs(ids)
		r.deleted.Add(int64(len(msgs)))
		if r.inWindow(t) {
			r.winDeleted.Add(int64(len(msgs)))
		}
		r.checkAllIn()
	}
}

// checkAllIn closes allIn once producers are done and every confirmed
// message has been received and deleted.
func (r *run) checkAllIn() {
	if !r.producersDone.Load() {
		return
	}
	r.tr.mu.Lock()
	unique := r.tr.received - r.tr.dups + r.tr.foreign
	r.tr.mu.Unlock()
	if unique >= r.confirmed.Load() {
		r.allInOnce.Do(func() { close(r.allIn) })
	}
}
