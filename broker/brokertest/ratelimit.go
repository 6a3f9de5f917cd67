package brokertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
)

// The rate limits of a queue (MaxInFlight, MaxReceivesPerSecond;
// plan.ClaimRoom): a receive gets what the limits allow now, or waits
// within its wait time as on an empty queue, never an error; room under
// MaxInFlight comes back with a delete, a nack or a lease's end, which wake
// the waiting receives; the rate hands out a burst of one second's worth,
// then one message per interval, and a waiting receive is served when the
// next one may go.
var rateLimitTests = []testCase{
	{"MaxInFlightCapsAReceive", testMaxInFlightCaps},
	{"MaxInFlightWaitsForADelete", testMaxInFlightDelete},
	{"MaxInFlightWaitsForANack", testMaxInFlightNack},
	{"MaxInFlightWaitsForALeaseEnd", testMaxInFlightLeaseEnd},
	{"MaxInFlightWaitsForRetention", testMaxInFlightRetention},
	{"MaxInFlightFIFO", testMaxInFlightFifo},
	{"MaxInFlightUnderTheBrokerCap", testMaxInFlightBrokerCap},
	{"MaxInFlightStreams", testMaxInFlightStreams},
	{"RateBurstThenInterval", testRateBurst},
	{"RateServesEveryWaiter", testRateEveryWaiter},
	{"RateWaitEndsFirst", testRateWaitEndsFirst},
	{"RateSlowerThanOneASecond", testRateSlow},
	{"RateFIFO", testRateFifo},
	{"RateAtMostOnce", testRateAtMostOnce},
	{"ChangedAndRemoved", testLimitsChanged},
	{"RemovedWakesWaitingReceive", testLimitsRemovedWakes},
	{"Refusals", testLimitsRefused},
}

// sendN sends n messages m0, m1, … to queue.
func (e *env) sendN(queue string, n int) {
	e.t.Helper()
	for i := range n {
		e.sendBody(queue, fmt.Sprint("m", i))
	}
}

// receiveAll short-polls queue once for up to 10 messages.
func (e *env) receiveAll(queue string) []model.Delivery {
	e.t.Helper()
	ds, err := e.receive(model.ReceiveRequest{Queue: queue, MaxMessages: 10, WaitTime: dur(0)})
	if err != nil {
		e.t.Fatalf("short-poll Receive(%s): %v", queue, err)
	}
	return ds
}

// wantReceived checks a waiting receive's result: no error, n messages.
func wantReceived(t *testing.T, what string, r recvResult, n int) []model.Delivery {
	t.Helper()
	if r.err != nil || len(r.ds) != n {
		t.Fatalf("%s: %d messages, err %v; want %d", what, len(r.ds), r.err, n)
	}
	return r.ds
}

// testMaxInFlightCaps: a receive of 10 gets the room left under the cap,
// and at the cap a short poll gets nothing, with no error.
func testMaxInFlightCaps(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrMaxInFlight: "3"})
	e.sendN("q", 10)
	if ds := e.receiveAll("q"); len(ds) != 3 {
		t.Fatalf("a receive of 10 under MaxInFlight 3 got %d", len(ds))
	}
	e.wantStats("q", 7, 3, 0)
	e.receiveNone("q")
	// A long poll at the cap waits its whole wait and gets nothing.
	ch := e.goWait(e.ctx, "q", 2*time.Second)
	e.notYet(ch, "a long poll at the queue's MaxInFlight")
	e.advance(2 * time.Second)
	wantReceived(t, "a long poll at the cap at the end of its wait", e.await(ch, promptly, "a long poll at the cap"), 0)
	e.wantStats("q", 7, 3, 0)
}

// testMaxInFlightDelete: a receive waiting at the cap returns as soon as a
// delete makes room, with at most the room left, without the clock moving.
func testMaxInFlightDelete(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrMaxInFlight: "2"})
	e.sendN("q", 5)
	ds := e.receiveAll("q")
	if len(ds) != 2 {
		t.Fatalf("got %d, want 2", len(ds))
	}
	before := e.clock.Now()
	ch := e.goWait(e.ctx, "q", model.MaxWaitTime)
	e.notYet(ch, "a long poll at the cap")
	e.mustDelete("q", ds[0].Receipt)
	wantReceived(t, "the waiting receive after a delete", e.await(ch, promptly, "a long poll after a delete"), 1)
	if !e.clock.Now().Equal(before) {
		t.Fatal("the clock moved")
	}
	e.wantStats("q", 2, 2, 0)
}

// testMaxInFlightNack: a nack (a visibility change to 0) makes room: the
// waiting receive gets a message.
func testMaxInFlightNack(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrMaxInFlight: "1"})
	e.sendN("q", 2)
	d := e.receiveOne("q")
	ch := e.goWait(e.ctx, "q", model.MaxWaitTime)
	e.notYet(ch, "a long poll at the cap")
	e.mustChangeVis("q", d.Receipt, 0)
	wantReceived(t, "the waiting receive after a nack", e.await(ch, promptly, "a long poll after a nack"), 1)
	e.wantStats("q", 1, 1, 0)
}

// testMaxInFlightLeaseEnd: a lease's end makes room: the waiting receive
// gets a message when the clock reaches it.
func testMaxInFlightLeaseEnd(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrMaxInFlight: "1"})
	e.sendN("q", 2)
	e.receiveOneFor("q", 5*time.Second)
	ch := e.goWait(e.ctx, "q", model.MaxWaitTime)
	e.notYet(ch, "a long poll at the cap")
	e.advance(4 * time.Second)
	e.notYet(ch, "a long poll at the cap before the lease ends")
	e.advance(time.Second)
	wantReceived(t, "the waiting receive at the lease's end", e.await(ch, promptly, "a long poll at the lease's end"), 1)
	e.wantStats("q", 1, 1, 0)
}

// testMaxInFlightRetention: an in-flight message that its queue's retention
// deletes makes room: a receive waiting at the cap gets the ready message
// when the clock passes the in-flight one's retention, long before its
// lease ends.
func testMaxInFlightRetention(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrMaxInFlight: "1", model.AttrMessageRetentionPeriod: "60"})
	e.sendBody("q", "m1")
	e.receiveOneFor("q", 12*time.Hour)
	e.advance(50 * time.Second)
	e.sendBody("q", "m2")
	e.advance(9500 * time.Millisecond) // 59.5 s after m1's send
	ch := e.goWait(e.ctx, "q", model.MaxWaitTime)
	e.notYet(ch, "a long poll at the cap")
	e.advance(600 * time.Millisecond) // m1 is past its retention; m2 is not
	got := wantReceived(t, "the waiting receive once the in-flight message expired",
		e.await(ch, promptly, "a long poll after the in-flight message's retention"), 1)
	if got[0].Body != "m2" {
		t.Fatalf("got %s, want m2", got[0].Body)
	}
	e.wantStats("q", 0, 1, 0)
}

// testMaxInFlightFifo: on a FIFO queue too, the cap bounds a receive and
// a receive at it waits (no error) until a delete makes room.
func testMaxInFlightFifo(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q.fifo", map[string]string{model.AttrFifoQueue: "true", model.AttrContentBasedDeduplication: "true",
		model.AttrMaxInFlight: "2"})
	for _, m := range []struct{ group, body string }{{"a", "a1"}, {"a", "a2"}, {"a", "a3"}, {"b", "b1"}} {
		e.send("q.fifo", model.SendEntry{Body: m.body, GroupID: m.group})
	}
	ds := e.receiveAll("q.fifo")
	if got := bodies(ds); len(got) != 2 || got[0] != "a1" || got[1] != "a2" {
		t.Fatalf("a receive of 10 under MaxInFlight 2 got %v, want a1 a2", got)
	}
	e.receiveNone("q.fifo") // b1 is ready, but the queue is at its cap
	ch := e.goWait(e.ctx, "q.fifo", model.MaxWaitTime)
	e.notYet(ch, "a long poll at the cap")
	e.mustDelete("q.fifo", ds[0].Receipt)
	got := wantReceived(t, "the waiting receive after a delete", e.await(ch, promptly, "a long poll after a delete"), 1)
	if got[0].Body != "b1" {
		t.Fatalf("got %s, want b1 (group a is still held by a2)", got[0].Body)
	}
}

// testMaxInFlightBrokerCap: the broker's cap keeps its SQS answer
// (OverLimit on a standard queue) when it is reached before the queue's.
func testMaxInFlightBrokerCap(t *testing.T, s suite) {
	e := s.setup(t, func(c *broker.Config) { c.MaxInFlight = 2 })
	e.createQueue("q", map[string]string{model.AttrMaxInFlight: "5"})
	e.sendN("q", 5)
	if ds := e.receiveAll("q"); len(ds) != 2 {
		t.Fatalf("got %d, want the broker's cap of 2", len(ds))
	}
	_, err := e.receive(model.ReceiveRequest{Queue: "q", MaxMessages: 10, WaitTime: dur(0)})
	wantErr(t, "a receive at the broker's cap", err, model.ErrOverLimit)
}

// testMaxInFlightStreams: a consumer stream's claims keep under the cap
// too, and get more when a settlement makes room.
func testMaxInFlightStreams(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrMaxInFlight: "2"})
	e.sendN("q", 5)
	c := e.consume(broker.ConsumerConfig{Queue: "q", Credit: 10})
	ds := e.nextN(c, 2)
	e.nothingFor(c, "a stream on a queue at its MaxInFlight")
	e.wantStats("q", 3, 2, 0)
	e.settle(c, ack(ds[0]))
	e.nextN(c, 1)
	e.wantStats("q", 2, 2, 0)
}

// testRateBurst: 2 a second: an idle queue hands out a burst of 2, then
// one every 500 ms; a receive waiting for the next one is served at that
// instant, and only one message comes however long the queue is.
func testRateBurst(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrMaxReceivesPerSecond: "2"})
	e.sendN("q", 10)
	if ds := e.receiveAll("q"); len(ds) != 2 {
		t.Fatalf("the burst: got %d, want 2", len(ds))
	}
	e.receiveNone("q")
	start := e.clock.Now()
	ch := e.goWait(e.ctx, "q", 5*time.Second)
	e.notYet(ch, "a long poll after the burst")
	e.advance(499 * time.Millisecond)
	e.notYet(ch, "a long poll 499 ms after the burst")
	e.advance(time.Millisecond)
	wantReceived(t, "the waiting receive at the next instant", e.await(ch, promptly, "a long poll at the rate's next instant"), 1)
	if got := e.clock.Now().Sub(start); got != 500*time.Millisecond {
		t.Fatalf("served after %v, want 500ms", got)
	}
	e.receiveNone("q")
	e.advance(500 * time.Millisecond)
	if ds := e.receiveAll("q"); len(ds) != 1 {
		t.Fatalf("one interval on: got %d, want 1", len(ds))
	}
	// Idle for long: a burst of one second's worth again, no more.
	e.advance(time.Minute)
	if ds := e.receiveAll("q"); len(ds) != 2 {
		t.Fatalf("after a minute idle: got %d, want the burst of 2", len(ds))
	}
	e.wantStats("q", 8, 2, 0) // the first four leases ended in that minute
}

// testRateEveryWaiter: a send of more messages than the rate lets go at
// once still serves every waiting receive: two wait on an empty queue
// limited to 2 a second, a send of 3 gives one of them the burst of 2, and
// the other gets the third at the rate's next instant, 500 ms later.
func testRateEveryWaiter(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrMaxReceivesPerSecond: "2"})
	w1 := e.goWait(e.ctx, "q", model.MaxWaitTime)
	w2 := e.goWait(e.ctx, "q", model.MaxWaitTime)
	e.send("q", model.SendEntry{Body: "a"}, model.SendEntry{Body: "b"}, model.SendEntry{Body: "c"})
	var other <-chan recvResult
	select {
	case r := <-w1:
		wantReceived(t, "the first waiting receive served", r, 2)
		other = w2
	case r := <-w2:
		wantReceived(t, "the first waiting receive served", r, 2)
		other = w1
	case <-time.After(promptly):
		t.Fatal("no waiting receive got the burst")
	}
	e.notYet(other, "the other waiting receive before the rate's next instant")
	e.advance(499 * time.Millisecond)
	e.notYet(other, "the other waiting receive 499 ms after the burst")
	e.advance(time.Millisecond)
	wantReceived(t, "the other waiting receive at the rate's next instant",
		e.await(other, promptly, "the other waiting receive at the rate's next instant"), 1)
}

// testRateWaitEndsFirst: a receive whose wait ends before the rate's next
// instant gets nothing, and takes nothing from the next receive.
func testRateWaitEndsFirst(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrMaxReceivesPerSecond: "1"})
	e.sendN("q", 3)
	e.receiveOne("q")
	ch := e.goWait(e.ctx, "q", 600*time.Millisecond)
	e.advance(600 * time.Millisecond)
	wantReceived(t, "a long poll whose wait ends first", e.await(ch, promptly, "a long poll whose wait ends"), 0)
	ch = e.goWait(e.ctx, "q", 5*time.Second)
	e.notYet(ch, "a long poll before the next instant")
	e.advance(400 * time.Millisecond)
	wantReceived(t, "the next receive at the next instant", e.await(ch, promptly, "a long poll at the next instant"), 1)
}

// testRateSlow: 0.5 a second: one message, then one every 2 s.
func testRateSlow(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrMaxReceivesPerSecond: "0.5"})
	e.sendN("q", 5)
	if ds := e.receiveAll("q"); len(ds) != 1 {
		t.Fatalf("got %d, want 1", len(ds))
	}
	e.advance(time.Second)
	e.receiveNone("q")
	e.advance(time.Second)
	if ds := e.receiveAll("q"); len(ds) != 1 {
		t.Fatalf("2 s on: got %d, want 1", len(ds))
	}
}

// testRateFifo: a FIFO queue's receives keep to the rate too.
func testRateFifo(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q.fifo", map[string]string{model.AttrFifoQueue: "true", model.AttrContentBasedDeduplication: "true",
		model.AttrMaxReceivesPerSecond: "1"})
	for _, b := range []string{"a1", "a2", "a3"} {
		e.send("q.fifo", model.SendEntry{Body: b, GroupID: "a"})
	}
	ds := e.receiveAll("q.fifo")
	if got := bodies(ds); len(got) != 1 || got[0] != "a1" {
		t.Fatalf("got %v, want a1", got)
	}
	e.mustDelete("q.fifo", ds[0].Receipt)
	e.receiveNone("q.fifo")
	ch := e.goWait(e.ctx, "q.fifo", 5*time.Second)
	e.advance(time.Second)
	if got := wantReceived(t, "a FIFO receive at the next instant", e.await(ch, promptly, "a FIFO long poll"), 1); got[0].Body != "a2" {
		t.Fatalf("got %s, want a2", got[0].Body)
	}
}

// testRateAtMostOnce: an at-most-once queue's receives (which remove the
// messages) keep to the rate.
func testRateAtMostOnce(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrDeliveryMode: model.DeliveryAtMostOnce, model.AttrMaxReceivesPerSecond: "3"})
	e.sendN("q", 10)
	if ds := e.receiveAll("q"); len(ds) != 3 {
		t.Fatalf("got %d, want 3", len(ds))
	}
	e.receiveNone("q")
	e.wantStats("q", 7, 0, 0)
}

// testLimitsChanged: SetQueueAttributes changes and removes the limits
// for the receives after it.
func testLimitsChanged(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrMaxInFlight: "1", model.AttrMaxReceivesPerSecond: "1"})
	e.sendN("q", 20)
	if ds := e.receiveAll("q"); len(ds) != 1 {
		t.Fatalf("got %d, want 1", len(ds))
	}
	set := func(attrs map[string]string) {
		t.Helper()
		if err := e.b.SetQueueAttributes(e.ctx, "q", attrs); err != nil {
			t.Fatalf("SetQueueAttributes(%v): %v", attrs, err)
		}
	}
	set(map[string]string{model.AttrMaxInFlight: "3"})
	e.receiveNone("q") // the rate still holds
	// A raised rate applies from its own interval on: the second's worth
	// taken at 1 a second counts as a second's worth at 100 (10 ms each).
	set(map[string]string{model.AttrMaxReceivesPerSecond: "100"})
	e.advance(20 * time.Millisecond)
	if ds := e.receiveAll("q"); len(ds) != 2 {
		t.Fatalf("MaxInFlight raised to 3 and the rate to 100, 20 ms on: got %d, want 2", len(ds))
	}
	set(map[string]string{model.AttrMaxInFlight: ""})
	e.advance(100 * time.Millisecond)
	if ds := e.receiveAll("q"); len(ds) != 10 {
		t.Fatalf("MaxInFlight removed, 100 ms on at 100 a second: got %d, want 10", len(ds))
	}
	if got := e.getQueue("q").Config.Attributes(); got[model.AttrMaxReceivesPerSecond] != "100" || got[model.AttrMaxInFlight] != "" {
		t.Fatalf("attributes %v", got)
	}
	set(map[string]string{model.AttrMaxReceivesPerSecond: "1"})
	e.advance(time.Minute) // the leases end too: 20 messages visible
	if ds := e.receiveAll("q"); len(ds) != 1 {
		t.Fatalf("the rate lowered to 1: got %d, want 1", len(ds))
	}
	e.receiveNone("q")
	set(map[string]string{model.AttrMaxReceivesPerSecond: ""})
	if ds := e.receiveAll("q"); len(ds) != 10 {
		t.Fatalf("the rate removed: got %d, want 10", len(ds))
	}
	if _, ok := e.getQueue("q").Config.Attributes()[model.AttrMaxReceivesPerSecond]; ok {
		t.Fatal("the removed rate is still listed")
	}
}

// testLimitsRemovedWakes: removing a limit wakes a receive it held.
func testLimitsRemovedWakes(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrMaxInFlight: "1"})
	e.sendN("q", 3)
	e.receiveOne("q")
	ch := e.goWait(e.ctx, "q", model.MaxWaitTime)
	e.notYet(ch, "a long poll at the cap")
	if err := e.b.SetQueueAttributes(e.ctx, "q", map[string]string{model.AttrMaxInFlight: ""}); err != nil {
		t.Fatal(err)
	}
	wantReceived(t, "the waiting receive once the cap is removed", e.await(ch, promptly, "a long poll after the cap's removal"), 2)
}

// testLimitsRefused: bad values are refused with InvalidAttributeValue, at
// creation and by SetQueueAttributes, and change nothing.
func testLimitsRefused(t *testing.T, s suite) {
	e := s.setup(t)
	for _, bad := range []map[string]string{
		{model.AttrMaxInFlight: "0"},
		{model.AttrMaxInFlight: "-3"},
		{model.AttrMaxInFlight: "120001"},
		{model.AttrMaxReceivesPerSecond: "0"},
		{model.AttrMaxReceivesPerSecond: "-1"},
		{model.AttrMaxReceivesPerSecond: "100001"},
		{model.AttrMaxReceivesPerSecond: "fast"},
		{model.AttrMaxInFlight: "2", model.AttrDeliveryMode: model.DeliveryAtMostOnce},
	} {
		_, err := e.b.CreateQueue(e.ctx, "bad", bad, nil)
		wantErr(t, fmt.Sprintf("CreateQueue with %v", bad), err, model.ErrInvalidAttributeValue)
	}
	e.createQueue("q", map[string]string{model.AttrMaxInFlight: "4"})
	err := e.b.SetQueueAttributes(e.ctx, "q", map[string]string{model.AttrMaxReceivesPerSecond: "-0.5"})
	wantErr(t, "SetQueueAttributes with a negative rate", err, model.ErrInvalidAttributeValue)
	err = e.b.SetQueueAttributes(e.ctx, "q", map[string]string{model.AttrMaxInFlight: "0"})
	wantErr(t, "SetQueueAttributes with MaxInFlight 0", err, model.ErrInvalidAttributeValue)
	if got := e.getQueue("q").Config; got.MaxInFlight != 4 || got.ReceiveRate != 0 {
		t.Fatalf("after the refusals: MaxInFlight %d, rate %v", got.MaxInFlight, got.ReceiveRate)
	}
}
