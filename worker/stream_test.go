package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/embedded"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/testbroker"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/server"
	"github.com/sluicemq/sluice/worker"
)

// The stream source (NewSource's default) against a real broker over its
// stream API.

// streamEnv is a real broker in-process, a client of it and a queue "jobs"
// with a dead-letter queue (after 5 attempts) and a retry policy of 60 s,
// as nativeEnv; front is the broker's front, whose consumer list the tests
// read.
type streamEnv struct {
	t     *testing.T
	c     *client.Client
	front func() *broker.Broker
}

func setupStream(t *testing.T) *streamEnv {
	t.Helper()
	b := testbroker.Start(t, testbroker.Config{})
	c, err := client.New(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e := &streamEnv{t: t, c: c, front: func() *broker.Broker { return b.Front }}
	e.queues()
	return e
}

// queues creates jobs and jobs-dlq.
func (e *streamEnv) queues() {
	e.t.Helper()
	ctx := context.Background()
	dlq, err := e.c.CreateQueue(ctx, "jobs-dlq", nil)
	if err != nil {
		e.t.Fatal(err)
	}
	_, err = e.c.CreateQueue(ctx, "jobs", map[string]string{
		"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":5}`, dlq.ARN),
		"RetryPolicy":   `{"baseSeconds":60,"maxSeconds":60,"jitter":"none"}`,
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *streamEnv) send(bodies ...string) {
	e.t.Helper()
	for _, b := range bodies {
		if _, err := e.c.Send(context.Background(), "jobs", client.Message{Body: b}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// source makes a stream source on jobs, closed when the test ends.
func (e *streamEnv) source(opts ...worker.SourceOption) worker.StreamSource {
	e.t.Helper()
	src, ok := worker.NewSource(e.c, "jobs", opts...).(worker.StreamSource)
	if !ok {
		e.t.Fatal("NewSource's default is no StreamSource")
	}
	e.t.Cleanup(func() { _ = src.Close(context.Background()) })
	return src
}

// receive takes n messages from src, by body.
func (e *streamEnv) receive(src worker.Source, n int) map[string]*worker.Message {
	e.t.Helper()
	got := map[string]*worker.Message{}
	testutil.Eventually(e.t, 10*time.Second, fmt.Sprintf("%d messages", n), func() bool {
		ms, err := src.Receive(context.Background(), worker.ReceiveRequest{Max: min(10, n-len(got)), Wait: time.Second, Lease: time.Minute})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, m := range ms {
			got[string(m.Body)] = m
		}
		return len(got) >= n
	})
	return got
}

func (e *streamEnv) browse() map[string]client.Delivery {
	e.t.Helper()
	page, err := e.c.Browse(context.Background(), "jobs", client.Limit(100))
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]client.Delivery{}
	for _, m := range page.Messages {
		out[m.Body] = m
	}
	return out
}

func (e *streamEnv) stats() client.Stats {
	e.t.Helper()
	st, err := e.c.Stats(context.Background(), "jobs")
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// consumers answers the streams open on jobs.
func (e *streamEnv) consumers() []broker.ConsumerInfo {
	e.t.Helper()
	cs, err := e.front().Consumers(context.Background(), "jobs")
	if err != nil {
		e.t.Fatal(err)
	}
	return cs
}

// runPool runs a pool for cfg until the test ends (Shutdown then).
func runPool(t *testing.T, cfg worker.Config) *worker.Pool {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testutil.Logger(t)
	}
	p, err := worker.NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- p.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-ran; !errors.Is(err, worker.ErrPoolClosed) {
			t.Errorf("Run: %v", err)
		}
	})
	return p
}

func TestStreamSourceReceive(t *testing.T) {
	t.Parallel()
	e := setupStream(t)
	ctx := context.Background()
	_, err := e.c.Send(ctx, "jobs", client.Message{
		Body: "hello", Attributes: map[string]client.Attribute{"type": client.String("greeting"), "blob": {Type: "Binary", Binary: []byte{0, 1}}},
		Priority: 3, CorrelationID: "corr", TraceContext: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	})
	if err != nil {
		t.Fatal(err)
	}
	src := e.source(worker.WithClientName("billing worker"))
	before := time.Now()
	ms, err := src.Receive(ctx, worker.ReceiveRequest{Max: 10, Wait: 5 * time.Second, Lease: 45 * time.Second})
	if err != nil || len(ms) != 1 {
		t.Fatalf("Receive = %v, %v", ms, err)
	}
	m := ms[0]
	if string(m.Body) != "hello" || m.Queue != "jobs" || m.ID == "" || m.Receipt == "" || m.Attributes["type"].Value != "greeting" ||
		string(m.Attributes["blob"].Binary) != "\x00\x01" || m.Priority != 3 || m.CorrelationID != "corr" ||
		m.TraceContext != "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" || m.Attempts != 1 || m.ReceiveCount != 1 ||
		m.MaxAttempts != 5 || m.SentAt.Before(before.Add(-time.Minute)) || m.SentAt.After(time.Now()) {
		t.Fatalf("message %+v", m)
	}
	if d := e.browse()["hello"]; d.State != "inflight" || time.Until(d.VisibleAt) < 40*time.Second {
		t.Fatalf("leased for %v, want 45 s", time.Until(d.VisibleAt))
	}
	// The stream is in the broker's consumer list, with the pool's lease,
	// the broker's default maximum hold and the name given.
	cs := e.consumers()
	if len(cs) != 1 || cs[0].ClientName != "billing worker" || cs[0].Lease != 45*time.Second || cs[0].MaxHold != time.Hour || cs[0].Held != 1 {
		t.Fatalf("consumers %+v", cs)
	}
	// An empty answer after the wait is not an error; Wait 0 does not wait.
	start := time.Now()
	if ms, err := src.Receive(ctx, worker.ReceiveRequest{Max: 1, Wait: 200 * time.Millisecond}); err != nil || len(ms) != 0 {
		t.Fatalf("Receive on an empty queue = %v, %v", ms, err)
	}
	if el := time.Since(start); el < 200*time.Millisecond {
		t.Fatalf("an empty receive answered after %v, before its wait", el)
	}
	if ms, err := src.Receive(ctx, worker.ReceiveRequest{Max: 1}); err != nil || len(ms) != 0 {
		t.Fatalf("Receive with Wait 0 = %v, %v", ms, err)
	}
	// A missing queue fails the open, as the stream API answers it.
	missing := worker.NewSource(e.c, "missing")
	defer func() { _ = missing.(worker.StreamSource).Close(ctx) }()
	_, err = missing.Receive(ctx, worker.ReceiveRequest{Max: 1})
	if status.Code(errors.Unwrap(err)) != codes.NotFound || !strings.Contains(err.Error(), "queue missing") {
		t.Fatalf("Receive of a missing queue: %v", err)
	}
}

func TestStreamSourceSettle(t *testing.T) {
	t.Parallel()
	e := setupStream(t)
	ctx := context.Background()
	src := e.source()
	// A credit of exactly the 8 messages, then 0: nothing more is delivered
	// while the test looks at them (a credit lowered while the broker waits
	// to fill it can still bring what the wait claimed).
	src.SetCredit(8)
	e.send("ack", "nack-policy", "nack-delay", "nack-short", "snooze", "snooze-short", "release", "dead")
	ms := e.receive(src, 8)
	src.SetCredit(0)
	before := time.Now()
	for body, o := range map[string]worker.Outcome{
		"ack":          {Kind: worker.KindAck},
		"nack-policy":  {Kind: worker.KindNack, Reason: "boom"},
		"nack-delay":   {Kind: worker.KindNack, Reason: "later", Delay: 2 * time.Hour},
		"nack-short":   {Kind: worker.KindNack, Reason: "soon", Delay: 300 * time.Millisecond},
		"snooze":       {Kind: worker.KindSnooze, Delay: 10 * time.Minute},
		"snooze-short": {Kind: worker.KindSnooze, Delay: 300 * time.Millisecond},
		"release":      {Kind: worker.KindRelease},
		"dead":         {Kind: worker.KindDeadLetter, Reason: "never"},
	} {
		if err := src.Settle(ctx, ms[body], o); err != nil {
			t.Fatalf("Settle %s: %v", body, err)
		}
	}
	got := e.browse()
	if _, ok := got["ack"]; ok {
		t.Fatal("the acked message is still there")
	}
	// A nack without a delay follows the queue's retry policy (60 s here).
	if d := got["nack-policy"]; d.State != "delayed" || d.FailureReason != "boom" || d.Attempts != 1 ||
		d.VisibleAt.Before(before.Add(50*time.Second)) || d.VisibleAt.After(time.Now().Add(70*time.Second)) {
		t.Fatalf("nack-policy: %+v", d)
	}
	if d := got["nack-delay"]; d.State != "delayed" || d.FailureReason != "later" || time.Until(d.VisibleAt) < 110*time.Minute {
		t.Fatalf("nack-delay: %+v", d)
	}
	// A delay under a second is a second (the stream's unit), not 0: a
	// nack with a delay is never taken for one that follows the policy.
	for _, body := range []string{"nack-short", "snooze-short"} {
		if d := got[body]; d.VisibleAt.Before(before.Add(time.Second)) || d.VisibleAt.After(time.Now().Add(2*time.Second)) {
			t.Fatalf("%s: visible at %v, %v after the settlements began; want 1 s", body, d.VisibleAt, d.VisibleAt.Sub(before))
		}
	}
	if d := got["snooze"]; d.State != "delayed" || d.Attempts != 0 || time.Until(d.VisibleAt) < 9*time.Minute {
		t.Fatalf("snooze: %+v", d)
	}
	if d := got["release"]; d.State != "visible" || d.Attempts != 0 {
		t.Fatalf("release: %+v", d)
	}
	page, err := e.c.DeadLetters(ctx, "jobs")
	if err != nil || len(page.Messages) != 1 || page.Messages[0].Body != "dead" || page.Messages[0].FailureReason != "never" {
		t.Fatalf("DeadLetters = %+v, %v", page, err)
	}
	// Every settlement freed its credit: the stream holds nothing.
	if cs := e.consumers(); len(cs) != 1 || cs[0].Held != 0 || cs[0].Acked != 1 {
		t.Fatalf("consumers after the settlements: %+v", cs)
	}

	// A settlement of a message the stream no longer holds (settled
	// through the native API meanwhile) is a lost lease, an ack too.
	src.SetCredit(1)
	m := e.receive(src, 1)["release"]
	if err := e.c.Release(ctx, "jobs", m.Receipt); err != nil {
		t.Fatal(err)
	}
	if err := src.Settle(ctx, m, worker.Outcome{Kind: worker.KindAck}); !errors.Is(err, worker.ErrLeaseLost) || !strings.Contains(err.Error(), "not held by this stream") {
		t.Fatalf("ack of a message released through the native API: %v, want ErrLeaseLost", err)
	}
	// A delay out of range is the request's fault, not a lost lease.
	m = e.receive(src, 1)["release"]
	err = src.Settle(ctx, m, worker.Outcome{Kind: worker.KindSnooze, Delay: 13 * time.Hour})
	if err == nil || errors.Is(err, worker.ErrLeaseLost) || !strings.Contains(err.Error(), "invalid_parameter") {
		t.Fatalf("snooze past 12 h: %v, want invalid_parameter and not ErrLeaseLost", err)
	}
	if err := src.Settle(ctx, m, worker.Outcome{}); err == nil {
		t.Fatal("Settle with no kind succeeded")
	}
}

// The pool over the default source: a stream whose credit is Concurrency +
// Prefetch. With every handler held, the pool runs Concurrency handlers
// and holds Prefetch more, the broker's stream holds exactly the credit
// and no message beyond it is in flight; once the handlers go, every
// message is handled once, and the pool's Shutdown closes its stream.
func TestPoolOverStreamCredit(t *testing.T) {
	t.Parallel()
	e := setupStream(t)
	for i := range 30 {
		e.send(fmt.Sprint(i))
	}
	g := newGate()
	var mu sync.Mutex
	seen := map[string]int{}
	cfg := worker.DefaultConfig()
	cfg.Source = worker.NewSource(e.c, "jobs")
	cfg.Handler = worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
		mu.Lock()
		seen[string(m.Body)]++
		mu.Unlock()
		select {
		case <-g.open:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	cfg.Concurrency, cfg.Prefetch = 3, 2
	cfg.Logger = testutil.Logger(t)
	p, err := worker.NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- p.Run(context.Background()) }()
	defer g.release()

	testutil.Eventually(t, 10*time.Second, "3 running, 2 prefetched, the stream holding 5", func() bool {
		st, cs := p.Stats(), e.consumers()
		return st.Running == 3 && st.Prefetched == 2 && len(cs) == 1 && cs[0].Held == 5
	})
	if cs := e.consumers(); cs[0].Credit != 5 {
		t.Fatalf("the stream's credit is %d, want Concurrency + Prefetch = 5", cs[0].Credit)
	}
	if st := e.stats(); st.InFlight != 5 || st.Visible != 25 {
		t.Fatalf("in flight %d, visible %d; want 5 and 25", st.InFlight, st.Visible)
	}
	g.release()
	testutil.Eventually(t, 20*time.Second, "every message handled", func() bool {
		st := e.stats()
		return st.Depth == 0
	})
	mu.Lock()
	for i := range 30 {
		if n := seen[fmt.Sprint(i)]; n != 1 {
			t.Errorf("message %d handled %d times", i, n)
		}
	}
	mu.Unlock()
	if st := p.Stats(); st.Handled != 30 || st.Failed != 0 {
		t.Fatalf("stats %+v", st)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-ran; !errors.Is(err, worker.ErrPoolClosed) {
		t.Fatal(err)
	}
	if cs := e.consumers(); len(cs) != 0 {
		t.Fatalf("streams open after Shutdown: %+v", cs)
	}
}

// Adaptive concurrency moves the stream's credit with the slots: slots +
// Prefetch, up with a backlog and back down when it is gone.
func TestPoolOverStreamAdaptiveCredit(t *testing.T) {
	t.Parallel()
	e := setupStream(t)
	g := newGate()
	defer g.release()
	cfg := worker.DefaultConfig()
	cfg.Source = worker.NewSource(e.c, "jobs")
	cfg.Handler = g.handler()
	cfg.Concurrency, cfg.MinConcurrency, cfg.Prefetch, cfg.AdaptInterval = 6, 1, 1, 50*time.Millisecond
	p := runPool(t, cfg)
	credit := func(want int) func() bool {
		return func() bool {
			cs := e.consumers()
			return len(cs) == 1 && cs[0].Credit == want
		}
	}
	testutil.Eventually(t, 10*time.Second, "credit 2 (1 slot + 1) on an empty queue", credit(2))
	for i := range 20 {
		e.send(fmt.Sprint(i))
	}
	testutil.Eventually(t, 10*time.Second, "credit 7 (6 slots + 1) with a backlog", credit(7))
	testutil.Eventually(t, 10*time.Second, "6 running, 1 prefetched", func() bool {
		st := p.Stats()
		return st.Running == 6 && st.Prefetched == 1
	})
	if st := e.stats(); st.InFlight > 7 {
		t.Fatalf("%d in flight, over the credit 7", st.InFlight)
	}
	g.release()
	testutil.Eventually(t, 20*time.Second, "the queue drained and the credit back to 2", func() bool {
		return e.stats().Depth == 0 && credit(2)()
	})
}

// The broker keeps a stream's leases alive: a handler that runs three
// leases long acks its message, delivered once. Past the stream's maximum
// hold the lease ends: the handler's context is cancelled with cause
// ErrLeaseLost and the message is delivered again.
func TestPoolOverStreamLeases(t *testing.T) {
	t.Parallel()
	e := setupStream(t)
	ctx := context.Background()
	// A queue without a retry policy: a lease that ends makes its message
	// visible again at once.
	if _, err := e.c.CreateQueue(ctx, "plain", nil); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"long", "hung"} {
		if _, err := e.c.Send(ctx, "plain", client.Message{Body: b}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	calls := map[string]int{}
	causes := make(chan error, 1)
	cfg := worker.DefaultConfig()
	cfg.Source = worker.NewSource(e.c, "plain", worker.WithMaxHold(4*time.Second))
	cfg.Handler = worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
		mu.Lock()
		calls[string(m.Body)]++
		n := calls[string(m.Body)]
		mu.Unlock()
		switch {
		case string(m.Body) == "long":
			// Work that outlasts its lease three times over.
			t := time.NewTimer(3 * time.Second)
			defer t.Stop()
			select {
			case <-t.C:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		case n == 1:
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return ctx.Err()
		}
		return nil
	})
	cfg.Concurrency, cfg.Lease = 2, time.Second
	runPool(t, cfg)
	select {
	case err := <-causes:
		if !errors.Is(err, worker.ErrLeaseLost) {
			t.Fatalf("the hung handler was cancelled with %v, want ErrLeaseLost", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the hung handler was not cancelled past the maximum hold")
	}
	testutil.Eventually(t, 20*time.Second, "both messages done", func() bool {
		st, err := e.c.Stats(ctx, "plain")
		return err == nil && st.Depth == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if calls["long"] != 1 || calls["hung"] != 2 {
		t.Fatalf("calls %v; want long once (its lease kept), hung twice (lost at the maximum hold)", calls)
	}
}

// The stream source alone: Stop releases what the stream delivered and the
// pool did not take (the attempt does not count), the received messages
// stay settleable; Close hands back what is received and not settled as a
// failure "consumer disconnected".
func TestStreamSourceStopAndClose(t *testing.T) {
	t.Parallel()
	e := setupStream(t)
	ctx := context.Background()
	e.send("a", "b", "c", "d", "e")
	src := e.source()
	src.SetCredit(5)
	ms, err := src.Receive(ctx, worker.ReceiveRequest{Max: 1, Wait: 5 * time.Second, Lease: time.Minute})
	if err != nil || len(ms) != 1 {
		t.Fatalf("Receive = %v, %v", ms, err)
	}
	testutil.Eventually(t, 10*time.Second, "the stream holding all 5", func() bool {
		cs := e.consumers()
		return len(cs) == 1 && cs[0].Held == 5
	})
	if err := src.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if st := e.stats(); st.Visible != 4 || st.InFlight != 1 {
		t.Fatalf("after Stop: visible %d, in flight %d; want 4 and 1", st.Visible, st.InFlight)
	}
	for body, d := range e.browse() {
		if body != string(ms[0].Body) && (d.Attempts != 0 || d.State != "visible") {
			t.Fatalf("released %s: %+v, want visible with no attempt counted", body, d)
		}
	}
	if cs := e.consumers(); len(cs) != 1 || cs[0].Credit != 0 {
		t.Fatalf("consumers after Stop: %+v", cs)
	}
	if err := src.Settle(ctx, ms[0], worker.Outcome{Kind: worker.KindAck}); err != nil {
		t.Fatalf("ack after Stop: %v", err)
	}
	src.SetCredit(1)
	ms, err = src.Receive(ctx, worker.ReceiveRequest{Max: 1, Wait: 5 * time.Second, Lease: time.Minute})
	if err != nil || len(ms) != 1 {
		t.Fatalf("Receive = %v, %v", ms, err)
	}
	if err := src.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if cs := e.consumers(); len(cs) != 0 {
		t.Fatalf("streams open after Close: %+v", cs)
	}
	if d := e.browse()[string(ms[0].Body)]; d.Attempts != 1 || d.FailureReason != broker.ReasonConsumerDisconnected {
		t.Fatalf("the message held at Close: %+v", d)
	}
	// A Receive after Close opens a new stream, with the credit set.
	src.SetCredit(5)
	if ms, err := src.Receive(ctx, worker.ReceiveRequest{Max: 10, Wait: 5 * time.Second, Lease: time.Minute}); err != nil || len(ms) == 0 {
		t.Fatalf("Receive after Close = %v, %v", ms, err)
	}
	if cs := e.consumers(); len(cs) != 1 {
		t.Fatalf("streams after a Receive after Close: %+v", cs)
	}
}

// restartable is a broker in-process that can be stopped and started
// again on the same address and files, as a broker restarted.
type restartable struct {
	t    *testing.T
	dir  string
	addr string
	log  *slog.Logger

	mu    sync.Mutex
	front *broker.Broker
	srv   *server.Server
}

func startRestartable(t *testing.T) *restartable {
	r := &restartable{t: t, dir: t.TempDir(), addr: "127.0.0.1:0",
		log: slog.New(slog.NewTextHandler(testutil.Writer(t, ""), &slog.HandlerOptions{Level: slog.LevelWarn}))}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *restartable) start() {
	r.t.Helper()
	backend, err := embedded.Open(embedded.Config{Dir: r.dir, Options: storage.Options{Logger: r.log}})
	if err != nil {
		r.t.Fatal(err)
	}
	front, err := broker.New(backend, broker.Config{Logger: r.log})
	if err != nil {
		_ = backend.Close()
		r.t.Fatal(err)
	}
	cfg := server.DefaultConfig()
	cfg.Addr, cfg.Logger = r.addr, r.log
	srv, err := server.New(cfg, front)
	if err != nil {
		_ = front.Close()
		r.t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		_ = front.Close()
		r.t.Fatal(err)
	}
	r.addr = srv.Addr().String()
	r.mu.Lock()
	r.front, r.srv = front, srv
	r.mu.Unlock()
}

func (r *restartable) stop() {
	r.mu.Lock()
	front, srv := r.front, r.srv
	r.front, r.srv = nil, nil
	r.mu.Unlock()
	if srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Stop(ctx); err != nil {
		r.t.Errorf("server Stop: %v", err)
	}
	if err := front.Close(); err != nil {
		r.t.Errorf("broker Close: %v", err)
	}
}

func (r *restartable) current() *broker.Broker {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.front
}

// The broker restarts under a pool: its stream ends, the handlers running
// then finish and their acks go through the native API (the leases ran on
// across the restart, so nothing is delivered twice), and the pool opens
// a new stream on the new broker and handles the rest.
func TestPoolOverStreamSurvivesBrokerRestart(t *testing.T) {
	t.Parallel()
	r := startRestartable(t)
	c, err := client.New("http://" + r.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e := &streamEnv{t: t, c: c, front: r.current}
	e.queues()
	for i := range 12 {
		e.send(fmt.Sprint(i))
	}
	g := newGate()
	defer g.release()
	var mu sync.Mutex
	seen := map[string]int{}
	var first atomic.Int64
	cfg := worker.DefaultConfig()
	cfg.Source = worker.NewSource(c, "jobs")
	cfg.Handler = worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
		mu.Lock()
		seen[string(m.Body)]++
		mu.Unlock()
		if first.Add(1) <= 4 {
			<-g.open // the first four run across the restart
		}
		return nil
	})
	cfg.Concurrency = 4
	p := runPool(t, cfg)
	testutil.Eventually(t, 10*time.Second, "4 handlers running", func() bool {
		cs := e.consumers()
		return p.Stats().Running == 4 && len(cs) == 1 && cs[0].Held == 4
	})

	r.stop()
	r.start()
	g.release()
	testutil.Eventually(t, 30*time.Second, "every message handled after the restart", func() bool {
		st, err := c.Stats(context.Background(), "jobs")
		return err == nil && st.Depth == 0
	})
	mu.Lock()
	for i := range 12 {
		if n := seen[fmt.Sprint(i)]; n != 1 {
			t.Errorf("message %d handled %d times, want once", i, n)
		}
	}
	mu.Unlock()
	// The stream's count follows its acks once they are durable.
	testutil.Eventually(t, 10*time.Second, "one stream on the new broker, which acked the 8 messages handled after the restart", func() bool {
		cs := e.consumers()
		return len(cs) == 1 && cs[0].Acked == 8 && cs[0].Held == 0
	})
}

// NewSource's options are checked where a pool is made.
func TestStreamSourceOptionsValidated(t *testing.T) {
	t.Parallel()
	c, err := client.New("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	h := worker.HandlerFunc(func(context.Context, *worker.Message) error { return nil })
	for _, c := range []struct {
		src  worker.Source
		want string
	}{
		{worker.NewSource(c, "q", worker.WithProtocol("carrier-pigeon")), `protocol "carrier-pigeon": want worker.ProtocolStream ("stream") or worker.ProtocolHTTP ("http")`},
		{worker.NewSource(c, "q", worker.WithMaxHold(13*time.Hour)), "WithMaxHold(13h0m0s): must be 1s..12h"},
	} {
		_, err := worker.NewPool(worker.Config{Source: c.src, Handler: h})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewPool = %v, want an error saying %q", err, c.want)
		}
		if _, err := c.src.Receive(context.Background(), worker.ReceiveRequest{Max: 1}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Receive = %v, want an error saying %q", err, c.want)
		}
	}
	for _, p := range []worker.Protocol{worker.ProtocolStream, worker.ProtocolHTTP} {
		_, isStream := worker.NewSource(c, "q", worker.WithProtocol(p)).(worker.StreamSource)
		if isStream != (p == worker.ProtocolStream) {
			t.Errorf("protocol %s: a StreamSource is %v", p, isStream)
		}
	}
}

// TestStreamSourceLongClientName: a client name past 128 bytes is cut at a
// character's boundary, so the stream still opens (a cut inside a
// character is no text, which the broker and protobuf refuse).
func TestStreamSourceLongClientName(t *testing.T) {
	t.Parallel()
	e := setupStream(t)
	e.send("a")
	name := "x" + strings.Repeat("é", 100) // 201 bytes: byte 128 is inside an é
	src := e.source(worker.WithClientName(name))
	ms, err := src.Receive(context.Background(), worker.ReceiveRequest{Max: 1, Wait: 5 * time.Second, Lease: time.Minute})
	if err != nil || len(ms) != 1 {
		t.Fatalf("Receive with a long client name = %v, %v", ms, err)
	}
	cs := e.consumers()
	if want := "x" + strings.Repeat("é", 63); len(cs) != 1 || cs[0].ClientName != want {
		t.Fatalf("consumers %+v, want the name cut to %q", cs, want)
	}
}
