// Package live samples the broker for the dashboard: every Interval it
// reads every queue's counts once (broker.AllStats) and this broker's event
// counters (it is a model.Observer), and from them builds one snapshot
// that every reader shares: GET /v1/stats answers the latest snapshot, GET
// /v1/events streams each new one as a server-sent event, and GET
// /v1/queues/{queue}/history answers a queue's recent series. The cost of a
// tick is one AllStats read and one JSON encoding, whatever the number of
// clients.
//
// What it keeps is in memory and per broker: rates count what went through
// this broker only (on a PostgreSQL store shared by several brokers, each
// one's rates are its own, while the counts are the store's), and the
// history starts empty at each start. It decides nothing about queue
// semantics.
//
// Wiring (cmd/sluice does this):
//
//	l, _ := live.New(live.DefaultConfig())
//	obs := model.Observers(metricsObserver, l)
//	backend, _ := embedded.Open(embedded.Config{Options: storage.Options{Observer: obs}, ...})
//	front, _ := broker.New(backend, broker.Config{Observer: obs, ...})
//	cfg.Live = l // server: Attach(front), Start, the routes, Stop
package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/health"
)

// Config configures a Live. Use DefaultConfig and change fields; Validate
// reports the first field out of range.
type Config struct {
	// Interval is the time between two samples (and two events of a
	// stream). Default 1 s; 10 ms..1 min.
	Interval time.Duration
	// RateWindow is the time the rates of /v1/stats are averaged over.
	// Default 1 min; 10 ms..1 h (below Interval, a rate spans one interval).
	RateWindow time.Duration
	// HistoryStep is the time between two points of a queue's history (a
	// point is added at the first sample a step after the last one).
	// Default 5 s; 10 ms..1 h.
	HistoryStep time.Duration
	// HistoryWindow is how far back a history goes. Default 15 min; at
	// least HistoryStep, at most 10,000 steps.
	HistoryWindow time.Duration
	// KeepAlive is the time between comment lines on an event stream that
	// has nothing else to send (proxies close silent connections). Default
	// 15 s; 10 ms..10 min.
	KeepAlive time.Duration
	// SampleTimeout bounds one AllStats read. Default 5 s; 10 ms..1 min.
	SampleTimeout time.Duration
	// Thresholds decide each queue's health state (package health, which
	// metrics calls on the same figures).
	Thresholds health.Thresholds
	// Logger receives failed samples (warn). Nil discards.
	Logger *slog.Logger
}

// DefaultConfig returns the default configuration.
func DefaultConfig() Config {
	return Config{
		Interval:      time.Second,
		RateWindow:    time.Minute,
		HistoryStep:   5 * time.Second,
		HistoryWindow: 15 * time.Minute,
		KeepAlive:     15 * time.Second,
		SampleTimeout: 5 * time.Second,
		Thresholds:    health.DefaultThresholds(),
	}
}

// Validate reports the first field out of its allowed range.
func (c Config) Validate() error {
	checks := []struct {
		name   string
		v, lo  time.Duration
		hi     time.Duration
		reason string
	}{
		{"Interval", c.Interval, 10 * time.Millisecond, time.Minute, ""},
		{"RateWindow", c.RateWindow, 10 * time.Millisecond, time.Hour, ""},
		{"HistoryStep", c.HistoryStep, 10 * time.Millisecond, time.Hour, ""},
		{"HistoryWindow", c.HistoryWindow, c.HistoryStep, 10000 * c.HistoryStep, " (1 to 10,000 HistorySteps)"},
		{"KeepAlive", c.KeepAlive, 10 * time.Millisecond, 10 * time.Minute, ""},
		{"SampleTimeout", c.SampleTimeout, 10 * time.Millisecond, time.Minute, ""},
	}
	for _, ch := range checks {
		if ch.v < ch.lo || ch.v > ch.hi {
			return fmt.Errorf("live: %s %v out of range [%v, %v]%s", ch.name, ch.v, ch.lo, ch.hi, ch.reason)
		}
	}
	return c.Thresholds.Validate()
}

// Rates are events per second.
type Rates struct {
	Sent         float64 `json:"sent"`
	Received     float64 `json:"received"`
	Deleted      float64 `json:"deleted"`
	Nacked       float64 `json:"nacked"`
	DeadLettered float64 `json:"deadLettered"`
}

// QueueStats is one queue of a snapshot.
type QueueStats struct {
	Name     string `json:"name"`
	Fifo     bool   `json:"fifo"`
	Paused   bool   `json:"paused"`
	Visible  int64  `json:"visible"`
	InFlight int64  `json:"inFlight"`
	Delayed  int64  `json:"delayed"`
	// DeadLetterQueue is the queue's redrive target ("" when none).
	DeadLetterQueue string `json:"deadLetterQueue"`
	// DeadLetters is the depth of DeadLetterQueue: null when the queue has
	// no RedrivePolicy or its target does not exist, 0 when it is empty (as
	// the native API's queue stats say).
	DeadLetters *int64 `json:"deadLetters"`
	// IsDeadLetterQueue: some queue's RedrivePolicy names this one (it is
	// judged by its count, not by age).
	IsDeadLetterQueue bool `json:"isDeadLetterQueue"`
	// OldestAgeSeconds is the age of the oldest message, whatever its state
	// (0 when empty); OldestVisibleAgeSeconds how long the longest-visible
	// message has waited for a consumer (0 when none is visible), which
	// health judges.
	OldestAgeSeconds        float64 `json:"oldestAgeSeconds"`
	OldestVisibleAgeSeconds float64 `json:"oldestVisibleAgeSeconds"`
	// Rates are this broker's, averaged over Config.RateWindow (or since
	// the queue was first seen, when that is shorter).
	Rates Rates `json:"rates"`
	// Health is the queue's state, HealthReasons why, and HealthThresholds
	// the thresholds that judged it (its own HealthDepth and HealthAge, or
	// the broker's).
	Health           health.Health `json:"health"`
	HealthReasons    []string      `json:"healthReasons"`
	HealthThresholds limitsJSON    `json:"healthThresholds"`
}

// limitsJSON is health.Limits as /v1/stats shows them (0 is off).
type limitsJSON struct {
	DepthWarning       int64   `json:"depthWarning"`
	DepthCritical      int64   `json:"depthCritical"`
	AgeWarningSeconds  float64 `json:"ageWarningSeconds"`
	AgeCriticalSeconds float64 `json:"ageCriticalSeconds"`
}

// thresholdsJSON is health.Thresholds, the broker's, as /v1/stats shows
// them.
type thresholdsJSON struct {
	DepthWarning       int64                  `json:"depthWarning"`
	DepthCritical      int64                  `json:"depthCritical"`
	AgeWarningSeconds  float64                `json:"ageWarningSeconds"`
	AgeCriticalSeconds float64                `json:"ageCriticalSeconds"`
	DLQDepthWarning    int64                  `json:"dlqDepthWarning"`
	DLQDepthCritical   int64                  `json:"dlqDepthCritical"`
	DeadLetters        health.DeadLetterLevel `json:"deadLetters"`
}

func thresholdsOf(t health.Thresholds) thresholdsJSON {
	return thresholdsJSON{
		DepthWarning: t.DepthWarning, DepthCritical: t.DepthCritical,
		AgeWarningSeconds: t.AgeWarning.Seconds(), AgeCriticalSeconds: t.AgeCritical.Seconds(),
		DLQDepthWarning: t.DLQDepthWarning, DLQDepthCritical: t.DLQDepthCritical,
		DeadLetters: t.DeadLetters,
	}
}

// Snapshot is what GET /v1/stats answers: every queue, in name order.
type Snapshot struct {
	Time       time.Time      `json:"time"`
	Thresholds thresholdsJSON `json:"thresholds"`
	Queues     []QueueStats   `json:"queues"`
}

// snapshot is a Snapshot with its JSON, encoded once per tick.
type snapshot struct {
	Snapshot
	body  []byte
	index map[string]int // queue name -> index in Queues
}

// queueSeries is what the sampler keeps of one queue. Owned by the sampling
// goroutine (under Live.sampleMu).
type queueSeries struct {
	id uint64 // the queue's id: a re-created queue starts afresh
	// ring holds the cumulative counters at the last samples within
	// RateWindow, oldest first (times and counts).
	ring []counterSample
	// history is the queue's points, oldest first, at most HistoryWindow /
	// HistoryStep of them; stepStart is the counters at the last point.
	history   []Point
	stepStart counterSample
}

// counterSample is the cumulative counters of a queue at a time.
type counterSample struct {
	at time.Time
	n  [model.NumCounters]uint64
}

// Point is one step of a queue's history: the counts at Time and the rates
// (per second) over the step that ended at Time.
type Point struct {
	Time        time.Time `json:"time"`
	Visible     int64     `json:"visible"`
	InFlight    int64     `json:"inFlight"`
	Delayed     int64     `json:"delayed"`
	DeadLetters int64     `json:"deadLetters"`
	Sent        float64   `json:"sent"`
	Received    float64   `json:"received"`
	Deleted     float64   `json:"deleted"`
	// Nacked and DeadLettered are the step's leases handed back as
	// failures (a native nack, or SQS's ChangeMessageVisibility to 0) and
	// moves to the dead-letter queue, per second.
	Nacked       float64 `json:"nacked"`
	DeadLettered float64 `json:"deadLettered"`
}

// History is what GET /v1/queues/{queue}/history answers.
type History struct {
	Queue       string  `json:"queue"`
	StepSeconds float64 `json:"stepSeconds"`
	Points      []Point `json:"points"`
}

// Live is the dashboard's sampler. Safe for concurrent use; the zero value
// is not usable: call New.
type Live struct {
	cfg Config
	log *slog.Logger

	front atomic.Pointer[broker.Broker]

	// countsMu guards counts (Observer calls come from many goroutines).
	countsMu sync.Mutex
	counts   map[string]*[model.NumCounters]atomic.Uint64
	// stale marks the counters of a queue the last sample did not find:
	// they go at the next sample that does not find it either.
	stale map[string]bool

	// sampleMu serializes samples and guards series.
	sampleMu sync.Mutex
	series   map[string]*queueSeries

	// latest is the last snapshot (nil before the first sample).
	latest atomic.Pointer[snapshot]

	// subsMu guards subs; each subscriber's channel holds at most one
	// snapshot (a slow reader skips ticks).
	subsMu sync.Mutex
	subs   map[chan *snapshot]struct{}

	// lifecycle: started/stopped under lifeMu; done is closed by Stop and
	// ends every stream; loopDone is closed when the sampling goroutine
	// returns.
	lifeMu   sync.Mutex
	started  bool
	stopped  bool
	done     chan struct{}
	loopDone chan struct{}
}

// New returns a Live for cfg (zero fields take their defaults, except
// Thresholds, which is used as given when any of it is set).
func New(cfg Config) (*Live, error) {
	def := DefaultConfig()
	for _, f := range []struct{ p, d *time.Duration }{
		{&cfg.Interval, &def.Interval}, {&cfg.RateWindow, &def.RateWindow}, {&cfg.HistoryStep, &def.HistoryStep},
		{&cfg.HistoryWindow, &def.HistoryWindow}, {&cfg.KeepAlive, &def.KeepAlive}, {&cfg.SampleTimeout, &def.SampleTimeout},
	} {
		if *f.p == 0 {
			*f.p = *f.d
		}
	}
	if cfg.Thresholds == (health.Thresholds{}) {
		cfg.Thresholds = def.Thresholds
	}
	if cfg.Thresholds.DeadLetters == "" {
		cfg.Thresholds.DeadLetters = health.DeadLettersWarning
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Live{
		cfg:      cfg,
		log:      log,
		counts:   map[string]*[model.NumCounters]atomic.Uint64{},
		stale:    map[string]bool{},
		series:   map[string]*queueSeries{},
		subs:     map[chan *snapshot]struct{}{},
		done:     make(chan struct{}),
		loopDone: make(chan struct{}),
	}, nil
}

// Config is the configuration in use (defaults filled in).
func (l *Live) Config() Config { return l.cfg }

// Attach sets the broker to sample. Until it is called, a sample has no
// queues.
func (l *Live) Attach(b *broker.Broker) { l.front.Store(b) }

// Count implements model.Observer.
func (l *Live) Count(queue string, c model.Counter, n int) {
	if c >= model.NumCounters || n <= 0 {
		return
	}
	l.countsMu.Lock()
	q := l.counts[queue]
	if q == nil {
		q = new([model.NumCounters]atomic.Uint64)
		l.counts[queue] = q
	}
	l.countsMu.Unlock()
	q[c].Add(uint64(n))
}

// Refused implements model.Observer (refusals are metrics' concern).
func (l *Live) Refused(string, string) {}

// Synced implements model.Observer.
func (l *Live) Synced(time.Duration, int) {}

// Start takes a first sample, then samples every Interval in a goroutine
// that Live owns, until Stop. Starting a started Live does nothing;
// starting a stopped one is an error. A failed first sample is logged, not
// returned: the broker serves, and the next tick tries again.
func (l *Live) Start(ctx context.Context) error {
	l.lifeMu.Lock()
	defer l.lifeMu.Unlock()
	if l.stopped {
		return errors.New("live: Start after Stop")
	}
	if l.started {
		return nil
	}
	l.started = true
	if _, err := l.Sample(ctx); err != nil {
		l.log.Warn("dashboard sample failed", "err", err)
	}
	go l.loop()
	return nil
}

// loop samples every Interval until Stop.
func (l *Live) loop() {
	defer close(l.loopDone)
	t := time.NewTicker(l.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-t.C:
			if _, err := l.Sample(context.Background()); err != nil {
				l.log.Warn("dashboard sample failed", "err", err)
			}
		}
	}
}

// Stop ends every event stream and the sampling goroutine, and waits for
// the goroutine. Idempotent; safe on a Live never started.
func (l *Live) Stop() {
	l.lifeMu.Lock()
	if l.stopped {
		l.lifeMu.Unlock()
		<-l.loopDone
		return
	}
	l.stopped = true
	started := l.started
	close(l.done)
	l.lifeMu.Unlock()
	if started {
		<-l.loopDone
	} else {
		close(l.loopDone)
	}
}

// Done is closed when Stop is called.
func (l *Live) Done() <-chan struct{} { return l.done }

// Latest returns the last snapshot (taking one when Live is not running).
func (l *Live) Latest(ctx context.Context) (Snapshot, error) {
	s, err := l.latestSnapshot(ctx)
	if err != nil {
		return Snapshot{}, err
	}
	return s.Snapshot, nil
}

// latestSnapshot is the last snapshot while the sampling goroutine runs;
// without it (never started, or stopped) each call samples anew.
func (l *Live) latestSnapshot(ctx context.Context) (*snapshot, error) {
	l.lifeMu.Lock()
	running := l.started && !l.stopped
	l.lifeMu.Unlock()
	if s := l.latest.Load(); s != nil && running {
		return s, nil
	}
	return l.sample(ctx)
}

// Sample reads the broker now, publishes the snapshot to every stream and
// returns it. The sampling goroutine calls it every Interval; tests on a
// fake clock call it themselves.
func (l *Live) Sample(ctx context.Context) (Snapshot, error) {
	s, err := l.sample(ctx)
	if err != nil {
		return Snapshot{}, err
	}
	return s.Snapshot, nil
}

func (l *Live) sample(ctx context.Context) (*snapshot, error) {
	l.sampleMu.Lock()
	defer l.sampleMu.Unlock()
	b := l.front.Load()
	var all []model.QueueInfo
	now := time.Now()
	if b != nil {
		ctx, cancel := context.WithTimeout(ctx, l.cfg.SampleTimeout)
		defer cancel()
		var err error
		all, err = b.AllStats(ctx)
		if err != nil {
			return nil, fmt.Errorf("live: read the queues: %w", err)
		}
		now = b.Clock().Now()
	}
	assessed := l.cfg.Thresholds.Assess(all, now)
	snap := &snapshot{
		Snapshot: Snapshot{Time: now, Thresholds: thresholdsOf(l.cfg.Thresholds), Queues: make([]QueueStats, 0, len(all))},
		index:    make(map[string]int, len(all)),
	}
	seen := make(map[string]bool, len(all))
	for i, q := range all {
		seen[q.Name] = true
		cur := counterSample{at: now, n: l.countersOf(q.Name)}
		ser := l.series[q.Name]
		if ser == nil || ser.id != q.ID {
			ser = &queueSeries{id: q.ID, stepStart: cur}
			l.series[q.Name] = ser
		}
		ser.push(cur, l.cfg.RateWindow)

		st, a := q.Stats, assessed[i]
		qs := QueueStats{
			Name: q.Name, Fifo: q.Config.Fifo, Paused: q.Config.Paused,
			Visible: st.Visible, InFlight: st.InFlight, Delayed: st.Delayed,
			DeadLetterQueue: a.DeadLetterQueue, DeadLetters: a.DeadLetters, IsDeadLetterQueue: a.IsDeadLetterQueue,
			OldestAgeSeconds: a.OldestAge.Seconds(), OldestVisibleAgeSeconds: a.VisibleAge.Seconds(),
			Rates:  ser.rates(),
			Health: a.Health, HealthReasons: a.Reasons,
			HealthThresholds: limitsJSON{
				DepthWarning: a.Limits.DepthWarning, DepthCritical: a.Limits.DepthCritical,
				AgeWarningSeconds: a.Limits.AgeWarning.Seconds(), AgeCriticalSeconds: a.Limits.AgeCritical.Seconds(),
			},
		}
		ser.step(cur, qs, l.cfg.HistoryStep, l.cfg.HistoryWindow)
		snap.index[q.Name] = len(snap.Queues)
		snap.Queues = append(snap.Queues, qs)
	}
	// A deleted queue's series go. Its counters go too, unless they moved
	// since the read (a queue created just after it).
	for name := range l.series {
		if !seen[name] {
			delete(l.series, name)
		}
	}
	l.countsMu.Lock()
	for name := range l.counts {
		switch {
		case seen[name]:
			delete(l.stale, name)
		case l.stale[name]:
			delete(l.counts, name)
			delete(l.stale, name)
		default:
			l.stale[name] = true
		}
	}
	l.countsMu.Unlock()
	body, err := json.Marshal(snap.Snapshot)
	if err != nil {
		return nil, fmt.Errorf("live: encode the snapshot: %w", err)
	}
	snap.body = body
	l.latest.Store(snap)
	l.publish(snap)
	return snap, nil
}

// countersOf reads a queue's cumulative counters.
func (l *Live) countersOf(queue string) [model.NumCounters]uint64 {
	var out [model.NumCounters]uint64
	l.countsMu.Lock()
	q := l.counts[queue]
	l.countsMu.Unlock()
	if q != nil {
		for i := range out {
			out[i] = q[i].Load()
		}
	}
	return out
}

// push appends a sample to the rate ring and drops the samples older than
// the window, keeping the newest one at or before the window's start (the
// base the rates are measured from).
func (s *queueSeries) push(c counterSample, window time.Duration) {
	if n := len(s.ring); n > 1 && !c.at.After(s.ring[n-1].at) {
		// No time passed since the last sample (a fake clock): replace it,
		// so that the ring stays bounded.
		s.ring[n-1] = c
		return
	}
	s.ring = append(s.ring, c)
	start := c.at.Add(-window)
	i := 0
	for i+1 < len(s.ring) && !s.ring[i+1].at.After(start) {
		i++
	}
	if i > 0 {
		s.ring = append(s.ring[:0], s.ring[i:]...)
	}
}

// rates are the counters' increase from the ring's oldest sample to its
// newest, per second (zero with a single sample).
func (s *queueSeries) rates() Rates {
	if len(s.ring) < 2 {
		return Rates{}
	}
	a, b := s.ring[0], s.ring[len(s.ring)-1]
	secs := b.at.Sub(a.at).Seconds()
	if secs <= 0 {
		return Rates{}
	}
	per := func(c model.Counter) float64 { return float64(b.n[c]-a.n[c]) / secs }
	return Rates{
		Sent: per(model.CountSent), Received: per(model.CountReceived), Deleted: per(model.CountDeleted),
		Nacked: per(model.CountNacked), DeadLettered: per(model.CountDeadLettered),
	}
}

// step appends a history point when a step has passed since the last one
// (the first point once a step after the queue was first seen), and drops
// the points older than the window.
func (s *queueSeries) step(c counterSample, q QueueStats, step, window time.Duration) {
	if c.at.Sub(s.stepStart.at) < step {
		return
	}
	secs := c.at.Sub(s.stepStart.at).Seconds()
	per := func(k model.Counter) float64 { return float64(c.n[k]-s.stepStart.n[k]) / secs }
	var dead int64
	if q.DeadLetters != nil {
		dead = *q.DeadLetters
	}
	s.history = append(s.history, Point{
		Time: c.at, Visible: q.Visible, InFlight: q.InFlight, Delayed: q.Delayed, DeadLetters: dead,
		Sent: per(model.CountSent), Received: per(model.CountReceived), Deleted: per(model.CountDeleted),
		Nacked: per(model.CountNacked), DeadLettered: per(model.CountDeadLettered),
	})
	s.stepStart = c
	if n := int(window / step); len(s.history) > n {
		s.history = append(s.history[:0], s.history[len(s.history)-n:]...)
	}
}

// QueueHistory returns a queue's history, oldest point first; false when
// the sampler has not seen the queue (it does not exist, or was created
// since the last sample).
func (l *Live) QueueHistory(queue string) (History, bool) {
	l.sampleMu.Lock()
	defer l.sampleMu.Unlock()
	s := l.series[queue]
	if s == nil {
		return History{}, false
	}
	return History{Queue: queue, StepSeconds: l.cfg.HistoryStep.Seconds(), Points: append([]Point{}, s.history...)}, true
}

// subscribe registers a stream; its channel receives each new snapshot
// (holding one at most: a reader that falls behind skips to the newest).
func (l *Live) subscribe() (chan *snapshot, func()) {
	ch := make(chan *snapshot, 1)
	l.subsMu.Lock()
	l.subs[ch] = struct{}{}
	l.subsMu.Unlock()
	return ch, func() {
		l.subsMu.Lock()
		delete(l.subs, ch)
		l.subsMu.Unlock()
	}
}

// publish hands s to every stream without blocking: a stream whose last
// snapshot is still unread gets s in its place.
func (l *Live) publish(s *snapshot) {
	l.subsMu.Lock()
	defer l.subsMu.Unlock()
	for ch := range l.subs {
		select {
		case ch <- s:
			continue
		default:
		}
		select {
		case <-ch: // drop the unread one
		default:
		}
		select {
		case ch <- s:
		default:
		}
	}
}

// Streams is the number of open event streams.
func (l *Live) Streams() int {
	l.subsMu.Lock()
	defer l.subsMu.Unlock()
	return len(l.subs)
}
