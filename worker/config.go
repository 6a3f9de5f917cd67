package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Config is a pool's configuration. Zero fields take DefaultConfig's values
// (NewPool fills them before it validates), except Source and Handler,
// which are required, and the optional features (MinConcurrency, CPULimit,
// Hooks), whose zero value is off.
type Config struct {
	// Source is where messages come from: NewSource (a Sluice broker: a
	// consumer stream by default, or the native HTTP API), package
	// sqssource (any SQS endpoint), or any Source. Required.
	Source Source
	// Handler handles each message. Required. Wrap it with middleware
	// (Chain) before setting it; a panic is recovered by the pool.
	Handler Handler

	// Concurrency is the most handlers that run at once. Default 10;
	// 1..10000.
	Concurrency int
	// MinConcurrency turns on adaptive concurrency when 0 < MinConcurrency
	// < Concurrency: the pool then runs between MinConcurrency and
	// Concurrency handlers, following the backlog (Source must be a
	// Backlogger). Every AdaptInterval it reads the backlog b (the visible
	// messages) and sets its slots to want = held + b, clamped to
	// [MinConcurrency, Concurrency], where held counts the messages it holds
	// (running and prefetched): enough slots for the work it has plus the
	// work that waits. The slots rise to want at once and fall by half the
	// gap per reading (at least one slot), so that a backlog that comes and
	// goes in bursts does not make the pool shrink and grow at every
	// reading. Running handlers are never stopped: a pool above its slots
	// only starts no new one. Default 0 (off: Concurrency slots always).
	MinConcurrency int
	// AdaptInterval is the period of the backlog readings of adaptive
	// concurrency. Default 5 s; 10 ms..10 min.
	AdaptInterval time.Duration

	// Prefetch is how many messages the pool may hold received but not
	// started, beyond its running handlers: a pool never holds more than
	// its slots + Prefetch leases. Default 0: the pool receives only when a
	// slot is free, and only as many messages as there are free slots. That
	// is the fair share: a busy pool never takes a message that an idle
	// pool (another process on the same queue) could start now, and no
	// lease burns while its message waits. The cost is one receive round
	// trip between a handler's end and its slot's next message, small
	// beside most handlers; raise Prefetch (a few) for handlers of about a
	// millisecond against a distant broker. 0..1000. With a StreamSource
	// (NewSource's default) the stream's credit is the pool's slots +
	// Prefetch: the broker pushes a message only when the pool has room
	// for it.
	Prefetch int

	// Lease is the visibility timeout each receive asks for (a stream's
	// lease, in whole seconds): how long a message stays invisible to
	// other consumers before the pool's heartbeat (or, for a stream, the
	// broker) extends it. If the process dies, its messages come back
	// after at most this long. Default 30 s; 1 s..12 h.
	Lease time.Duration
	// HeartbeatInterval is the period of the heartbeat, which extends the
	// leases of every held message (running and prefetched) to Lease from
	// now. Default 0, which means Lease/3 (two heartbeats may fail before
	// a lease ends; 10 s for the default Lease); 10 ms..Lease/2. With a
	// StreamSource the broker extends the leases of the messages a live
	// stream holds, and the heartbeat costs no request for them: it
	// extends, through the native API, only the messages of a stream that
	// has ended (the broker restarted), and cancels the handlers of those
	// held past the stream's maximum hold (ErrLeaseLost).
	HeartbeatInterval time.Duration
	// WaitTime is the long-poll time of a receive: how long it waits for a
	// first message on an empty queue. Default 20 s (the most SQS allows:
	// the fewest empty receives); 0..20 s. A negative value means 0: short
	// polling, with a pause of 1 s after an empty receive. A StreamSource
	// has no polls: its receives wait for the broker's pushes, and
	// WaitTime does not apply.
	WaitTime time.Duration

	// CPULimit, when above 0, pauses receiving while the process uses more
	// than this share of the CPU (1 = every core GOMAXPROCS allows busy),
	// as measured by CPUSampler every CPUInterval: 0.8 leaves a fifth of
	// the machine to the running handlers' other work. Running handlers go
	// on; the heartbeat goes on; a stream's credit is 0 meanwhile. Default
	// 0 (off); 0..1.
	CPULimit float64
	// CPUInterval is the period of the CPU readings. Default 1 s; 10 ms..1
	// min.
	CPUInterval time.Duration
	// CPUSampler measures the process's CPU use. Default ProcessCPU().
	CPUSampler CPUSampler

	// Logger receives the pool's logs (failures, panics with their stack,
	// lost leases, pauses). Default: slog.Default().
	Logger *slog.Logger
	// Hooks are called as handlers end, for metrics. Zero: none.
	Hooks Hooks
	// Clock times the heartbeat, the readings, the receive retries and the
	// handlers' durations. Default: the wall clock.
	Clock Clock
}

// DefaultConfig returns a Config with every default set, and no Source or
// Handler. HeartbeatInterval stays 0: it follows Lease (Lease/3).
func DefaultConfig() Config {
	return Config{
		Concurrency:   10,
		AdaptInterval: 5 * time.Second,
		Lease:         30 * time.Second,
		WaitTime:      20 * time.Second,
		CPUInterval:   time.Second,
	}
}

// withDefaults fills the zero fields with DefaultConfig's values
// (HeartbeatInterval with Lease/3).
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Concurrency == 0 {
		c.Concurrency = d.Concurrency
	}
	if c.AdaptInterval == 0 {
		c.AdaptInterval = d.AdaptInterval
	}
	if c.Lease == 0 {
		c.Lease = d.Lease
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = c.Lease / 3
	}
	if c.CPUInterval == 0 {
		c.CPUInterval = d.CPUInterval
	}
	switch {
	case c.WaitTime == 0:
		c.WaitTime = d.WaitTime
	case c.WaitTime < 0:
		c.WaitTime = 0 // short polling, asked for explicitly
	}
	if c.CPUSampler == nil {
		c.CPUSampler = ProcessCPU()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	return c
}

// Validate checks c, its zero fields taken as their defaults (as NewPool
// does); the error names each field out of range and the range.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(field string, v any, rule string) {
		errs = append(errs, fmt.Errorf("worker: Config.%s is %v: %s", field, v, rule))
	}
	if c.Source == nil {
		bad("Source", nil, "set it to where messages come from (worker.NewSource, sqssource.New)")
	}
	if c.Handler == nil {
		bad("Handler", nil, "set it to the handler that processes each message")
	}
	if c.Concurrency < 1 || c.Concurrency > 10000 {
		bad("Concurrency", c.Concurrency, "must be 1..10000")
	}
	if c.MinConcurrency < 0 || c.MinConcurrency > c.Concurrency {
		bad("MinConcurrency", c.MinConcurrency, fmt.Sprintf("must be 0 (off) .. Concurrency (%d)", c.Concurrency))
	}
	if c.AdaptInterval < 10*time.Millisecond || c.AdaptInterval > 10*time.Minute {
		bad("AdaptInterval", c.AdaptInterval, "must be 10ms..10m")
	}
	if c.Prefetch < 0 || c.Prefetch > 1000 {
		bad("Prefetch", c.Prefetch, "must be 0..1000")
	}
	if c.Lease < time.Second || c.Lease > 12*time.Hour {
		bad("Lease", c.Lease, "must be 1s..12h")
	}
	if c.HeartbeatInterval < 10*time.Millisecond || c.HeartbeatInterval > c.Lease/2 {
		bad("HeartbeatInterval", c.HeartbeatInterval, fmt.Sprintf("must be 10ms..Lease/2 (%v)", c.Lease/2))
	}
	if c.WaitTime > 20*time.Second {
		bad("WaitTime", c.WaitTime, "must be at most 20s (0: the default 20s; negative: short polling)")
	}
	if c.CPULimit < 0 || c.CPULimit > 1 || c.CPULimit != c.CPULimit {
		bad("CPULimit", c.CPULimit, "must be 0 (off) .. 1 (a share of GOMAXPROCS cores)")
	}
	if c.CPUInterval < 10*time.Millisecond || c.CPUInterval > time.Minute {
		bad("CPUInterval", c.CPUInterval, "must be 10ms..1m")
	}
	if bs, ok := c.Source.(interface{ sourceError() error }); ok {
		errs = append(errs, bs.sourceError())
	}
	if c.adaptive() {
		if _, ok := c.Source.(Backlogger); !ok && c.Source != nil {
			bad("MinConcurrency", c.MinConcurrency, "adaptive concurrency needs a Source that is a Backlogger (NewSource is); set 0 to turn it off")
		}
	}
	return errors.Join(errs...)
}

// adaptive reports whether adaptive concurrency is on.
func (c Config) adaptive() bool { return c.MinConcurrency > 0 && c.MinConcurrency < c.Concurrency }

// Hooks are called by the pool as handlers end, for metrics; nil fields are
// skipped. They run on the handler's goroutine, after the handler returned
// and before its outcome is settled: keep them quick.
type Hooks struct {
	// OnHandled is called when a handler returned nil (the message is
	// acked), with the handler's duration.
	OnHandled func(m *Message, d time.Duration)
	// OnFailed is called when a handler returned an error or panicked
	// (err is then a *PanicError), control errors included (OutcomeOf(err)
	// says what becomes of the message), with the handler's duration.
	OnFailed func(m *Message, err error, d time.Duration)
}

// Clock is the source of time for a pool. Tests inject a manual one.
type Clock interface {
	// Now returns the current instant.
	Now() time.Time
	// NewTimer returns a timer that fires once, d from now on this clock.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer that a pool uses.
type Timer interface {
	// C delivers the time when the timer fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing.
	Stop() bool
	// Reset re-arms the timer to fire d from now.
	Reset(d time.Duration)
}

type realClock struct{}

func (realClock) Now() time.Time                 { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time   { return r.t.C }
func (r realTimer) Stop() bool            { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) { r.t.Reset(d) }
