package brokertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/internal/testutil"
)

const (
	// realTimeout bounds, in real time, the wait for anything that must
	// happen: a receive that must return, counters that must settle. It is
	// generous because it costs nothing when the thing happens, and a loaded
	// machine (two test runs at once, CI beside other work) can starve a
	// backend's goroutines for seconds.
	realTimeout = 20 * time.Second
	// promptly is how soon, in real time, a waiting receive must return once
	// a message is available (a send wakes it without the clock moving). On
	// the fake clock nothing but a wake-up can end such a wait, so a missed
	// wake-up fails whatever the bound; the bound is realTimeout's, since
	// 2 s was missed by a woken receive on PostgreSQL under two test runs at
	// once (RateLimits/RateServesEveryWaiter).
	promptly = realTimeout
	// quiet is how long, in real time, the suite watches for something that
	// must not happen (a waiting receive returning early).
	quiet = 50 * time.Millisecond
	// pollInterval is the real-time pause between two checks of a condition.
	pollInterval = 2 * time.Millisecond
)

// epoch is where every fake clock starts: a whole second, far from the wall
// clock, so a backend that reads time.Now() instead of its clock shows up.
var epoch = time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)

// Account and region used to build queue ARNs.
const (
	testRegion  = "us-east-1"
	testAccount = "000000000000"
)

func arn(name string) string { return model.ARN(testRegion, testAccount, name) }

var messageIDRe = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// env is one subtest's backend, clock and helpers.
type env struct {
	t     *testing.T
	s     suite
	clock *clocktest.FakeClock
	opts  storage.Options // the backend's
	cfg   broker.Config   // the front's
	// be is the backend under test and b the front over it: the suite
	// drives the front, as every API does.
	be storage.Backend
	b  *broker.Broker
	// ctx is cancelled at cleanup, before the backend is closed, so that
	// receives started by the test end first.
	ctx context.Context
	wg  sync.WaitGroup // goroutines started by goReceive
}

// setup opens an isolated backend on a new fake clock. mods adjust the
// front's settings (MaxInFlight, StrictPurge, WebhookHosts, Observer)
// before the backend opens; the backend is given the same logger and
// observer.
func (s suite) setup(t *testing.T, mods ...func(*broker.Config)) *env {
	t.Helper()
	clock := clocktest.NewFakeClock(epoch)
	cfg := broker.Config{Logger: testLogger(t)}
	for _, m := range mods {
		m(&cfg)
	}
	opts := storage.Options{Clock: clock, Logger: cfg.Logger, Observer: cfg.Observer}
	e := &env{t: t, s: s, clock: clock, opts: opts, cfg: cfg}
	e.be = s.h.Open(t, opts)
	if e.be == nil {
		t.Fatal("Harness.Open returned nil")
	}
	e.b = front(t, e.be, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	e.ctx = ctx
	// Cleanups run last-registered first: cancel, then wait for the
	// receives, then the harness's Close.
	t.Cleanup(e.wg.Wait)
	t.Cleanup(cancel)
	return e
}

// requireReopen skips the test when the harness cannot restart its backend.
func (e *env) requireReopen() {
	e.t.Helper()
	if e.s.h.Reopen == nil {
		e.t.Skip("Harness.Reopen is nil: this backend cannot restart, so restart durability is untested")
	}
}

// reopen restarts the backend on the same storage and clock.
func (e *env) reopen() {
	e.t.Helper()
	e.requireReopen()
	e.wg.Wait()
	e.be = e.s.h.Reopen(e.t, e.be, e.opts)
	if e.be == nil {
		e.t.Fatal("Harness.Reopen returned nil")
	}
	e.b = front(e.t, e.be, e.cfg)
}

// front returns the front over be. The harness closes be.
func front(t testing.TB, be storage.Backend, cfg broker.Config) *broker.Broker {
	t.Helper()
	b, err := broker.New(be, cfg)
	if err != nil {
		t.Fatalf("broker.New: %v", err)
	}
	return b
}

// testLogger returns a logger that writes to t.Log until the test's
// cleanups have run (a backend goroutine logging later must not panic).
func testLogger(t *testing.T) *slog.Logger { return testutil.Logger(t) }

func dur(d time.Duration) *time.Duration { return &d }

// advance moves the fake clock forward.
func (e *env) advance(d time.Duration) { e.clock.Advance(d) }

// eventually polls cond until it holds, failing after realTimeout.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, realTimeout, what, cond)
}

// advanceUntil advances the fake clock by step until cond holds, letting the
// backend's clock-driven work run between steps. It fails when the clock has
// moved more than limit in total or realTimeout*3 has passed in real time.
func (e *env) advanceUntil(step, limit time.Duration, what string, cond func() bool) {
	e.t.Helper()
	start := e.clock.Now()
	deadline := time.Now().Add(3 * realTimeout)
	for {
		settle := time.Now().Add(20 * time.Millisecond)
		for {
			if cond() {
				return
			}
			if time.Now().After(settle) {
				break
			}
			time.Sleep(pollInterval)
		}
		if e.clock.Now().Sub(start)+step > limit {
			e.t.Fatalf("%s: still not true after advancing the clock %v", what, e.clock.Now().Sub(start))
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: still not true after %v real time (clock advanced %v)", what, 3*realTimeout, e.clock.Now().Sub(start))
		}
		e.advance(step)
		// Wait until what the step woke has acted (a duty's step, a
		// receive's return), however slow the machine is.
		e.clock.Settle(realTimeout)
	}
}

// ---- queues ----

func (e *env) createQueue(name string, attrs map[string]string) model.Queue {
	e.t.Helper()
	q, err := e.b.CreateQueue(e.ctx, name, attrs, nil)
	if err != nil {
		e.t.Fatalf("CreateQueue(%q, %v): %v", name, attrs, err)
	}
	return q
}

func (e *env) getQueue(name string) model.QueueInfo {
	e.t.Helper()
	q, err := e.b.GetQueue(e.ctx, name)
	if err != nil {
		e.t.Fatalf("GetQueue(%q): %v", name, err)
	}
	return q
}

func (e *env) stats(name string) model.QueueStats { return e.getQueue(name).Stats }

// counts is s without OldestSentAt and OldestVisibleSince: the three
// counts the count checks compare (the instants have their own cases, in
// longdelay.go).
func counts(s model.QueueStats) model.QueueStats {
	s.OldestSentAt, s.OldestVisibleSince = time.Time{}, time.Time{}
	return s
}

// wantStats checks the queue's counts now.
func (e *env) wantStats(name string, visible, inFlight, delayed int64) {
	e.t.Helper()
	want := model.QueueStats{Visible: visible, InFlight: inFlight, Delayed: delayed}
	if got := counts(e.stats(name)); got != want {
		e.t.Fatalf("queue %s counts = %+v, want %+v", name, got, want)
	}
}

// eventuallyStats waits (real time) for the queue's counts, for changes that
// clock-driven work applies (a lease expiring, a delay ending, a sweep).
func (e *env) eventuallyStats(name string, visible, inFlight, delayed int64) {
	e.t.Helper()
	want := model.QueueStats{Visible: visible, InFlight: inFlight, Delayed: delayed}
	var got model.QueueStats
	deadline := time.Now().Add(realTimeout)
	for {
		if got = counts(e.stats(name)); got == want {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("queue %s counts = %+v, want %+v (waited %v real time)", name, got, want, realTimeout)
		}
		time.Sleep(pollInterval)
	}
}

// ---- sends ----

func (e *env) trySend(queue string, entries ...model.SendEntry) ([]model.SendResult, error) {
	e.t.Helper()
	res, err := e.b.Send(e.ctx, queue, entries)
	if err == nil && len(res) != len(entries) {
		e.t.Fatalf("Send of %d entries returned %d results", len(entries), len(res))
	}
	return res, err
}

// send sends entries and fails the test on any error.
func (e *env) send(queue string, entries ...model.SendEntry) []model.SendResult {
	e.t.Helper()
	for i := range entries {
		if entries[i].ID == "" && len(entries) > 1 {
			entries[i].ID = fmt.Sprintf("e%d", i)
		}
	}
	res, err := e.trySend(queue, entries...)
	if err != nil {
		e.t.Fatalf("Send to %s: %v", queue, err)
	}
	for i, r := range res {
		if r.Err != nil {
			e.t.Fatalf("Send to %s: entry %d: %v", queue, i, r.Err)
		}
		if r.ID != entries[i].ID {
			e.t.Fatalf("Send result %d has id %q, want %q", i, r.ID, entries[i].ID)
		}
		if !messageIDRe.MatchString(r.MessageID) {
			e.t.Fatalf("Send result %d: MessageID %q is not a lower-case UUID", i, r.MessageID)
		}
	}
	return res
}

func (e *env) sendBody(queue, body string) model.SendResult {
	e.t.Helper()
	return e.send(queue, model.SendEntry{ID: "m", Body: body})[0]
}

// sendErr sends one entry and returns its error, whole-call or per-entry.
func (e *env) sendErr(queue string, entry model.SendEntry) error {
	e.t.Helper()
	if entry.ID == "" {
		entry.ID = "m"
	}
	res, err := e.trySend(queue, entry)
	if err != nil {
		return err
	}
	return res[0].Err
}

// plainSendErr sends one entry as a plain send (SendMessage: no entry id, so
// not a batch) and returns its error, whole-call or per-entry.
func (e *env) plainSendErr(queue string, entry model.SendEntry) error {
	e.t.Helper()
	entry.ID = ""
	res, err := e.trySend(queue, entry)
	if err != nil {
		return err
	}
	return res[0].Err
}

// ---- receives ----

// receive calls Receive with a real-time bound, so a backend that waits
// for the fake clock when it should not fails instead of hanging.
func (e *env) receive(req model.ReceiveRequest) ([]model.Delivery, error) {
	ctx, cancel := context.WithTimeout(e.ctx, realTimeout)
	defer cancel()
	return e.b.Receive(ctx, req)
}

// receiveN long-polls until it has exactly n messages of req.Queue.
func (e *env) receiveN(req model.ReceiveRequest, n int) []model.Delivery {
	e.t.Helper()
	if req.WaitTime == nil {
		req.WaitTime = dur(model.MaxWaitTime)
	}
	deadline := time.Now().Add(realTimeout)
	var out []model.Delivery
	for len(out) < n {
		want := n - len(out)
		if want > model.MaxReceiveMessages {
			want = model.MaxReceiveMessages
		}
		req.MaxMessages = want
		ctx, cancel := context.WithDeadline(e.ctx, deadline)
		ds, err := e.b.Receive(ctx, req)
		cancel()
		if err != nil {
			e.t.Fatalf("Receive(%s): got %d of %d messages, then: %v", req.Queue, len(out), n, err)
		}
		if len(ds) > want {
			e.t.Fatalf("Receive(%s, MaxMessages %d) returned %d messages", req.Queue, want, len(ds))
		}
		for _, d := range ds {
			e.checkDelivery(d)
		}
		out = append(out, ds...)
	}
	return out
}

// receiveOne long-polls for one message of queue.
func (e *env) receiveOne(queue string) model.Delivery {
	e.t.Helper()
	return e.receiveN(model.ReceiveRequest{Queue: queue}, 1)[0]
}

// receiveOneFor long-polls for one message and leases it for visibility.
func (e *env) receiveOneFor(queue string, visibility time.Duration) model.Delivery {
	e.t.Helper()
	return e.receiveN(model.ReceiveRequest{Queue: queue, Visibility: dur(visibility)}, 1)[0]
}

// receiveNone short-polls queue and requires nothing to be returned.
func (e *env) receiveNone(queue string) {
	e.t.Helper()
	ds, err := e.receive(model.ReceiveRequest{Queue: queue, MaxMessages: 10, WaitTime: dur(0)})
	if err != nil {
		e.t.Fatalf("short-poll Receive(%s): %v", queue, err)
	}
	if len(ds) > 0 {
		e.t.Fatalf("short-poll Receive(%s) returned %d messages (first %q, receive count %d), want none",
			queue, len(ds), ds[0].Body, ds[0].ReceiveCount)
	}
}

func (e *env) checkDelivery(d model.Delivery) {
	e.t.Helper()
	if d.Receipt == "" {
		e.t.Fatalf("delivery of %s has no receipt handle", d.ID)
	}
	if d.ReceiveCount < 1 {
		e.t.Fatalf("delivery of %s has ReceiveCount %d", d.ID, d.ReceiveCount)
	}
	if d.FirstReceiveAt.IsZero() {
		e.t.Fatalf("delivery of %s has no FirstReceiveAt", d.ID)
	}
}

type recvResult struct {
	ds  []model.Delivery
	err error
}

// goReceive starts a receive in a goroutine; its result arrives on the channel.
func (e *env) goReceive(ctx context.Context, req model.ReceiveRequest) <-chan recvResult {
	ch := make(chan recvResult, 1)
	b := e.b
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		ds, err := b.Receive(ctx, req)
		ch <- recvResult{ds, err}
	}()
	return ch
}

// goWait starts a long poll of wait on queue and returns once it is (very
// likely) blocked: the backend armed a new timer on the fake clock.
func (e *env) goWait(ctx context.Context, queue string, wait time.Duration) <-chan recvResult {
	e.t.Helper()
	return e.goWaitReq(ctx, model.ReceiveRequest{Queue: queue, MaxMessages: 10, WaitTime: dur(wait)})
}

// goWaitReq is goWait for any request.
func (e *env) goWaitReq(ctx context.Context, req model.ReceiveRequest) <-chan recvResult {
	e.t.Helper()
	queue := req.Queue
	base := e.clock.Timers()
	ch := e.goReceive(ctx, req)
	deadline := time.Now().Add(time.Second)
	for e.clock.Timers() <= base {
		if time.Now().After(deadline) {
			e.t.Logf("no new fake-clock timer 1 s after a long poll on %s started; assuming it waits anyway", queue)
			break
		}
		select {
		case r := <-ch:
			e.t.Fatalf("long poll on %s returned at once: %d messages, err %v", queue, len(r.ds), r.err)
		default:
		}
		time.Sleep(pollInterval)
	}
	return ch
}

// await waits (real time) for a receive started by goReceive.
func (e *env) await(ch <-chan recvResult, within time.Duration, what string) recvResult {
	e.t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(within):
		e.t.Fatalf("%s: the waiting Receive did not return within %v real time", what, within)
		return recvResult{}
	}
}

// notYet checks that a waiting receive has not returned.
func (e *env) notYet(ch <-chan recvResult, what string) {
	e.t.Helper()
	select {
	case r := <-ch:
		e.t.Fatalf("%s: the waiting Receive returned early: %d messages, err %v", what, len(r.ds), r.err)
	case <-time.After(quiet):
	}
}

// ---- deletes and visibility changes ----

func (e *env) deleteErr(queue, receipt string) error {
	e.t.Helper()
	errs, err := e.b.Delete(e.ctx, queue, []model.DeleteEntry{{ID: "d", Receipt: receipt}})
	if err != nil {
		return err
	}
	if len(errs) != 1 {
		e.t.Fatalf("Delete of 1 entry returned %d results", len(errs))
	}
	return errs[0]
}

func (e *env) mustDelete(queue, receipt string) {
	e.t.Helper()
	if err := e.deleteErr(queue, receipt); err != nil {
		e.t.Fatalf("Delete on %s: %v", queue, err)
	}
}

func (e *env) changeVisErr(queue, receipt string, timeout time.Duration) error {
	e.t.Helper()
	errs, err := e.b.ChangeVisibility(e.ctx, queue, []model.VisibilityEntry{{ID: "v", Receipt: receipt, Timeout: timeout}})
	if err != nil {
		return err
	}
	if len(errs) != 1 {
		e.t.Fatalf("ChangeVisibility of 1 entry returned %d results", len(errs))
	}
	return errs[0]
}

func (e *env) mustChangeVis(queue, receipt string, timeout time.Duration) {
	e.t.Helper()
	if err := e.changeVisErr(queue, receipt, timeout); err != nil {
		e.t.Fatalf("ChangeVisibility(%v) on %s: %v", timeout, queue, err)
	}
}

// ---- assertions ----

// wantErr checks that err matches the sentinel.
func wantErr(t testing.TB, what string, err, sentinel error) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("%s: error = %v, want %v", what, err, sentinel)
	}
}

// wantErrOneOf checks that err matches one of the sentinels.
func wantErrOneOf(t testing.TB, what string, err error, sentinels ...error) {
	t.Helper()
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return
		}
	}
	t.Fatalf("%s: error = %v, want one of %v", what, err, sentinels)
}

// sameInstant compares instants to the millisecond, the precision of SQS timestamps.
func sameInstant(a, b time.Time) bool {
	d := a.Sub(b)
	return d > -time.Millisecond && d < time.Millisecond
}

func wantTime(t testing.TB, what string, got, want time.Time) {
	t.Helper()
	if !sameInstant(got, want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// sameAttrs compares message attributes (nil and empty values are equal).
func sameAttrs(a, b map[string]model.MessageAttribute) bool {
	if len(a) != len(b) {
		return false
	}
	for k, x := range a {
		y, ok := b[k]
		if !ok || x.DataType != y.DataType || x.StringValue != y.StringValue || !bytes.Equal(x.BinaryValue, y.BinaryValue) {
			return false
		}
	}
	return true
}

func bodies(ds []model.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Body
	}
	sort.Strings(out)
	return out
}
