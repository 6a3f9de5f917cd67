package brokertest

import (
	"encoding/json"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
)

// The dead-letter webhook tests (broker/webhook.go): every path that moves a
// message to a dead-letter queue writes exactly one event into the outbox
// (broker.WebhookOutbox) when the source queue has a DeadLetterWebhook, and
// none otherwise, in the move's own atomic step: an event exists if and
// only if the move happened. The outbox is an internal queue: ListQueues
// never shows it. The front refuses a webhook whose host the operator does
// not allow.
var webhookTests = []testCase{
	{"NackOnLastAttempt", testHookNack},
	{"DeadLetterNow", testHookDeadLetterNow},
	{"LeaseExpiry", testHookLeaseExpiry},
	{"ExpiryFoundByChange", testHookExpiryFoundByChange},
	{"ReceivePastLimit", testHookReceivePastLimit},
	{"FifoReceivePastLimit", testHookFifoReceivePastLimit},
	{"FifoNack", testHookFifoNack},
	{"NoWebhookNoEvent", testHookNoWebhook},
	{"NoOutboxNoEvent", testHookNoOutbox},
	{"NoMoveNoEvent", testHookNoMove},
	{"OutboxHidden", testHookOutboxHidden},
	{"HostRefused", testHookHostRefused},
	{"EventsSurviveRestart", testHookRestart},
}

// hookURL is the webhook the cases set; allowedHooks allows its host.
const hookURL = "https://hooks.example.com/dlq"

type allowedHooks struct{}

func (allowedHooks) Allowed(host string) bool { return host == "hooks.example.com:443" }

// hookSetup is setup with webhooks on (hooks.example.com allowed) and the
// outbox created, as the dispatcher creates it.
func (s suite) hookSetup(t *testing.T) *env {
	t.Helper()
	e := s.setup(t, func(o *broker.Config) { o.WebhookHosts = allowedHooks{} })
	e.createOutbox()
	return e
}

func (e *env) createOutbox() {
	e.t.Helper()
	if _, _, err := e.be.CreateQueue(e.ctx, storage.QueueSpec{QueueRef: plan.WebhookOutbox(), Config: plan.WebhookOutboxConfig()}); err != nil {
		e.t.Fatalf("create the webhook outbox: %v", err)
	}
}

// hookQueues creates dlq and src (with the webhook, maxReceiveCount
// maxReceives, visibility 10 s) and more attributes of src.
func (e *env) hookQueues(maxReceives int, more map[string]string) {
	e.t.Helper()
	e.createQueue("dlq", nil)
	attrs := map[string]string{
		model.AttrVisibilityTimeout: "10",
		model.AttrRedrivePolicy:     redrivePolicy("dlq", maxReceives),
		model.AttrDeadLetterWebhook: hookURL,
	}
	for k, v := range more {
		attrs[k] = v
	}
	e.createQueue("src", attrs)
}

// events returns the outbox's events (browsed: not leased), checking that
// the outbox's counts agree with them.
func (e *env) events() []model.DeadLetterEvent {
	e.t.Helper()
	var out []model.DeadLetterEvent
	req := model.BrowseRequest{Limit: model.MaxBrowse}
	for {
		p, err := e.be.Browse(e.ctx, plan.WebhookOutbox(), req)
		if err != nil {
			e.t.Fatalf("Browse the outbox: %v", err)
		}
		for _, m := range p.Messages {
			wantEventForm(e.t, m.Body)
			ev, err := model.ParseDeadLetterEvent(m.Body)
			if err != nil {
				e.t.Fatalf("outbox message %s: %v (body %q)", m.ID, err, m.Body)
			}
			out = append(out, ev)
		}
		if p.Next == "" {
			break
		}
		req.After = p.Next
	}
	q, err := e.be.GetQueue(e.ctx, plan.WebhookOutbox())
	if err != nil {
		e.t.Fatalf("GetQueue(outbox): %v", err)
	}
	if got := q.Stats.Depth(); got != int64(len(out)) {
		e.t.Fatalf("outbox counts %+v (depth %d), but it holds %d events", q.Stats, got, len(out))
	}
	return out
}

// eventAt is the form of an event's "at" (model.EventTimeFormat).
var eventAt = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`)

// wantEventForm checks an outbox body's wire form, which every backend
// writes alike: exactly the event's seven keys, "at" in EventTimeFormat.
func wantEventForm(t testing.TB, body string) {
	t.Helper()
	var raw map[string]any
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatalf("outbox body %q: %v", body, err)
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if got := strings.Join(keys, ","); got != "at,attempts,deadLetterQueue,messageId,queue,reason,receiveCount" {
		t.Fatalf("outbox body %s has the keys %s", body, got)
	}
	if at, _ := raw["at"].(string); !eventAt.MatchString(at) {
		t.Fatalf("outbox body %s: at %q is not in %s", body, raw["at"], model.EventTimeFormat)
	}
}

// wantEvent checks the one event of the outbox.
func (e *env) wantEvent(id, reason string, attempts, receiveCount int, at time.Time) {
	e.t.Helper()
	evs := e.events()
	if len(evs) != 1 {
		e.t.Fatalf("the outbox holds %d events, want 1: %+v", len(evs), evs)
	}
	ev := evs[0]
	if ev.Queue != "src" || ev.DeadLetterQueue != "dlq" || ev.MessageID != id || ev.Reason != reason ||
		ev.Attempts != attempts || ev.ReceiveCount != receiveCount {
		e.t.Fatalf("event %+v, want queue src, deadLetterQueue dlq, messageId %s, reason %q, attempts %d, receiveCount %d",
			ev, id, reason, attempts, receiveCount)
	}
	wantTime(e.t, "event at", ev.At, at)
}

func (e *env) wantNoEvents() {
	e.t.Helper()
	if evs := e.events(); len(evs) != 0 {
		e.t.Fatalf("the outbox holds %d events, want none: %+v", len(evs), evs)
	}
}

// testHookNack: a nack that used the last attempt moves the message and
// writes its event; the nack before it (not the last) writes none.
func testHookNack(t *testing.T, s suite) {
	e := s.hookSetup(t)
	e.hookQueues(2, nil)
	res := e.sendBody("src", "poison")
	e.mustChangeVis("src", e.receiveOne("src").Receipt, 0)
	e.wantNoEvents()
	e.advance(time.Second)
	d := e.receiveOne("src")
	e.advance(time.Second)
	e.nack("src", d.Receipt, "bad input", nil)
	e.wantStats("dlq", 1, 0, 0)
	e.wantEvent(res.MessageID, "bad input", 2, 2, e.clock.Now())
}

// testHookDeadLetterNow: a dead-letter-now writes the event with its reason.
func testHookDeadLetterNow(t *testing.T, s suite) {
	e := s.hookSetup(t)
	e.hookQueues(10, nil)
	res := e.sendBody("src", "poison")
	d := e.receiveOne("src")
	e.advance(time.Second)
	e.mustChangeLease("src", model.LeaseEntry{Receipt: d.Receipt, Kind: model.DeadLetterNow, Reason: "cannot parse"})
	e.wantStats("dlq", 1, 0, 0)
	e.wantEvent(res.MessageID, "cannot parse", 1, 1, e.clock.Now())
}

// testHookLeaseExpiry: the last attempt's lease ending moves the message
// ("lease expired"), noticed by a receive or the sweeper, with its event.
func testHookLeaseExpiry(t *testing.T, s suite) {
	e := s.hookSetup(t)
	e.hookQueues(1, map[string]string{model.AttrRetryPolicy: retryPolicy(600, 600, model.JitterNone)})
	res := e.sendBody("src", "slow")
	e.receiveOne("src")
	e.advance(10 * time.Second)
	e.moveToDLQ("src", "dlq", 1)
	e.wantEvent(res.MessageID, model.ReasonLeaseExpired, 1, 1, e.clock.Now())
}

// testHookExpiryFoundByChange: a visibility change that finds the last
// attempt's lease ended moves the message, with its event.
func testHookExpiryFoundByChange(t *testing.T, s suite) {
	e := s.hookSetup(t)
	e.hookQueues(1, nil)
	res := e.sendBody("src", "slow")
	d := e.receiveOne("src")
	e.advance(10 * time.Second)
	if err := e.changeVisErr("src", d.Receipt, time.Minute); err == nil {
		t.Fatal("ChangeMessageVisibility of an ended lease succeeded")
	}
	e.eventuallyStats("dlq", 1, 0, 0)
	e.wantEvent(res.MessageID, model.ReasonLeaseExpired, 1, 1, e.clock.Now())
}

// testHookReceivePastLimit: a receive that finds a message past its limit
// (maxReceiveCount lowered since) moves it ("maximum attempts reached").
func testHookReceivePastLimit(t *testing.T, s suite) {
	e := s.hookSetup(t)
	e.hookQueues(3, nil)
	res := e.sendBody("src", "a")
	e.mustChangeVis("src", e.receiveOne("src").Receipt, 0)
	e.mustChangeVis("src", e.receiveOne("src").Receipt, 0)
	if err := e.b.SetQueueAttributes(e.ctx, "src", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 1)}); err != nil {
		t.Fatal(err)
	}
	e.advance(time.Second)
	e.moveToDLQ("src", "dlq", 1)
	e.wantEvent(res.MessageID, model.ReasonMaxAttempts, 2, 2, e.clock.Now())
}

// testHookFifoReceivePastLimit: the same on a FIFO queue (its own claim).
func testHookFifoReceivePastLimit(t *testing.T, s suite) {
	e := s.hookSetup(t)
	e.createQueue("dlq.fifo", map[string]string{model.AttrFifoQueue: "true"})
	e.createQueue("src.fifo", map[string]string{
		model.AttrFifoQueue: "true", model.AttrContentBasedDeduplication: "true",
		model.AttrRedrivePolicy: redrivePolicy("dlq.fifo", 3), model.AttrDeadLetterWebhook: hookURL,
	})
	res := e.send("src.fifo", model.SendEntry{Body: "a", GroupID: "g"})[0]
	e.send("src.fifo", model.SendEntry{Body: "b", GroupID: "g"})
	e.mustChangeVis("src.fifo", e.receiveOne("src.fifo").Receipt, 0)
	if err := e.b.SetQueueAttributes(e.ctx, "src.fifo", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq.fifo", 1)}); err != nil {
		t.Fatal(err)
	}
	e.advance(time.Second)
	at := e.clock.Now()
	// The receive moves "a" and delivers "b" (or moves "a" only; then the
	// next receive delivers "b").
	eventually(t, "b delivered after a moved", func() bool {
		ds, err := e.receive(model.ReceiveRequest{Queue: "src.fifo", WaitTime: dur(0)})
		if err != nil {
			t.Fatal(err)
		}
		return len(ds) == 1 && ds[0].Body == "b"
	})
	e.wantStats("dlq.fifo", 1, 0, 0)
	evs := e.events()
	if len(evs) != 1 || evs[0].Queue != "src.fifo" || evs[0].DeadLetterQueue != "dlq.fifo" || evs[0].MessageID != res.MessageID ||
		evs[0].Reason != model.ReasonMaxAttempts || evs[0].Attempts != 1 || evs[0].ReceiveCount != 1 {
		t.Fatalf("events %+v, want one of message %s from src.fifo to dlq.fifo, attempts 1", evs, res.MessageID)
	}
	wantTime(t, "event at", evs[0].At, at)
}

// testHookFifoNack: a FIFO nack on the last attempt writes the event.
func testHookFifoNack(t *testing.T, s suite) {
	e := s.hookSetup(t)
	e.createQueue("dlq.fifo", map[string]string{model.AttrFifoQueue: "true"})
	e.createQueue("src.fifo", map[string]string{
		model.AttrFifoQueue: "true", model.AttrContentBasedDeduplication: "true",
		model.AttrRedrivePolicy: redrivePolicy("dlq.fifo", 1), model.AttrDeadLetterWebhook: hookURL,
	})
	res := e.send("src.fifo", model.SendEntry{Body: "a", GroupID: "g"})[0]
	e.mustChangeVis("src.fifo", e.receiveOne("src.fifo").Receipt, 0)
	e.wantStats("dlq.fifo", 1, 0, 0)
	if evs := e.events(); len(evs) != 1 || evs[0].MessageID != res.MessageID || evs[0].Reason != model.ReasonNack {
		t.Fatalf("events %+v, want one of message %s, reason %q", evs, res.MessageID, model.ReasonNack)
	}
}

// testHookNoWebhook: the same moves from a queue without a webhook write
// nothing; removing the webhook stops the events.
func testHookNoWebhook(t *testing.T, s suite) {
	e := s.hookSetup(t)
	e.hookQueues(1, nil)
	if err := e.b.SetQueueAttributes(e.ctx, "src", map[string]string{model.AttrDeadLetterWebhook: ""}); err != nil {
		t.Fatal(err)
	}
	e.sendBody("src", "a")
	e.sendBody("src", "b")
	e.sendBody("src", "c")
	ds := e.receiveN(model.ReceiveRequest{Queue: "src", MaxMessages: 3}, 3)
	e.mustChangeVis("src", ds[0].Receipt, 0)
	e.mustChangeLease("src", model.LeaseEntry{Receipt: ds[1].Receipt, Kind: model.DeadLetterNow})
	e.advance(10 * time.Second)
	e.moveToDLQ("src", "dlq", 3)
	e.wantNoEvents()
}

// testHookNoOutbox: without an outbox (no dispatcher ever started) the
// moves happen and write nothing; an outbox created later holds only the
// events of later moves.
func testHookNoOutbox(t *testing.T, s suite) {
	e := s.setup(t, func(o *broker.Config) { o.WebhookHosts = allowedHooks{} })
	e.hookQueues(1, nil)
	e.sendBody("src", "before")
	e.mustChangeVis("src", e.receiveOne("src").Receipt, 0)
	e.wantStats("dlq", 1, 0, 0)
	e.createOutbox()
	e.wantNoEvents()
	res := e.sendBody("src", "after")
	e.mustChangeVis("src", e.receiveOne("src").Receipt, 0)
	e.wantStats("dlq", 2, 0, 0)
	e.wantEvent(res.MessageID, model.ReasonNack, 1, 1, e.clock.Now())
}

// testHookNoMove: what does not move a message writes no event: a nack
// with attempts left, a snooze, a stale receipt, a delete, and a
// dead-letter-now whose dead-letter queue is gone (the message stays).
func testHookNoMove(t *testing.T, s suite) {
	e := s.hookSetup(t)
	e.hookQueues(3, nil)
	e.sendBody("src", "a")
	d := e.receiveOne("src")
	e.mustChangeVis("src", d.Receipt, 0)
	_ = e.changeVisErr("src", d.Receipt, 0) // stale now
	d = e.receiveOne("src")
	e.snooze("src", d.Receipt, 0)
	d = e.receiveOne("src")
	e.mustDelete("src", d.Receipt)
	e.wantNoEvents()

	e.sendBody("src", "b")
	d = e.receiveOne("src")
	if err := e.b.DeleteQueue(e.ctx, "dlq"); err != nil {
		t.Fatal(err)
	}
	_ = e.changeLease("src", model.LeaseEntry{Receipt: d.Receipt, Kind: model.DeadLetterNow, Reason: "x"})
	e.wantStats("src", 1, 0, 0)
	e.wantNoEvents()
}

// testHookOutboxHidden: the outbox is not one of the broker's queues.
func testHookOutboxHidden(t *testing.T, s suite) {
	e := s.hookSetup(t)
	e.createQueue("q", nil)
	qs, err := e.b.ListQueues(e.ctx, "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 1 || qs[0].Name != "q" {
		t.Fatalf("ListQueues = %v, want only q", qs)
	}
	_, err = e.b.GetQueue(e.ctx, plan.WebhookOutbox().Name)
	wantErr(t, "GetQueue of the outbox's name through the front", err, model.ErrQueueDoesNotExist)
	// A queue of that name in the broker's own account is another queue.
	e.createQueue(plan.WebhookOutbox().Name, nil)
	if q, err := e.be.GetQueue(e.ctx, plan.WebhookOutbox()); err != nil || q.Config.Retry == nil {
		t.Fatalf("the outbox after a same-named queue was created: %+v, %v", q, err)
	}
}

// testHookHostRefused: with webhooks off (no WebhookHosts) every URL is
// refused; with hosts, only theirs; removing a webhook is always allowed.
func testHookHostRefused(t *testing.T, s suite) {
	off := s.setup(t)
	_, err := off.b.CreateQueue(off.ctx, "a", map[string]string{model.AttrDeadLetterWebhook: hookURL}, nil)
	wantErr(t, "CreateQueue with a webhook, webhooks off", err, model.ErrInvalidAttributeValue)
	off.createQueue("a", nil)
	err = off.b.SetQueueAttributes(off.ctx, "a", map[string]string{model.AttrDeadLetterWebhook: hookURL})
	wantErr(t, "SetQueueAttributes with a webhook, webhooks off", err, model.ErrInvalidAttributeValue)
	if err := off.b.SetQueueAttributes(off.ctx, "a", map[string]string{model.AttrDeadLetterWebhook: ""}); err != nil {
		t.Fatalf("removing a webhook, webhooks off: %v", err)
	}

	e := s.hookSetup(t)
	for _, u := range []string{"https://evil.example.com/x", "http://hooks.example.com/x", "https://hooks.example.com:8443/x", "http://169.254.169.254/latest"} {
		_, err := e.b.CreateQueue(e.ctx, "b", map[string]string{model.AttrDeadLetterWebhook: u}, nil)
		wantErr(t, "CreateQueue with webhook "+u, err, model.ErrInvalidAttributeValue)
	}
	e.createQueue("b", map[string]string{model.AttrDeadLetterWebhook: "https://HOOKS.example.com:443/x"})
	err = e.b.SetQueueAttributes(e.ctx, "b", map[string]string{model.AttrDeadLetterWebhook: "https://evil.example.com/x"})
	wantErr(t, "SetQueueAttributes to a host not allowed", err, model.ErrInvalidAttributeValue)
	if q := e.getQueue("b"); q.Config.DeadLetterWebhook != "https://HOOKS.example.com:443/x" {
		t.Fatalf("a refused SetQueueAttributes changed the webhook to %q", q.Config.DeadLetterWebhook)
	}
}

// testHookRestart: the events are as durable as the moves.
func testHookRestart(t *testing.T, s suite) {
	e := s.hookSetup(t)
	e.requireReopen()
	e.hookQueues(1, nil)
	res := e.sendBody("src", "a")
	e.mustChangeVis("src", e.receiveOne("src").Receipt, 0)
	at := e.clock.Now()
	e.reopen()
	e.wantEvent(res.MessageID, model.ReasonNack, 1, 1, at)
}
