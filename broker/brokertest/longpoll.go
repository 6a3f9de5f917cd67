package brokertest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

var longPollTests = []testCase{
	{"WakesOnSend", testLongPollWakesOnSend},
	{"WakesOnLeaseExpiry", testLongPollWakesOnLeaseExpiry},
	{"WakesOnDelayEnd", testLongPollWakesOnDelayEnd},
	{"WakesOnNack", testLongPollWakesOnNack},
	{"WakesOnDelaySentWhileWaiting", testLongPollDelaySentWhileWaiting},
	{"WakesOnLeaseTakenWhileWaiting", testLongPollLeaseTakenWhileWaiting},
	{"HeartbeatWhileWaiting", testLongPollHeartbeatWhileWaiting},
	{"TimesOutEmpty", testLongPollTimesOut},
	{"QueueDefaultWaitTime", testLongPollQueueDefault},
	{"CancelClaimsNothing", testLongPollCancel},
	{"CancelledBeforeReceive", testReceiveCancelledContext},
	{"ReceiveParameterRanges", testReceiveParameterRanges},
	{"MaxMessages", testReceiveMaxMessages},
}

func testLongPollWakesOnSend(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	now := e.clock.Now()
	ch := e.goWait(e.ctx, "q", 20*time.Second)
	e.notYet(ch, "long poll on an empty queue")
	start := time.Now()
	res := e.sendBody("q", "hello")
	r := e.await(ch, promptly, "long poll after a send (clock not advanced)")
	t.Logf("waiting receive returned %v after the send", time.Since(start))
	if r.err != nil || len(r.ds) != 1 || r.ds[0].ID != res.MessageID {
		t.Fatalf("long poll after a send: %d messages, err %v; want the sent message", len(r.ds), r.err)
	}
	if !e.clock.Now().Equal(now) {
		t.Fatal("the fake clock moved")
	}
}

func testLongPollWakesOnLeaseExpiry(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.sendBody("q", "a")
	d := e.receiveOneFor("q", 5*time.Second)
	ch := e.goWait(e.ctx, "q", 20*time.Second)
	e.advance(4 * time.Second)
	e.notYet(ch, "long poll while the lease holds")
	e.advance(time.Second)
	r := e.await(ch, promptly, "long poll after the lease expired")
	if r.err != nil || len(r.ds) != 1 || r.ds[0].ID != d.ID || r.ds[0].ReceiveCount != 2 {
		t.Fatalf("long poll after lease expiry: %d messages, err %v; want the message with ReceiveCount 2", len(r.ds), r.err)
	}
}

func testLongPollWakesOnDelayEnd(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	res := e.send("q", model.SendEntry{Body: "a", Delay: dur(10 * time.Second)})[0]
	ch := e.goWait(e.ctx, "q", 20*time.Second)
	e.advance(9 * time.Second)
	e.notYet(ch, "long poll while the message is delayed")
	e.advance(time.Second)
	r := e.await(ch, promptly, "long poll after the delay ended")
	if r.err != nil || len(r.ds) != 1 || r.ds[0].ID != res.MessageID {
		t.Fatalf("long poll after the delay: %d messages, err %v; want the delayed message", len(r.ds), r.err)
	}
}

func testLongPollWakesOnNack(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.sendBody("q", "a")
	d := e.receiveOne("q")
	ch := e.goWait(e.ctx, "q", 20*time.Second)
	e.notYet(ch, "long poll while the message is leased")
	e.mustChangeVis("q", d.Receipt, 0)
	r := e.await(ch, promptly, "long poll after a nack (clock not advanced)")
	if r.err != nil || len(r.ds) != 1 || r.ds[0].ID != d.ID {
		t.Fatalf("long poll after a nack: %d messages, err %v", len(r.ds), r.err)
	}
}

// testLongPollDelaySentWhileWaiting: a delayed message sent while a receive
// already waits ends that wait when its delay ends, well before the wait time.
func testLongPollDelaySentWhileWaiting(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	ch := e.goWait(e.ctx, "q", 20*time.Second)
	e.send("q", model.SendEntry{Body: "a", Delay: dur(5 * time.Second)})
	e.notYet(ch, "long poll while the message is delayed")
	e.advance(4 * time.Second)
	e.notYet(ch, "long poll 1 s before the delay ends")
	e.advance(time.Second)
	r := e.await(ch, promptly, "long poll after the delay of a message sent while it waited")
	if r.err != nil || len(r.ds) != 1 || r.ds[0].Body != "a" {
		t.Fatalf("long poll: %d messages, err %v; want the delayed message", len(r.ds), r.err)
	}
}

// testLongPollLeaseTakenWhileWaiting: a message leased by another consumer
// while a receive waits is returned to the waiter when that lease expires.
func testLongPollLeaseTakenWhileWaiting(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.createQueue("other", nil)
	e.sendBody("other", "x") // a message elsewhere must not matter
	ch := e.goWaitReq(e.ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 1, WaitTime: dur(20 * time.Second)})
	// The waiter takes the first message; a second waiter starts, and the
	// first consumer's lease of 5 s then expires.
	e.sendBody("q", "a")
	r := e.await(ch, promptly, "first waiter after a send")
	if len(r.ds) != 1 {
		t.Fatalf("first waiter: %d messages, err %v", len(r.ds), r.err)
	}
	e.mustChangeVis("q", r.ds[0].Receipt, 5*time.Second)
	ch = e.goWait(e.ctx, "q", 20*time.Second)
	e.advance(4 * time.Second)
	e.notYet(ch, "second waiter while the lease holds")
	e.advance(time.Second)
	r = e.await(ch, promptly, "second waiter after the lease expired")
	if r.err != nil || len(r.ds) != 1 || r.ds[0].ReceiveCount != 2 {
		t.Fatalf("second waiter: %d messages, err %v; want the message with ReceiveCount 2", len(r.ds), r.err)
	}
	// Again, with the lease taken after the waiter started.
	ch = e.goWait(e.ctx, "q", 20*time.Second)
	e.sendBody("q", "b")
	r = e.await(ch, promptly, "third waiter after a send")
	if len(r.ds) != 1 {
		t.Fatalf("third waiter: %d messages, err %v", len(r.ds), r.err)
	}
	ch = e.goWait(e.ctx, "q", 20*time.Second)
	e.mustChangeVis("q", r.ds[0].Receipt, 3*time.Second) // shortens a 30 s lease while ch waits
	e.advance(3 * time.Second)
	r = e.await(ch, promptly, "waiter after a lease shortened while it waited expired")
	if r.err != nil || len(r.ds) != 1 || r.ds[0].Body != "b" {
		t.Fatalf("waiter: %d messages, err %v; want b", len(r.ds), r.err)
	}
}

// testLongPollHeartbeatWhileWaiting: extending a lease while a receive
// waits for it keeps the message from the waiter until the new deadline.
func testLongPollHeartbeatWhileWaiting(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.sendBody("q", "a")
	d := e.receiveOneFor("q", 5*time.Second)
	ch := e.goWait(e.ctx, "q", 20*time.Second) // armed for the lease's end at +5 s at the latest
	e.mustChangeVis("q", d.Receipt, 15*time.Second)
	e.advance(5 * time.Second)
	e.notYet(ch, "long poll after the original lease end, before the extended one")
	e.advance(9 * time.Second)
	e.notYet(ch, "long poll 1 s before the extended lease ends")
	e.advance(time.Second)
	r := e.await(ch, promptly, "long poll after the extended lease ended")
	if r.err != nil || len(r.ds) != 1 || r.ds[0].ID != d.ID {
		t.Fatalf("long poll: %d messages, err %v", len(r.ds), r.err)
	}
}

// waitOut advances the clock in small steps until the waiting receive
// returns, and checks that it returned empty, no sooner than wait after
// start and (when maxWait > 0) no later than maxWait after it.
func (e *env) waitOut(ch <-chan recvResult, start time.Time, wait, maxWait time.Duration) {
	e.t.Helper()
	const step = 250 * time.Millisecond
	deadline := time.Now().Add(3 * realTimeout)
	lastStep := time.Now()
	for {
		select {
		case r := <-ch:
			elapsed := e.clock.Now().Sub(start)
			if r.err != nil || len(r.ds) != 0 {
				e.t.Fatalf("long poll of %v on an empty queue: %d messages, err %v", wait, len(r.ds), r.err)
			}
			if elapsed < wait {
				e.t.Fatalf("long poll of %v returned after %v on the clock", wait, elapsed)
			}
			if maxWait > 0 && elapsed > maxWait {
				e.t.Fatalf("long poll of %v returned only after %v on the clock", wait, elapsed)
			}
			return
		case <-time.After(pollInterval):
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("long poll of %v did not return: clock advanced %v in %v real time", wait, e.clock.Now().Sub(start), 3*realTimeout)
		}
		// Past the wait the clock slows down to a step per 50 ms of real
		// time: a receive that entered the backend a few steps late (its
		// deadline a little after start + wait) still sees its deadline
		// pass, and a loaded machine has 0.4 s of real time per 2 s of
		// clock to schedule the receive before maxWait is overrun.
		if e.clock.Now().Sub(start) < wait || time.Since(lastStep) >= 50*time.Millisecond {
			e.advance(step)
			lastStep = time.Now()
		}
	}
}

func testLongPollTimesOut(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	start := e.clock.Now()
	ch := e.goWait(e.ctx, "q", model.MaxWaitTime)
	e.waitOut(ch, start, model.MaxWaitTime, model.MaxWaitTime+2*time.Second)
}

func testLongPollQueueDefault(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrReceiveMessageWaitTimeSeconds: "5"})
	// No WaitTime in the request: the queue's 5 s applies.
	start := e.clock.Now()
	ch := e.goWaitReq(e.ctx, model.ReceiveRequest{Queue: "q"})
	e.waitOut(ch, start, 5*time.Second, 7*time.Second)
	// An explicit WaitTime of 0 overrides it: a short poll.
	ds, err := e.receive(model.ReceiveRequest{Queue: "q", WaitTime: dur(0)})
	if err != nil || len(ds) != 0 {
		t.Fatalf("short poll on a queue with a default wait: %d messages, err %v", len(ds), err)
	}
	// And the default long poll also wakes on a send.
	ch = e.goReceive(e.ctx, model.ReceiveRequest{Queue: "q"})
	e.notYet(ch, "default long poll")
	e.sendBody("q", "a")
	if r := e.await(ch, promptly, "default long poll after a send"); r.err != nil || len(r.ds) != 1 {
		t.Fatalf("default long poll after a send: %d messages, err %v", len(r.ds), r.err)
	}
}

func testLongPollCancel(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.send("q", model.SendEntry{Body: "delayed", Delay: dur(10 * time.Second)})
	ctx, cancel := context.WithCancel(e.ctx)
	ch := e.goWait(ctx, "q", 20*time.Second)
	e.notYet(ch, "long poll before cancel")
	cancel()
	r := e.await(ch, promptly, "long poll after its context was cancelled")
	if !errors.Is(r.err, context.Canceled) || len(r.ds) != 0 {
		t.Fatalf("cancelled long poll: %d messages, err %v; want none and context.Canceled", len(r.ds), r.err)
	}
	// Nothing was claimed: the message becomes visible and its first receive counts 1.
	e.advance(10 * time.Second)
	e.eventuallyStats("q", 1, 0, 0)
	if d := e.receiveOne("q"); d.ReceiveCount != 1 || d.Body != "delayed" {
		t.Fatalf("after a cancelled long poll got %q count %d, want delayed count 1", d.Body, d.ReceiveCount)
	}
	// Cancelling one waiter leaves the others waiting.
	ctx1, cancel1 := context.WithCancel(e.ctx)
	ch1 := e.goWait(ctx1, "q", 20*time.Second)
	ch2 := e.goWait(e.ctx, "q", 20*time.Second)
	cancel1()
	if r := e.await(ch1, promptly, "cancelled waiter"); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled waiter: err %v", r.err)
	}
	e.notYet(ch2, "the other waiter")
	e.sendBody("q", "b")
	if r := e.await(ch2, promptly, "remaining waiter after a send"); r.err != nil || len(r.ds) != 1 || r.ds[0].Body != "b" {
		t.Fatalf("remaining waiter: %d messages, err %v", len(r.ds), r.err)
	}
}

// testReceiveCancelledContext: a receive whose context is already cancelled
// either returns messages or returns ctx.Err() having claimed nothing.
func testReceiveCancelledContext(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("empty", nil)
	e.createQueue("q", nil)
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	ch := e.goReceive(ctx, model.ReceiveRequest{Queue: "empty", WaitTime: dur(20 * time.Second)})
	if r := e.await(ch, promptly, "long poll with a cancelled context"); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("long poll with a cancelled context on an empty queue: err %v, want context.Canceled", r.err)
	}
	e.sendBody("q", "a")
	ds, err := e.b.Receive(ctx, model.ReceiveRequest{Queue: "q", WaitTime: dur(20 * time.Second)})
	switch {
	case err != nil:
		wantErr(t, "receive with a cancelled context", err, context.Canceled)
		e.wantStats("q", 1, 0, 0)
		if d := e.receiveOne("q"); d.ReceiveCount != 1 {
			t.Fatalf("a cancelled receive claimed the message: ReceiveCount %d", d.ReceiveCount)
		}
	case len(ds) == 1:
		e.wantStats("q", 0, 1, 0)
	default:
		t.Fatalf("receive with a cancelled context returned %d messages and no error", len(ds))
	}
}

func testReceiveParameterRanges(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.sendBody("q", "a")
	bad := []model.ReceiveRequest{
		{MaxMessages: 11},
		{MaxMessages: -1},
		{WaitTime: dur(model.MaxWaitTime + time.Second)},
		{WaitTime: dur(-time.Second)},
		{Visibility: dur(model.MaxVisibilityTimeout + time.Second)},
		{Visibility: dur(-time.Second)},
	}
	for _, req := range bad {
		req.Queue = "q"
		_, err := e.receive(req)
		wantErr(t, fmt.Sprintf("Receive(MaxMessages %d, WaitTime %v, Visibility %v)", req.MaxMessages, req.WaitTime, req.Visibility),
			err, model.ErrInvalidParameterValue)
	}
	e.wantStats("q", 1, 0, 0)
	// MaxMessages 0 means 1; the AttemptID of a standard queue is ignored.
	ds, err := e.receive(model.ReceiveRequest{Queue: "q", MaxMessages: 0, WaitTime: dur(model.MaxWaitTime), AttemptID: "attempt-1"})
	if err != nil || len(ds) != 1 {
		t.Fatalf("Receive with MaxMessages 0 and an AttemptID: %d messages, err %v", len(ds), err)
	}
}

func testReceiveMaxMessages(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	var entries []model.SendEntry
	for i := 0; i < 10; i++ {
		entries = append(entries, model.SendEntry{Body: fmt.Sprint("m", i)})
	}
	e.send("q", entries...)
	e.send("q", model.SendEntry{Body: "m10"}, model.SendEntry{Body: "m11"})
	seen := map[string]bool{}
	deadline := time.Now().Add(realTimeout)
	for len(seen) < 12 {
		ds, err := e.receive(model.ReceiveRequest{Queue: "q", MaxMessages: 10, WaitTime: dur(model.MaxWaitTime)})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 || len(ds) > 10 {
			t.Fatalf("long poll with MaxMessages 10 returned %d messages", len(ds))
		}
		for _, d := range ds {
			if seen[d.Body] {
				t.Fatalf("message %s delivered twice while leased", d.Body)
			}
			seen[d.Body] = true
		}
		if time.Now().After(deadline) {
			t.Fatalf("received %d of 12 messages", len(seen))
		}
	}
	e.wantStats("q", 0, 12, 0)
	e.receiveNone("q")
	// MaxMessages 1 returns one at most.
	e.send("q", model.SendEntry{Body: "x"}, model.SendEntry{Body: "y"})
	ds, err := e.receive(model.ReceiveRequest{Queue: "q", MaxMessages: 1, WaitTime: dur(model.MaxWaitTime)})
	if err != nil || len(ds) != 1 {
		t.Fatalf("MaxMessages 1: %d messages, err %v", len(ds), err)
	}
}
