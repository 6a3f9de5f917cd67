package brokertest

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// The pause tests: a paused queue delivers nothing, and everything else
// goes on (sends, lease expiries, deletes, visibility changes, browsing);
// resuming wakes the waiting receives at once.
var pauseTests = []testCase{
	{"NoDeliveries", testPausedNoDeliveries},
	{"EverythingElseGoesOn", testPausedEverythingElse},
	{"ResumeWakesWaitingReceive", testResumeWakes},
	{"CreatedPaused", testCreatedPaused},
}

func (e *env) setPaused(queue string, paused bool) {
	e.t.Helper()
	if err := e.b.SetPaused(e.ctx, queue, paused); err != nil {
		e.t.Fatalf("SetPaused(%s, %v): %v", queue, paused, err)
	}
	if got := e.getQueue(queue).Config.Paused; got != paused {
		e.t.Fatalf("after SetPaused(%s, %v) the queue's Paused is %v", queue, paused, got)
	}
}

// testPausedNoDeliveries: sends are accepted; a short poll gets nothing; a
// long poll waits its whole wait and gets nothing.
func testPausedNoDeliveries(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.setPaused("q", true)
	e.send("q", model.SendEntry{Body: "a"}, model.SendEntry{Body: "b"})
	e.wantStats("q", 2, 0, 0)
	e.receiveNone("q")
	start := e.clock.Now()
	ch := e.goWait(e.ctx, "q", 5*time.Second)
	e.notYet(ch, "a long poll on a paused queue")
	e.sendBody("q", "c") // a send wakes nobody while paused
	e.notYet(ch, "a long poll on a paused queue after a send")
	e.advance(5 * time.Second)
	r := e.await(ch, promptly, "a long poll on a paused queue at the end of its wait")
	if r.err != nil || len(r.ds) != 0 {
		t.Fatalf("a long poll on a paused queue returned %d messages, err %v; want none", len(r.ds), r.err)
	}
	if waited := e.clock.Now().Sub(start); waited < 5*time.Second {
		t.Fatalf("the long poll returned after %v of its 5 s", waited)
	}
	e.wantStats("q", 3, 0, 0)
	e.setPaused("q", false)
	if got := bodies(e.receiveN(model.ReceiveRequest{Queue: "q"}, 3)); len(got) != 3 {
		t.Fatalf("after resuming received %v, want a b c", got)
	}
}

// testPausedEverythingElse: leases taken before the pause still expire;
// deletes, visibility changes, consumer controls and browsing work.
func testPausedEverythingElse(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrVisibilityTimeout: "10"})
	e.send("q", model.SendEntry{Body: "deleted"}, model.SendEntry{Body: "nacked"},
		model.SendEntry{Body: "expires"}, model.SendEntry{Body: "snoozed"})
	ds := e.receiveN(model.ReceiveRequest{Queue: "q"}, 4)
	by := map[string]model.Delivery{}
	for _, d := range ds {
		by[d.Body] = d
	}
	e.setPaused("q", true)
	e.mustDelete("q", by["deleted"].Receipt)
	e.mustChangeVis("q", by["nacked"].Receipt, 0)
	e.snooze("q", by["snoozed"].Receipt, 5*time.Second)
	e.wantStats("q", 1, 1, 1)
	e.receiveNone("q")
	e.advance(10 * time.Second) // the lease of "expires" ends, the snooze too
	e.eventuallyStats("q", 3, 0, 0)
	e.receiveNone("q")
	if got := browsedBodies(e.browseAll("q", model.BrowseRequest{})); len(got) != 3 {
		t.Fatalf("Browse of a paused queue shows %v, want 3 messages", got)
	}
	e.setPaused("q", false)
	e.receiveN(model.ReceiveRequest{Queue: "q"}, 3)
}

// testResumeWakes: a receive waiting on a paused queue returns the message
// as soon as the queue resumes, without the clock moving.
func testResumeWakes(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.setPaused("q", true)
	e.sendBody("q", "a")
	ch := e.goWait(e.ctx, "q", model.MaxWaitTime)
	e.notYet(ch, "a long poll on a paused queue")
	before := e.clock.Now()
	e.setPaused("q", false)
	r := e.await(ch, promptly, "a long poll when its queue resumes")
	if r.err != nil || len(r.ds) != 1 || r.ds[0].Body != "a" {
		t.Fatalf("the woken receive returned %d messages, err %v; want a", len(r.ds), r.err)
	}
	if !e.clock.Now().Equal(before) {
		t.Fatal("the clock moved")
	}
}

// testCreatedPaused: a queue created with Paused true delivers nothing
// until SetQueueAttributes resumes it.
func testCreatedPaused(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrPaused: "true"})
	e.sendBody("q", "a")
	e.receiveNone("q")
	if err := e.b.SetQueueAttributes(e.ctx, "q", map[string]string{model.AttrPaused: "false"}); err != nil {
		t.Fatal(err)
	}
	if d := e.receiveOne("q"); d.Body != "a" {
		t.Fatalf("received %q, want a", d.Body)
	}
}
