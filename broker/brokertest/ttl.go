package brokertest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
)

// The time-to-live tests (issue 25, broker/model/config_ttl.go): a message's
// own Sluice.TimeToLive and its queue's MessageTimeToLive; an expired message
// is never handed out, whether it expired ready, delayed, in flight or
// backing off; ExpiredMessageAction drops it or moves it to the dead-letter
// queue with the reason "expired"; FIFO groups move on; the counts stay
// right; the expiry survives a restart; bad input is refused.
var ttlTests = []testCase{
	{"ReadyExpires", testTTLReadyExpires},
	{"QueueDefaultAndOwn", testTTLQueueDefault},
	{"ExpiryInstantIsExpired", testTTLExpiryInstant},
	{"DelayedExpires", testTTLDelayed},
	{"InFlightKeepsLease", testTTLInFlightKeepsLease},
	{"InFlightExpiresAtLeaseEnd", testTTLInFlightLeaseEnd},
	{"InFlightNackExpires", testTTLInFlightNack},
	{"LeaseEndedThenExpired", testTTLLeaseEndedThenExpired},
	{"BackingOffExpires", testTTLBackingOff},
	{"DeadLetterReasonExpired", testTTLDeadLetter},
	{"DeadLetterFromFlight", testTTLDeadLetterFromFlight},
	{"DropDespiteRedrive", testTTLDropDespiteRedrive},
	{"FifoGroupMovesOn", testTTLFifo},
	{"AcrossRestart", testTTLRestart},
	{"BadInput", testTTLBadInput},
	{"ObserverCounts", testTTLObserver},
	{"RetentionEqualsTTLDeadLetters", testTTLRetentionEqualsTTL},
	{"SweeperWakesBehindHeldExpiries", testTTLSweeperBehindHeld},
	{"ShortenedLeaseExpiresAtItsEnd", testTTLShortenedLease},
	{"SettledDedupIgnoresExpired", testTTLSettledDedup},
	{"MaxDepthIgnoresExpired", testTTLMaxDepth},
	{"FifoWaiterWokenAtExpiry", testTTLFifoWaiter},
	{"AtMostOnceSkipsExpired", testTTLAtMostOnce},
	{"FifoDeadLetterKeepsGroupOrder", testTTLFifoDeadLetter},
}

// withTTL is a send entry of body with Sluice.TimeToLive secs.
func withTTL(body string, secs int) model.SendEntry {
	return model.SendEntry{Body: body, Attributes: map[string]model.MessageAttribute{model.MsgAttrTimeToLive: numAttr(secs)}}
}

// testTTLReadyExpires: a ready message is receivable until its time to live
// passes, then gone (dropped: the queue has no RedrivePolicy), whether or
// not anyone receives; a message without one stays.
func testTTLReadyExpires(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.send("q", withTTL("short", 10), model.SendEntry{Body: "plain"})
	e.wantStats("q", 2, 0, 0)
	e.advance(9 * time.Second)
	e.wantStats("q", 2, 0, 0)
	e.advance(time.Second)
	e.eventuallyStats("q", 1, 0, 0) // the sweeper, with no receive
	d := e.receiveOne("q")
	if d.Body != "plain" {
		t.Fatalf("received %q, want the message without a time to live", d.Body)
	}
	e.mustDelete("q", d.Receipt)
	e.receiveNone("q")
	e.wantStats("q", 0, 0, 0)
}

// testTTLQueueDefault: MessageTimeToLive applies to the messages sent
// without their own; a message's own applies instead, shorter or longer;
// changing the queue's default leaves the messages already sent alone.
func testTTLQueueDefault(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrMessageTimeToLive: "60"})
	e.send("q", model.SendEntry{Body: "default"}, withTTL("own-short", 10), withTTL("own-long", 120))
	e.advance(10 * time.Second)
	e.eventuallyStats("q", 2, 0, 0)
	if err := e.b.SetQueueAttributes(e.ctx, "q", map[string]string{model.AttrMessageTimeToLive: "0"}); err != nil {
		t.Fatal(err)
	}
	e.sendBody("q", "none")
	e.advance(50 * time.Second) // 60 s: the default's
	e.eventuallyStats("q", 2, 0, 0)
	e.advance(60 * time.Second) // 120 s: own-long's
	e.eventuallyStats("q", 1, 0, 0)
	if d := e.receiveOne("q"); d.Body != "none" {
		t.Fatalf("received %q, want the message sent after the default was removed", d.Body)
	}
}

// testTTLExpiryInstant: the expiry instant itself is expired: a lease that
// ends exactly then does not make the message visible again.
func testTTLExpiryInstant(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.send("q", withTTL("a", 10))
	e.advance(9 * time.Second)
	e.receiveOneFor("q", time.Second) // its lease ends at the expiry
	e.advance(time.Second)
	e.eventuallyStats("q", 0, 0, 0)
	e.receiveNone("q")
}

// testTTLDelayed: a message cannot be sent with a delay as long as its time
// to live (testTTLBadInput), but a delayed message (a snoozed one) whose time
// to live passes expires at that moment, never visible again; a message sent
// with a delay is visible when it ends and expires later.
func testTTLDelayed(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrDelaySeconds: "20"})
	e.send("q", withTTL("a", 25), withTTL("b", 40))
	e.wantStats("q", 0, 0, 2)
	e.advance(20 * time.Second) // both visible
	e.eventuallyStats("q", 2, 0, 0)
	d := e.receiveOne("q")
	if d.Body != "a" {
		t.Fatalf("received %q, want a (send order)", d.Body)
	}
	e.snooze("q", d.Receipt, time.Minute) // delayed until 80 s
	e.wantStats("q", 1, 0, 1)
	e.advance(5 * time.Second) // 25 s: a expires, delayed
	e.eventuallyStats("q", 1, 0, 0)
	e.advance(15 * time.Second) // 40 s: b expires, visible
	e.eventuallyStats("q", 0, 0, 0)
	e.advance(time.Minute)
	e.receiveNone("q")
}

// testTTLInFlightKeepsLease: a message in flight when its time to live
// passes keeps its lease: counted in flight, its holder may extend the
// lease and delete it.
func testTTLInFlightKeepsLease(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.send("q", withTTL("a", 10))
	d := e.receiveOneFor("q", 30*time.Second)
	e.advance(15 * time.Second)
	e.clock.Settle(realTimeout)
	e.wantStats("q", 0, 1, 0)
	e.mustChangeVis("q", d.Receipt, time.Minute) // an extension is its holder's
	e.advance(40 * time.Second)                  // past the first lease's end
	e.clock.Settle(realTimeout)
	e.wantStats("q", 0, 1, 0)
	e.mustDelete("q", d.Receipt)
	e.wantStats("q", 0, 0, 0)
}

// testTTLInFlightLeaseEnd: when the lease of a message whose time to live
// passed ends, it expires instead of becoming visible, with no receive
// needed; its receipt is stale then.
func testTTLInFlightLeaseEnd(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrVisibilityTimeout: "30"})
	e.send("q", withTTL("a", 10), model.SendEntry{Body: "b"})
	ds := e.receiveN(model.ReceiveRequest{Queue: "q", MaxMessages: 2}, 2)
	e.advance(30 * time.Second)
	e.eventuallyStats("q", 1, 0, 0) // b is back, a is gone
	for _, d := range ds {
		if d.Body == "a" {
			wantErr(t, "ChangeVisibility with the receipt of the expired message", e.changeVisErr("q", d.Receipt, time.Minute), model.ErrInvalidParameterValue)
		}
	}
	if d := e.receiveOne("q"); d.Body != "b" {
		t.Fatalf("received %q, want b", d.Body)
	}
	e.receiveNone("q")
}

// testTTLInFlightNack: a nack (SQS's ChangeMessageVisibility to 0, or the
// native nack) or a release of a message whose time to live passed expires
// it at once.
func testTTLInFlightNack(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrVisibilityTimeout: "60"})
	e.send("q", withTTL("a", 10), withTTL("b", 10), withTTL("c", 10))
	ds := e.receiveN(model.ReceiveRequest{Queue: "q", MaxMessages: 3}, 3)
	e.advance(10 * time.Second)
	e.clock.Settle(realTimeout)
	e.wantStats("q", 0, 3, 0)
	e.mustChangeVis("q", ds[0].Receipt, 0)
	e.nack("q", ds[1].Receipt, "boom", nil)
	e.snooze("q", ds[2].Receipt, 0)
	e.wantStats("q", 0, 0, 0)
	e.receiveNone("q")
}

// testTTLLeaseEndedThenExpired: a message whose lease ended, then whose
// time to live passed, is gone, whoever notices first (a visibility change
// with the old receipt, or the sweeper): the change answers as for a
// message that is gone, and a delete of the old receipt succeeds without
// effect.
func testTTLLeaseEndedThenExpired(t *testing.T, s suite) {
	e := s.setup(t)
	for _, policy := range []map[string]string{nil, {model.AttrRetryPolicy: retryPolicy(60, 300, model.JitterNone)}} {
		e.createQueue("q", policy)
		e.send("q", withTTL("a", 20), withTTL("b", 20))
		ds := e.receiveN(model.ReceiveRequest{Queue: "q", MaxMessages: 2, Visibility: dur(10 * time.Second)}, 2)
		e.advance(20 * time.Second) // the leases ended at 10 s, the messages expire at 20 s
		wantErr(t, "ChangeVisibility of an ended lease past the time to live", e.changeVisErr("q", ds[0].Receipt, 0), model.ErrInvalidParameterValue)
		if err := e.deleteErr("q", ds[1].Receipt); err != nil {
			t.Fatalf("Delete of an ended lease past the time to live: %v, want success without effect", err)
		}
		e.eventuallyStats("q", 0, 0, 0)
		e.receiveNone("q")
		if err := e.b.DeleteQueue(e.ctx, "q"); err != nil {
			t.Fatal(err)
		}
	}
}

// testTTLBackingOff: a message backing off after a failure expires when its
// time to live passes during the backoff, and is never visible again.
func testTTLBackingOff(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{
		model.AttrVisibilityTimeout: "60",
		model.AttrRetryPolicy:       retryPolicy(20, 300, model.JitterNone),
	})
	e.send("q", withTTL("a", 30))
	d := e.receiveOne("q")
	e.advance(15 * time.Second)
	e.nack("q", d.Receipt, "boom", nil) // backs off until 35 s
	e.wantStats("q", 0, 0, 1)
	e.advance(14 * time.Second)
	e.clock.Settle(realTimeout)
	e.wantStats("q", 0, 0, 1)
	e.advance(time.Second) // 30 s: expired, backing off
	e.eventuallyStats("q", 0, 0, 0)
	e.advance(10 * time.Second)
	e.receiveNone("q")

	// An expired lease's backoff too.
	e.send("q", withTTL("b", 70))
	e.receiveOne("q")
	e.advance(60 * time.Second) // the lease ends 60 s after the send, backs off for 20 s
	e.eventuallyStats("q", 0, 0, 1)
	e.advance(10 * time.Second) // 70 s after the send
	e.eventuallyStats("q", 0, 0, 0)
	e.advance(20 * time.Second)
	e.receiveNone("q")
}

// testTTLDeadLetter: on a queue with a RedrivePolicy an expired message
// moves to the dead-letter queue (the default action), with the failure
// reason "expired" and its source; there it does not expire again.
func testTTLDeadLetter(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("src", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 3), model.AttrMessageTimeToLive: "10"})
	info := e.getQueue("src")
	if got := info.Config.ExpiredActionOf(); got != model.ExpiredDeadLetter {
		t.Fatalf("ExpiredActionOf = %s, want dead-letter", got)
	}
	res := e.send("src", model.SendEntry{Body: "a", Delay: dur(5 * time.Second)}, model.SendEntry{Body: "b"})
	e.advance(10 * time.Second)
	e.eventuallyStats("src", 0, 0, 0)
	e.eventuallyStats("dlq", 2, 0, 0)
	for _, r := range res {
		m := e.browsed("dlq", r.MessageID)
		if m.FailureReason != model.ReasonExpired || m.DeadLetterSource != "src" {
			t.Fatalf("dead letter %s: reason %q, source %q; want %q, src", m.Body, m.FailureReason, m.DeadLetterSource, model.ReasonExpired)
		}
	}
	e.advance(time.Hour)
	e.clock.Settle(realTimeout)
	e.wantStats("dlq", 2, 0, 0)
	d := e.receiveOne("dlq")
	if d.FailureReason != model.ReasonExpired {
		t.Fatalf("received dead letter reason %q, want %q", d.FailureReason, model.ReasonExpired)
	}
}

// testTTLDeadLetterFromFlight: a message in flight when its time to live
// passes moves to the dead-letter queue when its lease ends (its attempts
// kept), not before.
func testTTLDeadLetterFromFlight(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("src", map[string]string{
		model.AttrRedrivePolicy:        redrivePolicy("dlq", 5),
		model.AttrExpiredMessageAction: string(model.ExpiredDeadLetter),
		model.AttrVisibilityTimeout:    "30",
	})
	res := e.send("src", withTTL("a", 10))
	e.receiveOne("src")
	e.advance(10 * time.Second)
	e.clock.Settle(realTimeout)
	e.wantStats("src", 0, 1, 0)
	e.wantStats("dlq", 0, 0, 0)
	e.advance(20 * time.Second)
	e.eventuallyStats("src", 0, 0, 0)
	e.eventuallyStats("dlq", 1, 0, 0)
	m := e.browsed("dlq", res[0].MessageID)
	if m.FailureReason != model.ReasonExpired || m.Attempts != 1 {
		t.Fatalf("dead letter: reason %q, attempts %d; want %q, 1", m.FailureReason, m.Attempts, model.ReasonExpired)
	}
}

// testTTLDropDespiteRedrive: ExpiredMessageAction=drop deletes expired
// messages of a queue with a RedrivePolicy; its dead-letter queue gets
// none, but still gets the messages past their attempts.
func testTTLDropDespiteRedrive(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("src", map[string]string{
		model.AttrRedrivePolicy:        redrivePolicy("dlq", 1),
		model.AttrExpiredMessageAction: string(model.ExpiredDrop),
	})
	e.send("src", withTTL("a", 10), withTTL("b", 100))
	e.advance(10 * time.Second)
	e.eventuallyStats("src", 1, 0, 0)
	e.wantStats("dlq", 0, 0, 0)
	d := e.receiveOne("src")
	e.mustChangeVis("src", d.Receipt, 0) // its last attempt
	e.wantStats("src", 0, 0, 0)
	e.wantStats("dlq", 1, 0, 0)
}

// testTTLFifo: an expired FIFO message leaves its group, whose next message
// becomes available; one in flight holds its group until its lease ends,
// then expires and lets the group go on.
func testTTLFifo(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q.fifo", map[string]string{model.AttrFifoQueue: "true", model.AttrContentBasedDeduplication: "true", model.AttrVisibilityTimeout: "30"})
	entry := func(body string, ttl int) model.SendEntry {
		m := model.SendEntry{Body: body, GroupID: "g"}
		if ttl > 0 {
			m.Attributes = withTTL("", ttl).Attributes
		}
		return m
	}
	e.send("q.fifo", entry("a", 10), entry("b", 0), entry("c", 100), entry("d", 0))
	e.advance(10 * time.Second)
	e.eventuallyStats("q.fifo", 3, 0, 0)
	d := e.receiveOne("q.fifo")
	if d.Body != "b" {
		t.Fatalf("received %q, want b (a expired at the group's head)", d.Body)
	}
	e.mustDelete("q.fifo", d.Receipt)
	d = e.receiveOneFor("q.fifo", 100*time.Second) // c, whose time to live passes in flight
	if d.Body != "c" {
		t.Fatalf("received %q, want c", d.Body)
	}
	e.advance(95 * time.Second) // c expired at 100 s; its lease (until 110 s) holds the group
	e.clock.Settle(realTimeout)
	e.wantStats("q.fifo", 1, 1, 0)
	e.receiveNone("q.fifo")
	e.advance(10 * time.Second)
	e.eventuallyStats("q.fifo", 1, 0, 0)
	if d := e.receiveOne("q.fifo"); d.Body != "d" {
		t.Fatalf("received %q, want d", d.Body)
	}
}

// testTTLRestart: the expiries survive a restart: a ready, an in-flight and
// a delayed message expire after it at the instants they would have.
func testTTLRestart(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	e.createQueue("q", map[string]string{model.AttrMessageTimeToLive: "20", model.AttrVisibilityTimeout: "30"})
	e.send("q", model.SendEntry{Body: "leased"})
	e.receiveOne("q")
	e.send("q", model.SendEntry{Body: "ready"}, model.SendEntry{Body: "long", Attributes: withTTL("", 100).Attributes, Delay: dur(60 * time.Second)})
	e.advance(5 * time.Second)
	e.reopen()
	e.wantStats("q", 1, 1, 1)
	e.advance(15 * time.Second) // 20 s: ready expires; leased keeps its lease
	e.eventuallyStats("q", 0, 1, 1)
	e.reopen()
	e.wantStats("q", 0, 1, 1)
	e.advance(10 * time.Second) // 30 s: the lease ends, leased expires
	e.eventuallyStats("q", 0, 0, 1)
	e.reopen()
	e.advance(30 * time.Second) // 60 s: long is visible
	e.eventuallyStats("q", 1, 0, 0)
	e.reopen()
	e.advance(40 * time.Second) // 100 s: long expires, never received
	e.eventuallyStats("q", 0, 0, 0)
	e.receiveNone("q")
}

// testTTLBadInput: a time to live out of range, longer than the queue's
// retention, or not longer than the message's delay is refused with
// InvalidParameterValue (a message) or InvalidAttributeValue (a queue),
// and nothing is stored.
func testTTLBadInput(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrMessageRetentionPeriod: "3600"})
	e.createQueue("delayed", map[string]string{model.AttrDelaySeconds: "60", model.AttrMessageTimeToLive: "120"})
	for _, c := range []struct {
		queue string
		entry model.SendEntry
	}{
		{"q", withTTL("zero", 0)},
		{"q", withTTL("too long", model.MaxTimeToLiveSeconds+1)},
		{"q", withTTL("past retention", 3601)},
		{"q", model.SendEntry{Body: "a string", Attributes: map[string]model.MessageAttribute{model.MsgAttrTimeToLive: {DataType: "String", StringValue: "60"}}}},
		{"q", model.SendEntry{Body: "delay as long", Delay: dur(60 * time.Second), Attributes: withTTL("", 60).Attributes}},
		{"q", model.SendEntry{Body: "long delay past", Delay: dur(600 * time.Second), LongDelay: true, Attributes: withTTL("", 300).Attributes}},
		{"delayed", withTTL("queue delay as long", 60)},
		{"delayed", model.SendEntry{Body: "own delay past the default", Delay: dur(120 * time.Second), LongDelay: true}},
	} {
		wantErr(t, "send "+c.entry.Body, e.sendErr(c.queue, c.entry), model.ErrInvalidParameterValue)
	}
	e.wantStats("q", 0, 0, 0)
	e.wantStats("delayed", 0, 0, 0)
	e.send("delayed", model.SendEntry{Body: "own delay 0", Delay: dur(0), Attributes: withTTL("", 30).Attributes}, model.SendEntry{Body: "the queue's"})
	e.wantStats("delayed", 1, 0, 1)

	for _, attrs := range []map[string]string{
		{model.AttrMessageTimeToLive: "3601"},
		{model.AttrMessageTimeToLive: strconv.Itoa(model.MaxTimeToLiveSeconds + 1)},
		{model.AttrMessageTimeToLive: "-1"},
		{model.AttrMessageTimeToLive: "ten"},
		{model.AttrMessageTimeToLive: "60", model.AttrDelaySeconds: "60"},
		{model.AttrExpiredMessageAction: "dead-letter"},
		{model.AttrExpiredMessageAction: "archive"},
	} {
		attrs[model.AttrMessageRetentionPeriod] = "3600"
		_, err := e.b.CreateQueue(e.ctx, "bad", attrs, nil)
		wantErr(t, "CreateQueue", err, model.ErrInvalidAttributeValue)
		wantErr(t, "SetQueueAttributes", e.b.SetQueueAttributes(e.ctx, "q", attrs), model.ErrInvalidAttributeValue)
	}
	// The rules hold against a later change of the other attributes.
	if err := e.b.SetQueueAttributes(e.ctx, "q", map[string]string{model.AttrMessageTimeToLive: "600"}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "lowering the retention below the time to live",
		e.b.SetQueueAttributes(e.ctx, "q", map[string]string{model.AttrMessageRetentionPeriod: "599"}), model.ErrInvalidAttributeValue)
	wantErr(t, "raising the delay to the time to live",
		e.b.SetQueueAttributes(e.ctx, "q", map[string]string{model.AttrDelaySeconds: "600"}), model.ErrInvalidAttributeValue)
	if got := e.getQueue("q").Config; got.Retention != time.Hour || got.Delay != 0 || got.TimeToLive != 10*time.Minute {
		t.Fatalf("after the refusals: retention %v, delay %v, time to live %v", got.Retention, got.Delay, got.TimeToLive)
	}
}

// testTTLObserver: each expiry counts once as "expired"; one moved to the
// dead-letter queue counts as "dead_lettered" too.
func testTTLObserver(t *testing.T, s suite) {
	o := &countObserver{counts: map[string]int{}, refused: map[string]int{}}
	e := s.setup(t, func(c *broker.Config) { c.Observer = o })
	e.createQueue("dlq", nil)
	e.createQueue("src", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 3)})
	e.createQueue("plain", nil)
	e.send("src", withTTL("a", 10), withTTL("b", 10))
	e.send("plain", withTTL("c", 10))
	e.advance(10 * time.Second)
	e.eventuallyStats("dlq", 2, 0, 0)
	e.eventuallyStats("plain", 0, 0, 0)
	eventually(t, "the expiries counted", func() bool {
		return o.get("src expired") == 2 && o.get("src dead_lettered") == 2 && o.get("plain expired") == 1
	})
}

// testTTLRetentionEqualsTTL: a queue whose MessageTimeToLive equals its
// MessageRetentionPeriod dead-letters its messages when both pass (the time
// to live goes first: that is why one sets them equal), a message whose
// lease ends at that instant too, whoever comes first: the sweeper (the
// test reads only the dead-letter queue's counts until then), or a
// receive. A message still held by a live lease then is deleted by the
// retention, as SQS deletes a message in flight past its retention.
func testTTLRetentionEqualsTTL(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	attrs := map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 3),
		model.AttrMessageRetentionPeriod: "60", model.AttrMessageTimeToLive: "60"}
	e.createQueue("swept", attrs)
	e.createQueue("received", attrs)
	var want []model.SendResult
	for _, q := range []string{"swept", "received"} {
		want = append(want, e.send(q, model.SendEntry{Body: q + " leased"})[0])
		e.receiveOneFor(q, 60*time.Second) // its lease ends as its time to live and retention do
		e.send(q, model.SendEntry{Body: q + " held"})
		e.receiveOneFor(q, 120*time.Second) // a live lease at 60 s
		want = append(want, e.send(q, model.SendEntry{Body: q + " ready"})[0])
		e.wantStats(q, 1, 2, 0)
	}
	e.advance(59 * time.Second)
	e.clock.Settle(realTimeout)
	e.wantStats("dlq", 0, 0, 0)
	e.advance(time.Second)
	e.receiveNone("received") // races the sweeper: either expires them
	e.eventuallyStats("dlq", 4, 0, 0)
	e.eventuallyStats("swept", 0, 0, 0) // held: deleted
	e.eventuallyStats("received", 0, 0, 0)
	for _, r := range want {
		if m := e.browsed("dlq", r.MessageID); m.FailureReason != model.ReasonExpired {
			t.Fatalf("dead letter %s: reason %q, want %q", m.Body, m.FailureReason, model.ReasonExpired)
		}
	}
}

// testTTLSweeperBehindHeld: the sweeper wakes at the expiry of a ready
// message even when many messages with earlier expiries are held by long
// leases (their expiries passed, their leases have not ended), and expires
// it with no receive or GetQueue of its queue (the test reads only the
// dead-letter queue's counts).
func testTTLSweeperBehindHeld(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("src", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 3)})
	const held = 120
	for i := 0; i < held/10; i++ {
		es := make([]model.SendEntry, 10)
		for j := range es {
			es[j] = withTTL("held", 10)
		}
		e.send("src", es...)
		e.receiveN(model.ReceiveRequest{Queue: "src", MaxMessages: 10, Visibility: dur(time.Hour)}, 10)
	}
	late := e.send("src", withTTL("late", 20))[0]
	e.advance(10 * time.Second) // the held messages' expiries pass: the sweeper runs and plans its next wake
	e.clock.Settle(realTimeout)
	e.advance(10 * time.Second) // 20 s: late expires
	e.eventuallyStats("dlq", 1, 0, 0)
	if m := e.browsed("dlq", late.MessageID); m.Body != "late" || m.FailureReason != model.ReasonExpired {
		t.Fatalf("dead letter %q, reason %q; want late, %q", m.Body, m.FailureReason, model.ReasonExpired)
	}
}

// testTTLShortenedLease: on a queue without a retry or redrive policy, a
// lease shortened after its message's time to live passed expires the
// message when the new lease ends, with no call on the queue (the expired
// counter shows it; a GetQueue would expire it itself).
func testTTLShortenedLease(t *testing.T, s suite) {
	o := &countObserver{counts: map[string]int{}, refused: map[string]int{}}
	e := s.setup(t, func(c *broker.Config) { c.Observer = o })
	e.createQueue("q", nil)
	e.send("q", withTTL("a", 10))
	d := e.receiveOneFor("q", time.Hour)
	e.advance(10 * time.Second) // expired, held: the sweeper plans its next wake
	e.clock.Settle(realTimeout)
	e.advance(5 * time.Second)
	e.mustChangeVis("q", d.Receipt, 5*time.Second) // the lease ends at 20 s
	e.clock.Settle(realTimeout)
	if n := o.get("q expired"); n != 0 {
		t.Fatalf("expired %d before the lease's end, want 0", n)
	}
	e.advance(5 * time.Second)
	eventually(t, "the message expired at its shortened lease's end", func() bool { return o.get("q expired") == 1 })
}

// testTTLSettledDedup: on a DeduplicationUntil=settled queue, a message
// whose time to live passed no longer holds its dedup id (past the window):
// a send of the id is stored, whether or not the sweeper removed the
// expired message first; one still held by a live lease holds it until its
// lease ends.
func testTTLSettledDedup(t *testing.T, s suite) {
	e := s.setup(t)
	e.settledQueue("q", nil) // window 60 s
	e.send("q", model.SendEntry{ID: "m", Body: "old", DedupID: "u", Attributes: withTTL("", 120).Attributes})
	e.advance(120 * time.Second)
	r := e.dsend("q", "u", "new")
	d := e.receiveOneFor("q", time.Hour)
	if d.Body != "new" || d.ID != r.MessageID {
		t.Fatalf("received %q (%s), want new (%s)", d.Body, d.ID, r.MessageID)
	}

	// Held by a live lease past its time to live: still a duplicate.
	e.send("q", model.SendEntry{ID: "m", Body: "held", DedupID: "v", Attributes: withTTL("", 120).Attributes})
	h := e.receiveN(model.ReceiveRequest{Queue: "q", MaxMessages: 10, Visibility: dur(180 * time.Second)}, 1)[0]
	if h.Body != "held" {
		t.Fatalf("received %q, want held", h.Body)
	}
	e.advance(120 * time.Second)
	wantSame(t, "a send of the id of a held expired message", e.dsend("q", "v", "dup"), model.SendResult{MessageID: h.ID})
	e.advance(60 * time.Second) // the lease ends: the message expires
	r = e.dsend("q", "v", "after")
	if r.MessageID == h.ID {
		t.Fatalf("a send after the expired message's lease ended was answered as its duplicate")
	}
}

// testTTLMaxDepth: MaxDepth does not count the messages whose time to live
// passed and that no live lease holds, whether or not the sweeper removed
// them yet; one held by a live lease counts until its lease ends.
func testTTLMaxDepth(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrMaxDepth: "2"})
	e.send("q", withTTL("held", 10), withTTL("ready", 10))
	wantDepthError(t, "a send to the full queue", e.sendErr("q", model.SendEntry{Body: "refused"}), "q", 2, 2, false)
	if d := e.receiveOneFor("q", time.Hour); d.Body != "held" {
		t.Fatalf("received %q, want held", d.Body)
	}
	e.advance(10 * time.Second)
	e.send("q", model.SendEntry{Body: "after"}) // ready expired: room for one
	wantDepthError(t, "a send past the held message and the one sent after", e.sendErr("q", model.SendEntry{Body: "refused"}), "q", 2, 2, false)
}

// testTTLFifoWaiter: a receive waiting on a FIFO queue whose group's head
// backs off past its expiry gets the group's next message at that expiry.
func testTTLFifoWaiter(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q.fifo", map[string]string{model.AttrFifoQueue: "true", model.AttrContentBasedDeduplication: "true",
		model.AttrVisibilityTimeout: "60", model.AttrRetryPolicy: retryPolicy(100, 300, model.JitterNone)})
	e.send("q.fifo", model.SendEntry{Body: "a", GroupID: "g", Attributes: withTTL("", 30).Attributes})
	e.send("q.fifo", model.SendEntry{Body: "b", GroupID: "g"})
	d := e.receiveOne("q.fifo")
	e.nack("q.fifo", d.Receipt, "boom", nil) // backs off until 100 s, holding the group
	e.advance(15 * time.Second)
	ch := e.goWait(context.Background(), "q.fifo", 20*time.Second)
	e.advance(10 * time.Second)
	e.notYet(ch, "before the expiry")
	e.advance(5 * time.Second) // 30 s: a expires
	r := e.await(ch, realTimeout, "after the expiry")
	if r.err != nil || len(r.ds) != 1 || r.ds[0].Body != "b" {
		t.Fatalf("got %v (%v), want b", bodies(r.ds), r.err)
	}
}

// testTTLAtMostOnce: an at-most-once queue never hands out an expired
// message (its delivery would delete it as delivered).
func testTTLAtMostOnce(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrDeliveryMode: model.DeliveryAtMostOnce})
	e.send("q", withTTL("a", 10), model.SendEntry{Body: "b"})
	e.advance(10 * time.Second)
	if d := e.receiveOne("q"); d.Body != "b" {
		t.Fatalf("received %q, want b", d.Body)
	}
	e.receiveNone("q")
	e.wantStats("q", 0, 0, 0)
}

// testTTLFifoDeadLetter: the expired messages of a FIFO queue move to its
// FIFO dead-letter queue in their group's order, with new sequence numbers
// there; the group's message without a time to live stays, and is next.
func testTTLFifoDeadLetter(t *testing.T, s suite) {
	e := s.setup(t)
	fifo := map[string]string{model.AttrFifoQueue: "true", model.AttrContentBasedDeduplication: "true"}
	e.createQueue("dlq.fifo", fifo)
	e.createQueue("src.fifo", map[string]string{model.AttrFifoQueue: "true", model.AttrContentBasedDeduplication: "true",
		model.AttrRedrivePolicy: redrivePolicy("dlq.fifo", 3)})
	entry := func(body string, ttl int) model.SendEntry {
		m := model.SendEntry{Body: body, GroupID: "g"}
		if ttl > 0 {
			m.Attributes = withTTL("", ttl).Attributes
		}
		return m
	}
	e.send("src.fifo", entry("a", 10), entry("b", 10), entry("c", 0))
	e.advance(10 * time.Second)
	e.eventuallyStats("dlq.fifo", 2, 0, 0)
	for _, want := range []string{"a", "b"} {
		d := e.receiveOne("dlq.fifo")
		if d.Body != want || d.FailureReason != model.ReasonExpired {
			t.Fatalf("dead letter %q (reason %q), want %s (%q)", d.Body, d.FailureReason, want, model.ReasonExpired)
		}
		e.mustDelete("dlq.fifo", d.Receipt)
	}
	if d := e.receiveOne("src.fifo"); d.Body != "c" {
		t.Fatalf("received %q, want c", d.Body)
	}
}
