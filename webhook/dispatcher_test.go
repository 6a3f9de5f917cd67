package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/embedded"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/internal/testutil"
)

// TestMain fails the package if a test leaves a goroutine behind (a
// dispatcher not stopped, a call still running).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	testSecret  = "0123456789abcdef-test-secret"
	realTimeout = 10 * time.Second
)

var epoch = time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)

// env is a test's broker (embedded, on a fake clock) and helpers.
type env struct {
	t     *testing.T
	clock *clocktest.FakeClock
	be    storage.Backend
	b     *broker.Broker
	ctx   context.Context
}

// setup opens an embedded broker whose front allows webhooks to hosts.
func setup(t *testing.T, hosts ...string) *env {
	t.Helper()
	clock := clocktest.NewFakeClock(epoch)
	log := testutil.Logger(t)
	list, err := ParseHosts(hosts...)
	if err != nil {
		t.Fatal(err)
	}
	be, err := embedded.Open(embedded.Config{Dir: t.TempDir(), Options: storage.Options{Clock: clock, Logger: log}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	b, err := broker.New(be, broker.Config{Logger: log, WebhookHosts: list})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, clock: clock, be: be, b: b, ctx: context.Background()}
}

// start starts a dispatcher over the env's broker; the test stops it.
func (e *env) start(mod func(*Config)) *Dispatcher {
	e.t.Helper()
	cfg := DefaultConfig()
	cfg.Secret, cfg.Clock, cfg.Logger = testSecret, e.clock, testutil.Logger(e.t)
	if mod != nil {
		mod(&cfg)
	}
	d, err := New(cfg, e.b)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := d.Start(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		if err := d.Stop(context.Background()); err != nil {
			e.t.Errorf("Stop: %v", err)
		}
	})
	return d
}

// receiver is a webhook endpoint that records its calls.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	calls  []call
	answer func(n int) int // status of the n-th call (0-based); nil: 200
}

type call struct {
	header http.Header
	body   []byte
	events []model.DeadLetterEvent
}

func newReceiver(t *testing.T, answer func(n int) int) *receiver {
	t.Helper()
	r := &receiver{answer: answer}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var p Payload
		if err := json.Unmarshal(body, &p); err != nil {
			t.Errorf("the payload does not decode: %v: %s", err, body)
		}
		r.mu.Lock()
		n := len(r.calls)
		r.calls = append(r.calls, call{req.Header.Clone(), body, p.Events})
		r.mu.Unlock()
		status := http.StatusOK
		if r.answer != nil {
			status = r.answer(n)
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// host is the receiver's host:port, for AllowedHosts.
func (r *receiver) host() string { return strings.TrimPrefix(r.srv.URL, "http://") }

func (r *receiver) snapshot() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

func (r *receiver) events() int {
	n := 0
	for _, c := range r.snapshot() {
		n += len(c.events)
	}
	return n
}

// eventually polls cond, advancing the fake clock by step before each look
// (step 0: not at all), until it holds or realTimeout passes.
func (e *env) eventually(what string, step time.Duration, cond func() bool) {
	e.t.Helper()
	testutil.Eventually(e.t, realTimeout, what, func() bool {
		if cond() {
			return true
		}
		e.clock.Advance(step)
		return false
	})
}

// queues creates dlq and src (maxReceiveCount 1) with webhook url.
func (e *env) queues(src, url string) {
	e.t.Helper()
	if _, err := e.b.CreateQueue(e.ctx, "dlq", nil, nil); err != nil {
		e.t.Fatal(err)
	}
	attrs := map[string]string{
		model.AttrRedrivePolicy:     fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":1}`, model.ARN("us-east-1", "000000000000", "dlq")),
		model.AttrDeadLetterWebhook: url,
	}
	if _, err := e.b.CreateQueue(e.ctx, src, attrs, nil); err != nil {
		e.t.Fatal(err)
	}
}

// deadLetter sends n messages to src and nacks each on its only attempt:
// n dead letters, n events. It returns their message ids.
func (e *env) deadLetter(src string, n int) []string {
	e.t.Helper()
	var ids []string
	for len(ids) < n {
		var entries []model.SendEntry
		for i := 0; i < min(10, n-len(ids)); i++ {
			entries = append(entries, model.SendEntry{ID: fmt.Sprint(i), Body: "poison"})
		}
		res, err := e.b.Send(e.ctx, src, entries)
		if err != nil {
			e.t.Fatal(err)
		}
		ds, err := e.b.Receive(e.ctx, model.ReceiveRequest{Queue: src, MaxMessages: 10})
		if err != nil || len(ds) != len(entries) {
			e.t.Fatalf("receive %d: %d, %v", len(entries), len(ds), err)
		}
		var vis []model.VisibilityEntry
		for i, d := range ds {
			vis = append(vis, model.VisibilityEntry{ID: fmt.Sprint(i), Receipt: d.Receipt})
		}
		errs, err := e.b.ChangeVisibility(e.ctx, src, vis)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, err := range errs {
			if err != nil {
				e.t.Fatal(err)
			}
		}
		for _, r := range res {
			ids = append(ids, r.MessageID)
		}
	}
	return ids
}

// outbox is the outbox's counts.
func (e *env) outbox() model.QueueStats {
	e.t.Helper()
	s, err := e.b.WebhookOutbox().Stats(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// TestSignedDelivery: a dead letter reaches the receiver once, as one
// event with its fields, signed so that Verify (and a plain HMAC) accepts
// it; delivered, it leaves the outbox.
func TestSignedDelivery(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, nil)
	e := setup(t, r.host())
	e.start(func(c *Config) { c.AllowedHosts = []string{r.host()} })
	e.queues("src", r.srv.URL+"/hook?token=abc")
	ids := e.deadLetter("src", 1)
	at := e.clock.Now()
	e.eventually("the call", 100*time.Millisecond, func() bool { return len(r.snapshot()) == 1 })
	c := r.snapshot()[0]
	if got := c.header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type %q", got)
	}
	sig := c.header.Get(SignatureHeader)
	if err := Verify([]byte(testSecret), sig, c.body, e.clock.Now(), 0); err != nil {
		t.Fatalf("Verify(%q): %v", sig, err)
	}
	// The receiver's own check, as the docs spell it.
	tPart, v1Part, _ := strings.Cut(sig, ",")
	ts, err := strconv.ParseInt(strings.TrimPrefix(tPart, "t="), 10, 64)
	if err != nil || !strings.HasPrefix(v1Part, "v1=") {
		t.Fatalf("header %q is not t=<seconds>,v1=<hex>", sig)
	}
	v1 := strings.TrimPrefix(v1Part, "v1=")
	if ts < at.Unix() || ts > e.clock.Now().Unix() {
		t.Errorf("t=%d, want the clock's seconds (%d..%d)", ts, at.Unix(), e.clock.Now().Unix())
	}
	if v1 != Sign([]byte(testSecret), ts, c.body) {
		t.Errorf("v1 %s is not HMAC-SHA256(secret, t.body)", v1)
	}
	if err := Verify([]byte("another secret, 16+ bytes"), sig, c.body, e.clock.Now(), 0); err != ErrBadSignature {
		t.Errorf("Verify with another secret: %v, want ErrBadSignature", err)
	}
	if len(c.events) != 1 {
		t.Fatalf("%d events, want 1", len(c.events))
	}
	ev := c.events[0]
	if ev.Queue != "src" || ev.DeadLetterQueue != "dlq" || ev.MessageID != ids[0] || ev.Reason != model.ReasonNack ||
		ev.Attempts != 1 || ev.ReceiveCount != 1 || !ev.At.Equal(at) {
		t.Fatalf("event %+v, want src → dlq, message %s, nacked, 1/1, at %v", ev, ids[0], at)
	}
	e.eventually("the outbox empty", 0, func() bool { return e.outbox().Depth() == 0 })
	if n := len(r.snapshot()); n != 1 {
		t.Fatalf("%d calls, want 1", n)
	}
}

// TestFailingReceiverRetried: a receiver that fails gets the same events
// again after the outbox's backoff (the events wait as delayed), and they
// leave the outbox once it answers 2xx.
func TestFailingReceiverRetried(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, func(n int) int {
		if n < 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	e := setup(t, r.host())
	e.start(func(c *Config) { c.AllowedHosts = []string{r.host()} })
	e.queues("src", r.srv.URL)
	ids := e.deadLetter("src", 3)
	e.eventually("the first call", 100*time.Millisecond, func() bool { return len(r.snapshot()) >= 1 })
	// Nacked: the three events back off (delayed), none is lost.
	e.eventually("the events backing off", 0, func() bool {
		s := e.outbox()
		return s.Depth() == 3 && s.InFlight == 0 && len(r.snapshot()) == 1
	})
	e.eventually("all events delivered", 100*time.Millisecond, func() bool { return e.outbox().Depth() == 0 })
	calls := r.snapshot()
	delivered := map[string]int{}
	for _, c := range calls[2:] {
		for _, ev := range c.events {
			delivered[ev.MessageID]++
		}
	}
	for _, id := range ids {
		if delivered[id] == 0 {
			t.Errorf("message %s's event was not delivered after the failures (calls: %d)", id, len(calls))
		}
	}
	if got := calls[0].events[0]; got.MessageID == "" || got.At.IsZero() {
		t.Errorf("first call's event %+v", got)
	}
}

// TestBurstCoalesced: 50 dead letters at once arrive in few calls (one
// window), not 50.
func TestBurstCoalesced(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, nil)
	e := setup(t, r.host())
	e.start(func(c *Config) { c.AllowedHosts = []string{r.host()} })
	e.queues("src", r.srv.URL)
	e.deadLetter("src", 50)
	e.eventually("50 events", 100*time.Millisecond, func() bool { return r.events() >= 50 })
	e.eventually("the outbox empty", 0, func() bool { return e.outbox().Depth() == 0 })
	calls := r.snapshot()
	if len(calls) > 2 || r.events() != 50 {
		t.Fatalf("%d events in %d calls, want 50 in at most 2", r.events(), len(calls))
	}
	t.Logf("50 dead letters in %d call(s)", len(calls))
}

// TestBatchCap: more than MaxBatch events are split into calls of at most
// MaxBatch.
func TestBatchCap(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, nil)
	e := setup(t, r.host())
	e.start(func(c *Config) { c.AllowedHosts, c.MaxBatch = []string{r.host()}, 7 })
	e.queues("src", r.srv.URL)
	e.deadLetter("src", 20)
	e.eventually("20 events", 100*time.Millisecond, func() bool { return r.events() >= 20 })
	for _, c := range r.snapshot() {
		if len(c.events) > 7 {
			t.Fatalf("a call of %d events, past MaxBatch 7", len(c.events))
		}
	}
}

// TestGroupedByURL: the events of queues with different webhooks go to
// their own URLs; the events of a queue whose webhook was removed since
// are dropped.
func TestGroupedByURL(t *testing.T) {
	t.Parallel()
	a, b := newReceiver(t, nil), newReceiver(t, nil)
	e := setup(t, a.host(), b.host())
	e.queues("src-a", a.srv.URL)
	if _, err := e.b.CreateQueue(e.ctx, "src-b", map[string]string{
		model.AttrRedrivePolicy:     fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":1}`, model.ARN("us-east-1", "000000000000", "dlq")),
		model.AttrDeadLetterWebhook: b.srv.URL,
	}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.b.CreateQueue(e.ctx, "src-gone", map[string]string{
		model.AttrRedrivePolicy:     fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":1}`, model.ARN("us-east-1", "000000000000", "dlq")),
		model.AttrDeadLetterWebhook: b.srv.URL,
	}, nil); err != nil {
		t.Fatal(err)
	}
	// The outbox exists before the moves (a dispatcher ran), but the
	// dispatcher starts only after src-gone lost its webhook.
	d := e.start(func(c *Config) { c.AllowedHosts = []string{a.host(), b.host()} })
	if err := d.Stop(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.deadLetter("src-a", 2)
	e.deadLetter("src-b", 3)
	e.deadLetter("src-gone", 4)
	if err := e.b.SetQueueAttributes(e.ctx, "src-gone", map[string]string{model.AttrDeadLetterWebhook: ""}); err != nil {
		t.Fatal(err)
	}
	if got := e.outbox().Depth(); got != 9 {
		t.Fatalf("outbox depth %d, want 9", got)
	}
	e.start(func(c *Config) { c.AllowedHosts = []string{a.host(), b.host()} })
	e.eventually("the outbox empty", 100*time.Millisecond, func() bool { return e.outbox().Depth() == 0 })
	if a.events() != 2 || b.events() != 3 {
		t.Fatalf("a got %d events, b %d; want 2 and 3", a.events(), b.events())
	}
	for _, c := range a.snapshot() {
		for _, ev := range c.events {
			if ev.Queue != "src-a" {
				t.Fatalf("a got an event of %s", ev.Queue)
			}
		}
	}
}

// TestHostNoLongerAllowedDropped: events whose webhook's host the
// dispatcher does not allow (the operator removed it since the attribute
// was set) are dropped, and the host is never called.
func TestHostNoLongerAllowedDropped(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, nil)
	e := setup(t, r.host())
	e.start(func(c *Config) { c.AllowedHosts = []string{"hooks.example.com"} })
	e.queues("src", r.srv.URL)
	e.deadLetter("src", 2)
	e.eventually("the events dropped", 100*time.Millisecond, func() bool { return e.outbox().Depth() == 0 })
	if n := len(r.snapshot()); n != 0 {
		t.Fatalf("a host not allowed was called %d times", n)
	}
}

// TestDisallowedHostRefusedAtSet: the front refuses a webhook of a host
// the operator does not allow, naming the flag; with webhooks off, it says
// what turns them on.
func TestDisallowedHostRefusedAtSet(t *testing.T) {
	t.Parallel()
	e := setup(t, "hooks.example.com", "localhost:8080")
	for _, u := range []string{"https://evil.example.com/", "http://localhost/", "http://localhost:9090/", "https://hooks.example.com:8443/"} {
		_, err := e.b.CreateQueue(e.ctx, "q", map[string]string{model.AttrDeadLetterWebhook: u}, nil)
		if err == nil || !strings.Contains(err.Error(), "--webhook-allow-host") {
			t.Errorf("CreateQueue with webhook %s: %v, want a refusal naming --webhook-allow-host", u, err)
		}
	}
	for _, u := range []string{"https://hooks.example.com/x", "http://HOOKS.example.com/x", "http://localhost:8080/"} {
		if _, err := e.b.CreateQueue(e.ctx, "ok", map[string]string{model.AttrDeadLetterWebhook: u}, nil); err != nil {
			t.Errorf("CreateQueue with webhook %s: %v", u, err)
		}
		if err := e.b.DeleteQueue(e.ctx, "ok"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.b.CreateQueue(e.ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	err := e.b.SetQueueAttributes(e.ctx, "q", map[string]string{model.AttrDeadLetterWebhook: "https://evil.example.com/"})
	if err == nil || !strings.Contains(err.Error(), "--webhook-allow-host") {
		t.Errorf("SetQueueAttributes to a host not allowed: %v", err)
	}

	// Webhooks off: no hosts list at all (no secret).
	clock := clocktest.NewFakeClock(epoch)
	be, err := embedded.Open(embedded.Config{Dir: t.TempDir(), Options: storage.Options{Clock: clock}})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	off, _ := broker.New(be, broker.Config{})
	_, err = off.CreateQueue(e.ctx, "q", map[string]string{model.AttrDeadLetterWebhook: "https://hooks.example.com/"}, nil)
	if err == nil || !strings.Contains(err.Error(), "--webhook-secret") {
		t.Errorf("CreateQueue with a webhook, webhooks off: %v, want a refusal naming --webhook-secret", err)
	}
}

// TestNoRedirectFollowed: a receiver that redirects is a failed delivery:
// the Location (even an allowed host) is never called, and the events are
// retried.
func TestNoRedirectFollowed(t *testing.T) {
	t.Parallel()
	target := newReceiver(t, nil)
	var mu sync.Mutex
	redirects := 0
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		redirects++
		mu.Unlock()
		http.Redirect(w, req, target.srv.URL+"/elsewhere", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)
	rhost := strings.TrimPrefix(redirector.URL, "http://")
	e := setup(t, rhost, target.host())
	e.start(func(c *Config) { c.AllowedHosts = []string{rhost, target.host()} })
	e.queues("src", redirector.URL)
	e.deadLetter("src", 1)
	e.eventually("two redirect answers (a retry after the backoff)", 100*time.Millisecond, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return redirects >= 2
	})
	if n := len(target.snapshot()); n != 0 {
		t.Fatalf("the redirect target was called %d times", n)
	}
	if got := e.outbox().Depth(); got != 1 {
		t.Fatalf("outbox depth %d, want the event kept (1)", got)
	}
}

// TestEventsWaitForTheDispatcher: events written while no dispatcher runs
// (a broker restart) are delivered when one starts.
func TestEventsWaitForTheDispatcher(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, nil)
	e := setup(t, r.host())
	d := e.start(func(c *Config) { c.AllowedHosts = []string{r.host()} })
	if err := d.Stop(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.queues("src", r.srv.URL)
	e.deadLetter("src", 4)
	e.start(func(c *Config) { c.AllowedHosts = []string{r.host()} })
	e.eventually("4 events", 100*time.Millisecond, func() bool { return r.events() == 4 })
}

// TestLifecycle: Stop tolerates a dispatcher never started and a second
// Stop; Start twice is one start; Start after Stop is an error.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cfg := DefaultConfig()
	cfg.Secret, cfg.Clock = testSecret, e.clock
	d, err := New(cfg, e.b)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Stop(e.ctx); err != nil {
		t.Fatalf("Stop never started: %v", err)
	}
	if err := d.Start(e.ctx); err == nil {
		t.Fatal("Start after Stop succeeded")
	}
	d, _ = New(cfg, e.b)
	for range 2 {
		if err := d.Start(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := d.Stop(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.b.WebhookOutbox().Stats(e.ctx); err != nil {
		t.Fatalf("the outbox after Start: %v", err)
	}
	if _, err := New(cfg, nil); err == nil {
		t.Fatal("New with a nil broker succeeded")
	}
}
