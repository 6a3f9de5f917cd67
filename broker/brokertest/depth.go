package brokertest

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// The backpressure tests: MaxDepth and LowPriorityMaxDepth refuse a send
// that would pass them, whole, as throttling (*model.DepthError); every
// state counts in the depth; refusals are counted per reason.
var depthTests = []testCase{
	{"RefusesWholeSend", testDepthRefusesWhole},
	{"CountsEveryState", testDepthCountsEveryState},
	{"LowPriority", testDepthLowPriority},
	{"InvalidEntriesDoNotCount", testDepthInvalidEntries},
	{"RaisedLimitAdmits", testDepthRaised},
}

// wantDepthError checks a refused send's error.
func wantDepthError(t testing.TB, what string, err error, queue string, depth, limit int64, low bool) {
	t.Helper()
	if !errors.Is(err, model.ErrThrottled) {
		t.Fatalf("%s: error = %v, want one matching ErrThrottled", what, err)
	}
	var de *model.DepthError
	if !errors.As(err, &de) {
		t.Fatalf("%s: error %v (%T) is not a *model.DepthError", what, err, err)
	}
	if de.Queue != queue || de.Depth != depth || de.Limit != limit || de.LowPriority != low {
		t.Fatalf("%s: DepthError %+v, want queue %s depth %d limit %d low priority %v", what, *de, queue, depth, limit, low)
	}
}

// wantRefused checks the front's refusal counts of queue.
func (e *env) wantRefused(queue string, maxDepth, lowPriority int64) {
	e.t.Helper()
	_, st, err := e.b.Stats(e.ctx, queue)
	if err != nil {
		e.t.Fatalf("Stats(%s): %v", queue, err)
	}
	if st.Refused["max_depth"] != maxDepth || st.Refused["low_priority_max_depth"] != lowPriority {
		e.t.Fatalf("Stats(%s).Refused = %v, want max_depth %d, low_priority_max_depth %d", queue, st.Refused, maxDepth, lowPriority)
	}
}

func testDepthRefusesWhole(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrMaxDepth: "3"})
	e.send("q", model.SendEntry{Body: "a"}, model.SendEntry{Body: "b"})
	_, err := e.trySend("q", model.SendEntry{ID: "c", Body: "c"}, model.SendEntry{ID: "d", Body: "d"})
	wantDepthError(t, "a batch of 2 at depth 2 of 3", err, "q", 2, 3, false)
	e.wantStats("q", 2, 0, 0)
	e.sendBody("q", "c")
	e.wantStats("q", 3, 0, 0)
	wantDepthError(t, "a plain send at depth 3 of 3", e.plainSendErr("q", model.SendEntry{Body: "e"}), "q", 3, 3, false)
	e.wantStats("q", 3, 0, 0)
	e.wantRefused("q", 2, 0)
	if got := bodies(e.receiveN(model.ReceiveRequest{Queue: "q"}, 3)); got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Fatalf("the queue holds %v, want a b c (nothing of the refused sends)", got)
	}
	e.receiveNone("q")
}

// testDepthCountsEveryState: depth is visible + in flight + delayed, a
// backing-off message included; a delete makes room.
func testDepthCountsEveryState(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{
		model.AttrMaxDepth:    "3",
		model.AttrRetryPolicy: retryPolicy(60, 300, model.JitterNone),
	})
	e.sendBody("q", "inflight")
	inflight := e.receiveOne("q")
	e.send("q", model.SendEntry{Body: "delayed", Delay: dur(time.Minute)})
	e.sendBody("q", "visible")
	e.wantStats("q", 1, 1, 1)
	wantDepthError(t, "a send at depth 3 (visible, in flight, delayed)", e.sendErr("q", model.SendEntry{Body: "x"}), "q", 3, 3, false)
	e.mustDelete("q", inflight.Receipt)
	e.sendBody("q", "after-delete")
	e.wantStats("q", 2, 0, 1)
	// A backing-off message still counts.
	d := e.receiveOne("q")
	e.mustChangeVis("q", d.Receipt, 0)
	e.wantStats("q", 1, 0, 2)
	wantDepthError(t, "a send at depth 3 with a message backing off", e.sendErr("q", model.SendEntry{Body: "x"}), "q", 3, 3, false)
	e.wantRefused("q", 2, 0)
}

// testDepthLowPriority: from LowPriorityMaxDepth on, a send holding a
// message of priority below 0 is refused whole; others go on to MaxDepth.
func testDepthLowPriority(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrMaxDepth: "4", model.AttrLowPriorityMaxDepth: "2"})
	e.send("q", withPriority("low1", -1))
	low := withPriority("low2", -50)
	low.ID = "l"
	_, err := e.trySend("q", model.SendEntry{ID: "n", Body: "normal"}, low)
	wantDepthError(t, "a batch with a low-priority message past LowPriorityMaxDepth", err, "q", 1, 2, true)
	e.wantStats("q", 1, 0, 0)
	e.send("q", withPriority("low2", -1)) // depth 2: at the low limit, allowed
	wantDepthError(t, "a low-priority send at LowPriorityMaxDepth", e.sendErr("q", withPriority("low3", -1)), "q", 2, 2, true)
	e.send("q", withPriority("zero", 0), withPriority("high", 5)) // priority 0 is not low
	e.wantStats("q", 4, 0, 0)
	wantDepthError(t, "a normal send at MaxDepth", e.sendErr("q", model.SendEntry{Body: "x"}), "q", 4, 4, false)
	e.wantRefused("q", 1, 2)
	// The refusal counts are per queue, and a deleted queue's are forgotten.
	e.createQueue("other", nil)
	e.wantRefused("other", 0, 0)
	if err := e.b.DeleteQueue(e.ctx, "q"); err != nil {
		t.Fatal(err)
	}
	e.createQueue("q", nil)
	e.wantRefused("q", 0, 0)
}

// testDepthInvalidEntries: entries that fail on their own are not stored,
// so they do not count against the depth.
func testDepthInvalidEntries(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrMaxDepth: "1"})
	e.createQueue("q2", nil)
	res, err := e.trySend("q",
		model.SendEntry{ID: "bad", Body: "x", Delay: dur(model.MaxDelay + time.Second)},
		model.SendEntry{ID: "ok", Body: "ok"})
	if err != nil {
		t.Fatalf("a batch of one invalid and one valid entry at depth 0 of 1: %v", err)
	}
	wantErr(t, "the invalid entry", res[0].Err, model.ErrInvalidParameterValue)
	if res[1].Err != nil {
		t.Fatalf("the valid entry: %v", res[1].Err)
	}
	e.wantStats("q", 1, 0, 0)
	// A queue past a lowered MaxDepth: a send that stores nothing gets its
	// entries' own errors, not a refusal.
	e.send("q2", model.SendEntry{Body: "a"}, model.SendEntry{Body: "b"}, model.SendEntry{Body: "c"})
	if err := e.b.SetQueueAttributes(e.ctx, "q2", map[string]string{model.AttrMaxDepth: "2"}); err != nil {
		t.Fatal(err)
	}
	res, err = e.trySend("q2", model.SendEntry{ID: "bad", Body: "x", Delay: dur(model.MaxDelay + time.Second)})
	if err != nil {
		t.Fatalf("a send of one invalid entry to a queue past its MaxDepth: %v, want the entry's own error", err)
	}
	wantErr(t, "the invalid entry", res[0].Err, model.ErrInvalidParameterValue)
	wantDepthError(t, "a valid send to a queue past its MaxDepth", e.sendErr("q2", model.SendEntry{Body: "d"}), "q2", 3, 2, false)
	e.wantRefused("q2", 1, 0)
}

// testDepthRaised: raising MaxDepth (or removing it) admits sends again.
func testDepthRaised(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrMaxDepth: "1"})
	e.sendBody("q", "a")
	wantDepthError(t, "a send at MaxDepth 1", e.sendErr("q", model.SendEntry{Body: "b"}), "q", 1, 1, false)
	if err := e.b.SetQueueAttributes(e.ctx, "q", map[string]string{model.AttrMaxDepth: "2"}); err != nil {
		t.Fatal(err)
	}
	e.sendBody("q", "b")
	if err := e.b.SetQueueAttributes(e.ctx, "q", map[string]string{model.AttrMaxDepth: "0"}); err != nil {
		t.Fatal(err)
	}
	e.send("q", model.SendEntry{Body: "c"}, model.SendEntry{Body: "d"})
	e.wantStats("q", 4, 0, 0)
}
