package worker_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/worker"
)

const wait = 20 * time.Second // Eventually's limit: generous for a loaded machine

// config returns a pool config over src with h and a short long poll (a
// test's Shutdown does not wait for it, but a short one keeps the broker's
// waiting receives few).
func config(src worker.Source, h worker.Handler) worker.Config {
	cfg := worker.DefaultConfig()
	cfg.Source, cfg.Handler = src, h
	cfg.WaitTime = time.Second
	return cfg
}

func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := e.queue(t, "q", nil)
	e.send(t, "q", nil, strings.Split("a b c d e f g h i j k l", " ")...)
	g := newGate()
	cfg := config(src, g.handler())
	cfg.Concurrency = 4
	p := start(t, cfg)

	testutil.Eventually(t, wait, "4 running handlers", func() bool { return g.running.Load() == 4 })
	if st := e.stats(t, "q"); st.InFlight != 4 || st.Visible != 8 {
		t.Fatalf("broker stats %+v, want 4 in flight and 8 visible (no prefetch: the pool leases only what it runs)", st)
	}
	if st := p.Stats(); st.Running != 4 || st.Prefetched != 0 || st.Slots != 4 {
		t.Fatalf("pool stats %+v", st)
	}
	g.release()
	testutil.Eventually(t, wait, "the queue drained", func() bool { return e.stats(t, "q").Depth() == 0 })
	if n := g.maxRun.Load(); n != 4 {
		t.Errorf("at most %d handlers ran at once, want 4", n)
	}
	if n := src.maxLeases(); n > 4 {
		t.Errorf("the pool held %d leases at once, want at most 4", n)
	}
	testutil.Eventually(t, wait, "12 handled", func() bool { return p.Stats().Handled == 12 })
}

func TestPrefetchBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := e.queue(t, "q", nil)
	e.send(t, "q", nil, strings.Split("a b c d e f g h i j", " ")...)
	g := newGate()
	cfg := config(src, g.handler())
	cfg.Concurrency, cfg.Prefetch = 2, 3
	p := start(t, cfg)

	testutil.Eventually(t, wait, "2 running and 3 prefetched", func() bool {
		st := p.Stats()
		return st.Running == 2 && st.Prefetched == 3
	})
	if st := e.stats(t, "q"); st.InFlight != 5 || st.Visible != 5 {
		t.Fatalf("broker stats %+v, want 5 in flight (Concurrency + Prefetch) and 5 visible", st)
	}
	g.release()
	testutil.Eventually(t, wait, "the queue drained", func() bool { return e.stats(t, "q").Depth() == 0 })
	if n := src.maxLeases(); n > 5 {
		t.Errorf("the pool held %d leases at once, want at most Concurrency + Prefetch = 5", n)
	}
	if n := g.maxRun.Load(); n != 2 {
		t.Errorf("at most %d handlers ran at once, want 2", n)
	}
}

// Two pools on one queue: one whose handlers are stuck, one free. The stuck
// one holds only what it runs (plus its prefetch); the free one gets the
// rest at once.
func TestFairShare(t *testing.T) {
	t.Parallel()
	for _, prefetch := range []int{0, 1} {
		e := newEnv(t)
		src := e.queue(t, "q", nil)
		bodies := make([]string, 20)
		for i := range bodies {
			bodies[i] = "m"
		}
		e.send(t, "q", nil, bodies...)

		slow := newGate()
		cfg := config(src, slow.handler())
		cfg.Concurrency, cfg.Prefetch = 2, prefetch
		busy := start(t, cfg)
		testutil.Eventually(t, wait, "the busy pool full", func() bool {
			st := busy.Stats()
			return st.Running == 2 && st.Prefetched == prefetch
		})

		var fastDone atomic.Int64
		idleSrc := &brokerSource{b: e.b, queue: "q", held: map[string]bool{}}
		cfg = config(idleSrc, worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
			fastDone.Add(1)
			return nil
		}))
		cfg.Concurrency = 2
		start(t, cfg)
		want := int64(20 - 2 - prefetch)
		testutil.Eventually(t, wait, "the idle pool handled the rest", func() bool { return fastDone.Load() == want })
		if n := src.maxLeases(); n > 2+prefetch {
			t.Errorf("prefetch %d: the busy pool held %d leases, want at most %d", prefetch, n, 2+prefetch)
		}
		if st := busy.Stats(); st.Handled != 0 || st.Running != 2 {
			t.Errorf("prefetch %d: busy pool %+v", prefetch, st)
		}
		slow.release()
		testutil.Eventually(t, wait, "the queue drained", func() bool { return e.stats(t, "q").Depth() == 0 })
	}
}

// The heartbeat keeps a long handler's message, and a prefetched one,
// invisible past several lease lengths.
func TestHeartbeatKeepsLeases(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := e.queue(t, "q", nil)
	e.send(t, "q", nil, "long", "next")
	g := newGate()
	var counts sync.Map // body -> ReceiveCount seen
	h := worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
		counts.Store(string(m.Body), m.ReceiveCount)
		return g.handler().HandleMessage(ctx, m)
	})
	cfg := config(src, h)
	cfg.Concurrency, cfg.Prefetch = 1, 1
	// A lease of 3 s extended every 250 ms: the test holds unless one
	// extension (a synced write) stalls for 2.75 s, and watching for 2.5
	// lease lengths still shows the lease kept past its own length. (A 1 s
	// lease extended every 333 ms left a loaded machine 667 ms.)
	cfg.Lease, cfg.HeartbeatInterval = 3*time.Second, 250*time.Millisecond
	p := start(t, cfg)
	testutil.Eventually(t, wait, "one running, one prefetched", func() bool {
		st := p.Stats()
		return st.Running == 1 && st.Prefetched == 1
	})

	// For 2.5 lease lengths, another consumer finds nothing to receive.
	zero := time.Duration(0)
	for end := time.Now().Add(7500 * time.Millisecond); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		ds, err := e.b.Receive(context.Background(), model.ReceiveRequest{Queue: "q", MaxMessages: 10, WaitTime: &zero})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) > 0 {
			t.Fatalf("another consumer received %q: the heartbeat did not keep its lease", ds[0].Body)
		}
	}
	g.release()
	testutil.Eventually(t, wait, "both handled", func() bool { return p.Stats().Handled == 2 })
	counts.Range(func(k, v any) bool {
		if v.(int) != 1 {
			t.Errorf("%s was received %d times, want 1", k, v)
		}
		return true
	})
}

// A lease that ends anyway cancels the handler's context with cause
// ErrLeaseLost, and the handler's outcome is not applied.
func TestLeaseLostCancelsHandler(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := e.queue(t, "q", nil)
	src.skipExtend.Store(true) // the heartbeat "succeeds" without extending
	e.send(t, "q", nil, "m")
	causes := make(chan error, 1)
	h := worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil // would ack, were the outcome applied
	})
	cfg := config(src, h)
	cfg.Concurrency = 1
	cfg.Lease, cfg.HeartbeatInterval = time.Second, 50*time.Millisecond
	p := start(t, cfg)
	testutil.Eventually(t, wait, "the handler running", func() bool { return p.Stats().Running == 1 })

	// The lease ends: another consumer receives the message.
	long, zero := time.Minute, time.Duration(0)
	testutil.Eventually(t, wait, "the message received by another consumer", func() bool {
		ds, err := e.b.Receive(context.Background(), model.ReceiveRequest{Queue: "q", Visibility: &long, WaitTime: &zero})
		return err == nil && len(ds) == 1
	})
	src.skipExtend.Store(false)
	select {
	case cause := <-causes:
		if !errors.Is(cause, worker.ErrLeaseLost) {
			t.Fatalf("handler's context cause %v, want ErrLeaseLost", cause)
		}
	case <-time.After(wait):
		t.Fatal("the handler's context was not cancelled")
	}
	testutil.Eventually(t, wait, "the handler ended", func() bool { return p.Stats().Running == 0 })
	if st := e.stats(t, "q"); st.InFlight != 1 {
		t.Fatalf("stats %+v: the other consumer's lease should stand (the pool must not settle)", st)
	}
}

// Every outcome lands in the broker's state.
func TestOutcomes(t *testing.T) {
	t.Parallel()
	type order struct {
		ID int `json:"id"`
	}
	tests := []struct {
		name  string
		h     worker.Handler
		check func(t *testing.T, e *env)
	}{
		{"AckDeletes", worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error { return nil }),
			func(t *testing.T, e *env) {
				testutil.Eventually(t, wait, "the message deleted", func() bool { return e.stats(t, "q").Depth() == 0 })
			}},
		{"NackReasonInDeadLetter", worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
			return errors.New("card declined")
		}), func(t *testing.T, e *env) {
			dl := deadLettered(t, e)
			if dl.FailureReason != "card declined" || dl.Attempts != 2 {
				t.Fatalf("dead letter reason %q attempts %d, want the nack's reason after 2 attempts", dl.FailureReason, dl.Attempts)
			}
		}},
		{"DeadLetterNow", worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
			return worker.DeadLetterNow("bad data")
		}), func(t *testing.T, e *env) {
			dl := deadLettered(t, e)
			if dl.FailureReason != "bad data" || dl.Attempts != 1 {
				t.Fatalf("dead letter reason %q attempts %d, want bad data after 1 attempt", dl.FailureReason, dl.Attempts)
			}
		}},
		{"JSONDecodeFailureDeadLetters", worker.JSON(func(ctx context.Context, m *worker.Message, o order) error {
			return nil
		}), func(t *testing.T, e *env) {
			dl := deadLettered(t, e)
			if !strings.Contains(dl.FailureReason, "does not decode") || dl.Attempts != 1 {
				t.Fatalf("dead letter reason %q attempts %d", dl.FailureReason, dl.Attempts)
			}
		}},
		{"PanicNacks", worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
			panic("nil map")
		}), func(t *testing.T, e *env) {
			dl := deadLettered(t, e)
			if dl.FailureReason != "panic: nil map" || dl.Attempts != 2 {
				t.Fatalf("dead letter reason %q attempts %d", dl.FailureReason, dl.Attempts)
			}
		}},
		{"RetryAfterDelays", worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
			return worker.RetryAfter(time.Minute, errors.New("rate limited"))
		}), func(t *testing.T, e *env) {
			testutil.Eventually(t, wait, "the message delayed", func() bool { return e.stats(t, "q").Delayed == 1 })
			m := e.browse(t, "q")[0]
			if m.FailureReason != "rate limited" || m.Attempts != 1 || time.Until(m.VisibleAt) < 50*time.Second {
				t.Fatalf("reason %q attempts %d visible in %v, want rate limited, 1, about a minute", m.FailureReason, m.Attempts, time.Until(m.VisibleAt))
			}
		}},
		{"SnoozeDoesNotCount", worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
			if m.ReceiveCount == 1 {
				return worker.Snooze(time.Minute)
			}
			return nil
		}), func(t *testing.T, e *env) {
			testutil.Eventually(t, wait, "the message delayed", func() bool { return e.stats(t, "q").Delayed == 1 })
			m := e.browse(t, "q")[0]
			if m.Attempts != 0 || m.ReceiveCount != 1 || time.Until(m.VisibleAt) < 50*time.Second {
				t.Fatalf("attempts %d receives %d visible in %v, want 0, 1, about a minute", m.Attempts, m.ReceiveCount, time.Until(m.VisibleAt))
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			src := e.withDLQ(t, "q", 2)
			e.send(t, "q", nil, "not json")
			cfg := config(src, tt.h)
			cfg.Logger = testutil.Logger(t)
			start(t, cfg)
			tt.check(t, e)
		})
	}
}

// deadLettered waits for the one message of q's dead-letter queue.
func deadLettered(t *testing.T, e *env) model.BrowsedMessage {
	t.Helper()
	testutil.Eventually(t, wait, "the message dead-lettered", func() bool { return e.stats(t, "q-dlq").Visible == 1 })
	return e.browse(t, "q-dlq")[0]
}

// A panic is logged with its stack; the pool stays up and handles the
// other messages.
func TestPanicKeepsPoolUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := e.withDLQ(t, "q", 2)
	e.send(t, "q", nil, "poison", "a", "b")
	var log testutil.Buffer
	h := worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
		if string(m.Body) == "poison" {
			var none []int
			_ = none[len(m.Body)] // panics: index out of range
		}
		return nil
	})
	cfg := config(src, h)
	cfg.Logger = testLogger(t, &log)
	p := start(t, cfg)
	dl := deadLettered(t, e)
	if !strings.HasPrefix(dl.FailureReason, "panic: runtime error: index out of range [6] with length 0") {
		t.Fatalf("reason %q", dl.FailureReason)
	}
	testutil.Eventually(t, wait, "a and b handled", func() bool { return p.Stats().Handled == 2 })
	e.send(t, "q", nil, "c")
	testutil.Eventually(t, wait, "c handled after the panics", func() bool { return p.Stats().Handled == 3 })
	if s := log.String(); !strings.Contains(s, "handler panicked") || !strings.Contains(s, "pool_test.go") {
		t.Fatalf("the panic's log has no stack:\n%s", s)
	}
}

// Hooks see every handled and failed message with its duration; the
// handler's context carries the trace context.
func TestHooksAndTraceContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := e.queue(t, "q", nil)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	e.send(t, "q", map[string]string{model.MsgAttrTraceParent: tp}, "ok", "fail")
	var mu sync.Mutex
	var handled, failed []string
	traces := make(chan string, 2)
	cfg := config(src, worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
		traces <- worker.TraceParent(ctx)
		if string(m.Body) == "fail" {
			return worker.RetryAfter(time.Minute, errors.New("nope"))
		}
		return nil
	}))
	cfg.Hooks = worker.Hooks{
		OnHandled: func(m *worker.Message, d time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			handled = append(handled, string(m.Body))
		},
		OnFailed: func(m *worker.Message, err error, d time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			failed = append(failed, string(m.Body)+": "+err.Error())
		},
	}
	start(t, cfg)
	testutil.Eventually(t, wait, "both hooks called", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) == 1 && len(failed) == 1
	})
	if handled[0] != "ok" || failed[0] != "fail: retry after 1m0s: nope" {
		t.Fatalf("handled %q failed %q", handled, failed)
	}
	for range 2 {
		if got := <-traces; got != tp {
			t.Fatalf("TraceParent(ctx) = %q, want %q", got, tp)
		}
	}
}

type fakeCPU struct {
	use   atomic.Value // float64
	calls atomic.Int64
}

func (f *fakeCPU) CPUUsage() float64 {
	f.calls.Add(1)
	return f.use.Load().(float64)
}

// The CPU guard holds receiving while the process is above the limit.
func TestCPUGuardPausesReceiving(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := e.queue(t, "q", nil)
	e.send(t, "q", nil, "m")
	cpu := &fakeCPU{}
	cpu.use.Store(0.95)
	cfg := config(src, worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error { return nil }))
	cfg.CPULimit, cfg.CPUInterval, cfg.CPUSampler = 0.8, 10*time.Millisecond, cpu
	p := start(t, cfg)
	testutil.Eventually(t, wait, "several CPU readings", func() bool { return cpu.calls.Load() >= 5 })
	if n := src.receives.Load(); n != 0 || !p.Stats().Paused {
		t.Fatalf("%d receives while paused (stats %+v), want none", n, p.Stats())
	}
	cpu.use.Store(0.5)
	testutil.Eventually(t, wait, "the message handled once the CPU is back under", func() bool { return p.Stats().Handled == 1 })
	if p.Stats().Paused {
		t.Fatal("still paused")
	}
}

// Adaptive concurrency: the slots follow the backlog between the minimum and
// the maximum.
func TestAdaptiveConcurrency(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := e.queue(t, "q", nil)
	src.backlog.Store(0) // the test decides the backlog
	e.send(t, "q", nil, strings.Split("a b c d e f g h i j", " ")...)
	g := newGate()
	cfg := config(src, g.handler())
	cfg.Concurrency, cfg.MinConcurrency, cfg.AdaptInterval = 6, 2, 10*time.Millisecond
	p := start(t, cfg)

	testutil.Eventually(t, wait, "2 running", func() bool { return g.running.Load() == 2 })
	n := src.backlogs.Load()
	testutil.Eventually(t, wait, "5 more backlog readings", func() bool { return src.backlogs.Load() >= n+5 })
	if st := p.Stats(); st.Slots != 2 || g.maxRun.Load() != 2 {
		t.Fatalf("no backlog: stats %+v, %d ran at once; want the minimum, 2", st, g.maxRun.Load())
	}

	src.backlog.Store(100)
	testutil.Eventually(t, wait, "6 running", func() bool { return g.running.Load() == 6 })
	if st := p.Stats(); st.Slots != 6 {
		t.Fatalf("backlog 100: stats %+v, want the maximum, 6", st)
	}

	src.backlog.Store(0)
	g.release()
	testutil.Eventually(t, wait, "the slots back to the minimum", func() bool {
		return p.Stats().Slots == 2 && e.stats(t, "q").Depth() == 0
	})
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	if _, err := worker.NewPool(worker.Config{}); err == nil ||
		!strings.Contains(err.Error(), "Config.Source") || !strings.Contains(err.Error(), "Config.Handler") {
		t.Fatalf("empty config: %v, want errors naming Source and Handler", err)
	}
	h := worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error { return nil })
	src := &brokerSource{}
	for _, tt := range []struct {
		set  func(*worker.Config)
		want string
	}{
		{func(c *worker.Config) { c.Concurrency = -1 }, "Config.Concurrency is -1: must be 1..10000"},
		{func(c *worker.Config) { c.Prefetch = 1001 }, "Config.Prefetch"},
		{func(c *worker.Config) { c.Lease = time.Millisecond }, "Config.Lease"},
		{func(c *worker.Config) { c.HeartbeatInterval = 20 * time.Second }, "Config.HeartbeatInterval is 20s: must be 10ms..Lease/2 (15s)"},
		{func(c *worker.Config) { c.WaitTime = time.Minute }, "Config.WaitTime"},
		{func(c *worker.Config) { c.CPULimit = 1.5 }, "Config.CPULimit"},
		{func(c *worker.Config) { c.MinConcurrency = 11 }, "Config.MinConcurrency"},
	} {
		cfg := config(src, h)
		tt.set(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("got %v, want %q", err, tt.want)
		}
	}
	// Adaptive concurrency needs a Backlogger.
	cfg := config(struct{ worker.Source }{src}, h)
	cfg.MinConcurrency = 2
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "Backlogger") {
		t.Errorf("MinConcurrency without a Backlogger: %v", err)
	}
	if err := config(src, h).Validate(); err != nil {
		t.Errorf("default config: %v", err)
	}
}

// testLogger logs to the test's log and to buf.
func testLogger(t *testing.T, buf *testutil.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(io.MultiWriter(testutil.Writer(t, ""), buf), nil))
}

// flakySource fails its first receives, then passes them on.
type flakySource struct {
	*brokerSource
	failures atomic.Int64
}

func (f *flakySource) Receive(ctx context.Context, req worker.ReceiveRequest) ([]*worker.Message, error) {
	if f.failures.Add(-1) >= 0 {
		return nil, errors.New("broker unavailable")
	}
	return f.brokerSource.Receive(ctx, req)
}

// A failing receive is retried after a backoff; the pool stays up.
func TestReceiveFailuresRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := &flakySource{brokerSource: e.queue(t, "q", nil)}
	src.failures.Store(2)
	e.send(t, "q", nil, "m")
	var log testutil.Buffer
	cfg := config(src, worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error { return nil }))
	cfg.Logger = testLogger(t, &log)
	p := start(t, cfg)
	testutil.Eventually(t, wait, "the message handled after two failed receives", func() bool { return p.Stats().Handled == 1 })
	if n := strings.Count(log.String(), "receive failed; retrying"); n != 2 {
		t.Fatalf("%d failures logged, want 2", n)
	}
}
