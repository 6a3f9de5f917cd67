package brokertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// Group unlocks that no call of the client causes: a lease ending by the
// clock (with and without a restart in between), a nack while another
// receive waits, a receive-attempt retry after a restart, and a queue left
// alone across a restart and then drained. Each unlock must make the
// group's messages receivable at once and wake a receive that waits for
// them; none may leave a group locked with no message in flight.

// testFifoWaiterWokenByExpiry: a long poll waiting on a FIFO queue whose
// groups are all locked wakes when the first lease ends by the clock, and
// takes that group's run, not the group still locked.
func testFifoWaiterWokenByExpiry(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", nil)
	e.fsend("q.fifo", "g", "g1", "g1")
	e.fsend("q.fifo", "g", "g2", "g2")
	e.fsend("q.fifo", "h", "h1", "h1")
	e.fsend("q.fifo", "h", "h2", "h2")
	e.receiveN(model.ReceiveRequest{Queue: "q.fifo", MaxMessages: 1, Visibility: dur(10 * time.Second), WaitTime: dur(0)}, 1)
	e.receiveN(model.ReceiveRequest{Queue: "q.fifo", MaxMessages: 1, Visibility: dur(30 * time.Second), WaitTime: dur(0)}, 1)
	ch := e.goWait(e.ctx, "q.fifo", 20*time.Second)
	e.advance(9 * time.Second)
	e.notYet(ch, "both groups locked")
	e.advance(time.Second) // g's lease ends
	r := e.await(ch, promptly, "long poll after g's lease ended")
	if r.err != nil {
		t.Fatal(r.err)
	}
	wantBodies(t, "the waiting receive", r.ds, "g1", "g2")
	if r.ds[0].ReceiveCount != 2 {
		t.Fatalf("g1 delivered with ReceiveCount %d, want 2", r.ds[0].ReceiveCount)
	}
}

// testFifoWaiterWokenByExpiryAfterRestart: a lease taken before a restart,
// still live after it, ends while a long poll waits, with no other call to
// the backend in between: the waiter wakes and takes the group's run.
func testFifoWaiterWokenByExpiryAfterRestart(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	e.fifoQueue("q.fifo", map[string]string{model.AttrVisibilityTimeout: "10"})
	e.fsend("q.fifo", "g", "1", "a1")
	e.fsend("q.fifo", "g", "2", "a2")
	wantBodies(t, "before the restart", e.receiveMax("q.fifo", 1, 0), "a1")
	e.reopen()
	ch := e.goWait(e.ctx, "q.fifo", 20*time.Second)
	e.advance(9 * time.Second)
	e.notYet(ch, "a1's lease from before the restart holds the group")
	e.advance(time.Second)
	r := e.await(ch, promptly, "long poll after the lease from before the restart ended")
	if r.err != nil {
		t.Fatal(r.err)
	}
	wantBodies(t, "the waiting receive", r.ds, "a1", "a2")
}

// testFifoWaiterWokenByRetention: the message that locks a group, deleted
// by its queue's retention while in flight, unlocks it: a receive waiting
// for the group gets its next message when the clock passes that
// retention, long before the lease ends.
func testFifoWaiterWokenByRetention(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", map[string]string{model.AttrMessageRetentionPeriod: "60"})
	e.fsend("q.fifo", "g", "1", "a1")
	wantBodies(t, "the first receive", e.receiveN(model.ReceiveRequest{Queue: "q.fifo", MaxMessages: 1,
		Visibility: dur(12 * time.Hour), WaitTime: dur(0)}, 1), "a1")
	e.advance(50 * time.Second)
	e.fsend("q.fifo", "g", "2", "a2")
	e.advance(9500 * time.Millisecond) // 59.5 s after a1's send
	ch := e.goWait(e.ctx, "q.fifo", model.MaxWaitTime)
	e.notYet(ch, "a1 in flight holds the group")
	e.advance(600 * time.Millisecond) // a1 is past its retention; a2 is not
	r := e.await(ch, promptly, "long poll after a1's retention")
	if r.err != nil {
		t.Fatal(r.err)
	}
	wantBodies(t, "the waiting receive", r.ds, "a2")
}

// testFifoWaiterWokenByNack: a visibility change to 0 of the message that
// locks a group wakes a receive waiting for it.
func testFifoWaiterWokenByNack(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", nil)
	e.fsend("q.fifo", "g", "1", "a1")
	e.fsend("q.fifo", "g", "2", "a2")
	d := e.receiveMax("q.fifo", 1, 0)[0]
	ch := e.goWait(e.ctx, "q.fifo", 20*time.Second)
	e.notYet(ch, "group locked")
	e.mustChangeVis("q.fifo", d.Receipt, 0)
	r := e.await(ch, promptly, "long poll after the nack")
	if r.err != nil {
		t.Fatal(r.err)
	}
	wantBodies(t, "the waiting receive", r.ds, "a1", "a2")
}

// testFifoAttemptAfterRestartAndExpiry: a receive attempt is retried after a
// restart and after its lease ended. The retry must not answer the ended
// leases, and the attempt must not keep the group locked: a receive
// without an attempt id gets the group's run.
func testFifoAttemptAfterRestartAndExpiry(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	e.fifoQueue("q.fifo", map[string]string{model.AttrVisibilityTimeout: "10"})
	e.fsend("q.fifo", "g", "1", "a1")
	e.fsend("q.fifo", "g", "2", "a2")
	first, err := e.receive(model.ReceiveRequest{Queue: "q.fifo", MaxMessages: 1, WaitTime: dur(0), AttemptID: "try"})
	if err != nil || len(first) != 1 {
		t.Fatalf("first receive: %d messages, err %v", len(first), err)
	}
	e.reopen()
	e.advance(10 * time.Second)
	again, err := e.receive(model.ReceiveRequest{Queue: "q.fifo", MaxMessages: 1, WaitTime: dur(0), AttemptID: "try"})
	switch {
	case err != nil:
		wantErr(t, "retry after the restart and the lease's end", err, model.ErrInvalidParameterValue)
	case len(again) > 0 && again[0].ReceiveCount == 1:
		t.Fatalf("retry after the lease ended replayed %v under the ended lease", bodies(again))
	case len(again) > 0:
		// A backend may treat it as a new receive: it then took a1 again.
		e.mustChangeVis("q.fifo", again[0].Receipt, 0)
	}
	wantBodies(t, "a receive without an attempt id", e.receiveMax("q.fifo", 10, 0), "a1", "a2")
}

// testFifoDrainAfterRestart: the shape of a crash test's final drain. Four
// groups are left in mixed states (leases of different lengths, a nacked
// head, a batch partly deleted, untouched groups), the backend restarts, the
// queue is left alone until every lease has ended, then receives and
// deletes take every remaining message, each group in order, and the
// counts end at zero.
func testFifoDrainAfterRestart(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	e.fifoQueue("q.fifo", map[string]string{model.AttrVisibilityTimeout: "4"})
	want := map[string][]string{}
	for i := range 6 {
		for _, g := range []string{"g0", "g1", "g2", "g3"} {
			b := fmt.Sprintf("%s-%d", g, i)
			e.fsend("q.fifo", g, b, b)
			want[g] = append(want[g], b)
		}
	}
	// g0: its head received with a 4 s lease. g1: a run of 3 received with
	// 30 s, the second of it deleted. g2: its head nacked, then received
	// again with 4 s. g3: untouched.
	recv := func(max int, vis time.Duration) []model.Delivery {
		return e.receiveN(model.ReceiveRequest{Queue: "q.fifo", MaxMessages: max, Visibility: dur(vis), WaitTime: dur(0)}, max)
	}
	byGroup := func(ds []model.Delivery, g string) (out []model.Delivery) {
		for _, d := range ds {
			if d.GroupID == g {
				out = append(out, d)
			}
		}
		return out
	}
	ds := recv(10, 4*time.Second) // 6 of g0, 4 of g1 (oldest heads first)
	for _, d := range ds[1:] {
		e.mustChangeVis("q.fifo", d.Receipt, 0)
	}
	g0 := byGroup(ds, "g0")
	if len(g0) == 0 || g0[0].Body != "g0-0" {
		t.Fatalf("first receive %v: want g0's run first", bodies(ds))
	}
	// g0-0 stays in flight (4 s); the rest went back.
	e.advance(time.Second)
	ds = e.receiveMax("q.fifo", 10, 0)
	if g1 := byGroup(ds, "g1"); len(g1) < 3 {
		t.Fatalf("second receive %v: want g1's run", bodies(ds))
	}
	for _, d := range ds {
		switch {
		case d.Body == "g1-1":
			e.mustDelete("q.fifo", d.Receipt)
			want["g1"] = append(want["g1"][:1], want["g1"][2:]...)
		case d.GroupID == "g1" && (d.Body == "g1-0" || d.Body == "g1-2"):
			e.mustChangeVis("q.fifo", d.Receipt, 30*time.Second)
		default:
			e.mustChangeVis("q.fifo", d.Receipt, 0)
		}
	}
	// g1 is locked by g1-0 and g1-2 (30 s), g0 by g0-0 (3 s left). The
	// rest are g2 and g3.
	ds = e.receiveMax("q.fifo", 1, 0)
	if len(ds) != 1 || ds[0].GroupID != "g2" {
		t.Fatalf("third receive %v: want g2's head", bodies(ds))
	}
	e.mustChangeVis("q.fifo", ds[0].Receipt, 0)
	ds = e.receiveN(model.ReceiveRequest{Queue: "q.fifo", MaxMessages: 1, Visibility: dur(4 * time.Second), WaitTime: dur(0)}, 1)
	if ds[0].Body != "g2-0" {
		t.Fatalf("fourth receive %s: want g2-0 again", ds[0].Body)
	}

	e.reopen()
	e.advance(31 * time.Second) // every lease has ended; no call saw it happen
	got := map[string][]string{}
	for round := 0; ; round++ {
		if round > 50 {
			t.Fatalf("drain: still receiving after %d rounds; got %v", round, got)
		}
		ds := e.receiveMax("q.fifo", 10, 0)
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			got[d.GroupID] = append(got[d.GroupID], d.Body)
			e.mustDelete("q.fifo", d.Receipt)
		}
	}
	for g, w := range want {
		if fmt.Sprint(got[g]) != fmt.Sprint(w) {
			t.Errorf("drain of group %s: got %v, want %v", g, got[g], w)
		}
	}
	e.wantStats("q.fifo", 0, 0, 0)
}
