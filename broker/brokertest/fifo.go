package brokertest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// The FIFO semantics (ordering, dedup, receive attempts), written against
// storage.Backend only. Queues are named "*.fifo" with FifoQueue=true.
// The tests are split by concern: this file has the helpers and the
// ordering and group-lock tests; fifo_dedup.go the dedup window and sequence
// numbers; fifo_attempt.go receive attempts, restarts, dead letters, the
// in-flight cap and validation.
var fifoTests = []testCase{
	// Order and the group lock (this file).
	{"OrderWithinGroup", testFifoOrderWithinGroup},
	{"BatchSendKeepsOrder", testFifoBatchOrder},
	{"GroupLockedWhileInFlight", testFifoGroupLock},
	{"GroupLockReleasedByExpiry", testFifoLockReleasedByExpiry},
	{"GroupLockReleasedByNack", testFifoLockReleasedByNack},
	{"GroupLockHeldByAnyMessageOfBatch", testFifoLockHeldByAnyOfBatch},
	{"GroupsServedInParallel", testFifoGroupsInParallel},
	{"ManyMessagesOfOneGroupPerReceive", testFifoManyPerReceive},
	{"WaitingReceiveWokenByUnlock", testFifoWaiterWokenByUnlock},
	{"DelayedHeadHoldsGroup", testFifoDelayedHead},
	{"DeleteAfterLeaseExpired", testFifoDeleteExpiredReceipt},
	{"DeleteBatchExpiredAndStaleReceipts", testFifoDeleteExpiredAndStale},
	// Unlocks by the clock, a nack, a restart (fifo_wake.go).
	{"WaitingReceiveWokenByExpiry", testFifoWaiterWokenByExpiry},
	{"WaitingReceiveWokenByExpiryAfterRestart", testFifoWaiterWokenByExpiryAfterRestart},
	{"WaitingReceiveWokenByNack", testFifoWaiterWokenByNack},
	{"WaitingReceiveWokenByRetention", testFifoWaiterWokenByRetention},
	{"AttemptRetriedAfterRestartAndExpiry", testFifoAttemptAfterRestartAndExpiry},
	{"DrainAfterRestart", testFifoDrainAfterRestart},
	// The dedup window and sequence numbers (fifo_dedup.go).
	{"DedupWithinWindow", testFifoDedupWindow},
	{"DedupAfterDelete", testFifoDedupAfterDelete},
	{"DedupWithinOneBatch", testFifoDedupInBatch},
	{"DedupScopeQueue", testFifoDedupScopeQueue},
	{"DedupScopeMessageGroup", testFifoDedupScopeGroup},
	{"ContentBasedDedup", testFifoContentBasedDedup},
	{"PurgeClearsDedup", testFifoPurgeClearsDedup},
	{"DedupSurvivesRestart", testFifoDedupRestart},
	{"SequenceNumbersIncrease", testFifoSequenceNumbers},
	{"SequenceNumbersIncreaseAcrossRestart", testFifoSequenceRestart},
	// Receive attempts, restarts, dead letters, limits, validation (fifo_attempt.go).
	{"AttemptRetryReturnsSameMessages", testFifoAttemptRetry},
	{"AttemptInvalidAfterDelete", testFifoAttemptAfterDelete},
	{"AttemptInvalidAfterVisibilityChange", testFifoAttemptAfterVisibility},
	{"AttemptExpiresAfterWindow", testFifoAttemptExpires},
	{"AttemptNotReplayedAfterLeaseEnds", testFifoAttemptLeaseEnded},
	{"AttemptSurvivesRestart", testFifoAttemptRestart},
	{"AttemptIgnoredOnStandardQueue", testFifoAttemptStandard},
	{"GroupLockSurvivesRestart", testFifoLockRestart},
	{"DeadLetterQueueTypeMustMatch", testFifoDLQType},
	{"DeadLetterMove", testFifoDLQMove},
	{"InFlightCapAnswersNoMessages", testFifoInFlightCap},
	{"SendNeedsGroupID", testFifoNeedsGroup},
	{"SendNeedsDedupID", testFifoNeedsDedup},
	{"IDFormats", testFifoIDFormats},
	{"PerMessageDelayRefused", testFifoPerMessageDelay},
	{"QueueAttributes", testFifoQueueAttributes},
	{"GroupIDOnStandardQueue", testFifoGroupOnStandard},
	// Random histories against a reference model (fifo_model.go).
	{"Model", testFifoModel},
}

// fifoQueue creates a FIFO queue (name must end in .fifo) with attrs.
func (e *env) fifoQueue(name string, attrs map[string]string) {
	e.t.Helper()
	a := map[string]string{model.AttrFifoQueue: "true"}
	for k, v := range attrs {
		a[k] = v
	}
	e.createQueue(name, a)
}

// fmsg is a FIFO send entry with group, dedup id and body.
func fmsg(group, dedup, body string) model.SendEntry {
	return model.SendEntry{GroupID: group, DedupID: dedup, Body: body}
}

// fsend sends one FIFO message and returns its result.
func (e *env) fsend(queue, group, dedup, body string) model.SendResult {
	e.t.Helper()
	return e.send(queue, fmsg(group, dedup, body))[0]
}

// receiveMax does one receive of up to max messages with a long poll of
// wait, and returns what it got (possibly nothing).
func (e *env) receiveMax(queue string, max int, wait time.Duration) []model.Delivery {
	e.t.Helper()
	ds, err := e.receive(model.ReceiveRequest{Queue: queue, MaxMessages: max, WaitTime: dur(wait)})
	if err != nil {
		e.t.Fatalf("Receive(%s, %d): %v", queue, max, err)
	}
	for _, d := range ds {
		e.checkDelivery(d)
	}
	return ds
}

// wantBodies checks the bodies of ds in order.
func wantBodies(t testing.TB, what string, ds []model.Delivery, want ...string) {
	t.Helper()
	got := make([]string, len(ds))
	for i, d := range ds {
		got[i] = d.Body
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("%s: received %v, want %v (in this order)", what, got, want)
	}
}

func testFifoOrderWithinGroup(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", nil)
	var want []string
	for i := range 6 {
		b := fmt.Sprintf("m%d", i)
		e.fsend("q.fifo", "g", b, b)
		want = append(want, b)
	}
	var got []model.Delivery
	for range want {
		ds := e.receiveMax("q.fifo", 1, 0)
		if len(ds) != 1 {
			t.Fatalf("receive %d: got %d messages, want 1", len(got), len(ds))
		}
		e.mustDelete("q.fifo", ds[0].Receipt)
		got = append(got, ds...)
	}
	wantBodies(t, "one at a time, deleting each", got, want...)
	e.receiveNone("q.fifo")
}

func testFifoBatchOrder(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", nil)
	var entries []model.SendEntry
	for i := range model.MaxBatchEntries {
		b := fmt.Sprintf("b%d", i)
		entries = append(entries, fmsg("g", b, b))
	}
	e.send("q.fifo", entries...)
	ds := e.receiveMax("q.fifo", 10, 0)
	wantBodies(t, "a batch send received at once", ds, "b0", "b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8", "b9")
}

func testFifoGroupLock(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", nil)
	e.fsend("q.fifo", "g", "1", "a1")
	e.fsend("q.fifo", "g", "2", "a2")
	ds := e.receiveMax("q.fifo", 1, 0)
	wantBodies(t, "first receive", ds, "a1")
	e.receiveNone("q.fifo") // a2 waits behind a1's lease
	e.fsend("q.fifo", "g", "3", "a3")
	e.receiveNone("q.fifo") // so does a message sent after the receive
	e.wantStats("q.fifo", 2, 1, 0)
	e.mustDelete("q.fifo", ds[0].Receipt)
	wantBodies(t, "after the delete", e.receiveMax("q.fifo", 10, 0), "a2", "a3")
}

func testFifoLockReleasedByExpiry(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", map[string]string{model.AttrVisibilityTimeout: "10"})
	e.fsend("q.fifo", "g", "1", "a1")
	e.fsend("q.fifo", "g", "2", "a2")
	wantBodies(t, "first receive", e.receiveMax("q.fifo", 1, 0), "a1")
	e.advance(9 * time.Second)
	e.receiveNone("q.fifo")
	e.advance(time.Second)
	e.eventuallyStats("q.fifo", 2, 0, 0)
	ds := e.receiveMax("q.fifo", 1, 0)
	wantBodies(t, "after the lease expired", ds, "a1")
	if ds[0].ReceiveCount != 2 {
		t.Fatalf("ReceiveCount %d, want 2", ds[0].ReceiveCount)
	}
}

func testFifoLockReleasedByNack(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", nil)
	e.fsend("q.fifo", "g", "1", "a1")
	e.fsend("q.fifo", "g", "2", "a2")
	ds := e.receiveMax("q.fifo", 1, 0)
	e.mustChangeVis("q.fifo", ds[0].Receipt, 0)
	wantBodies(t, "after the nack", e.receiveMax("q.fifo", 10, 0), "a1", "a2")
}

// testFifoLockHeldByAnyOfBatch: deleting the first message of a received
// batch leaves the group locked by the others.
func testFifoLockHeldByAnyOfBatch(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", nil)
	e.send("q.fifo", fmsg("g", "1", "a1"), fmsg("g", "2", "a2"))
	ds := e.receiveMax("q.fifo", 10, 0)
	wantBodies(t, "first receive", ds, "a1", "a2")
	e.fsend("q.fifo", "g", "3", "a3")
	e.mustDelete("q.fifo", ds[0].Receipt)
	e.receiveNone("q.fifo") // a2 still in flight
	e.mustDelete("q.fifo", ds[1].Receipt)
	wantBodies(t, "after both deletes", e.receiveMax("q.fifo", 10, 0), "a3")
}

func testFifoGroupsInParallel(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", nil)
	for _, g := range []string{"A", "B", "C"} {
		e.fsend("q.fifo", g, g+"1", g+"1")
		e.fsend("q.fifo", g, g+"2", g+"2")
	}
	// Three single receives get the head of each group, while all three are locked.
	heads := map[string]bool{}
	for range 3 {
		ds := e.receiveMax("q.fifo", 1, 0)
		if len(ds) != 1 {
			t.Fatalf("got %d messages, want the head of another group", len(ds))
		}
		heads[ds[0].Body] = true
	}
	if !heads["A1"] || !heads["B1"] || !heads["C1"] {
		t.Fatalf("heads received %v, want A1, B1 and C1", heads)
	}
	e.receiveNone("q.fifo")
}

func testFifoManyPerReceive(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", nil)
	// Interleaved sends to two groups: each group's messages come in order,
	// and a receive of 10 returns all of them.
	for i := 1; i <= 4; i++ {
		e.fsend("q.fifo", "A", fmt.Sprintf("A%d", i), fmt.Sprintf("A%d", i))
		e.fsend("q.fifo", "B", fmt.Sprintf("B%d", i), fmt.Sprintf("B%d", i))
	}
	ds := e.receiveMax("q.fifo", 10, 0)
	if len(ds) != 8 {
		t.Fatalf("one receive of 10 got %d messages, want all 8", len(ds))
	}
	next := map[string]int{"A": 1, "B": 1}
	for _, d := range ds {
		if want := fmt.Sprintf("%s%d", d.GroupID, next[d.GroupID]); d.Body != want {
			t.Fatalf("got %s, want %s next in group %s", d.Body, want, d.GroupID)
		}
		next[d.GroupID]++
	}
	// A receive of 3 takes 3 of one group's head run, not one of each.
	e.fsend("q.fifo", "C", "C1", "C1")
	e.fsend("q.fifo", "C", "C2", "C2")
	e.fsend("q.fifo", "C", "C3", "C3")
	e.fsend("q.fifo", "D", "D1", "D1")
	wantBodies(t, "receive of 3", e.receiveMax("q.fifo", 3, 0), "C1", "C2", "C3")
}

func testFifoWaiterWokenByUnlock(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", nil)
	e.fsend("q.fifo", "g", "1", "a1")
	e.fsend("q.fifo", "g", "2", "a2")
	d := e.receiveMax("q.fifo", 1, 0)[0]
	ch := e.goWait(e.ctx, "q.fifo", 20*time.Second)
	e.notYet(ch, "group locked")
	e.mustDelete("q.fifo", d.Receipt)
	r := e.await(ch, promptly, "after the delete that unlocked the group")
	if r.err != nil {
		t.Fatal(r.err)
	}
	wantBodies(t, "the waiting receive", r.ds, "a2")
}

// testFifoDelayedHeadHoldsGroup: a message still delayed (queue delay) holds
// back later messages of its group that are already visible.
func testFifoDelayedHead(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", map[string]string{model.AttrDelaySeconds: "10"})
	e.fsend("q.fifo", "g", "1", "a1")
	e.fsend("q.fifo", "h", "h1", "h1")
	if err := e.b.SetQueueAttributes(e.ctx, "q.fifo", map[string]string{model.AttrDelaySeconds: "0"}); err != nil {
		t.Fatal(err)
	}
	e.fsend("q.fifo", "g", "2", "a2")
	e.receiveNone("q.fifo")
	e.advance(10 * time.Second)
	e.eventuallyStats("q.fifo", 3, 0, 0)
	ds := e.receiveMax("q.fifo", 10, 0)
	got := map[string][]string{}
	for _, d := range ds {
		got[d.GroupID] = append(got[d.GroupID], d.Body)
	}
	if strings.Join(got["g"], ",") != "a1,a2" || strings.Join(got["h"], ",") != "h1" {
		t.Fatalf("received %v, want g: a1,a2 and h: h1", got)
	}
}

// testFifoDeleteExpiredAndStale: in one FIFO delete batch after the lease
// ended, the latest receipt (twice) is expired and an older receipt of the
// same message is stale (success without effect).
func testFifoDeleteExpiredAndStale(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", map[string]string{model.AttrVisibilityTimeout: "10"})
	e.fsend("q.fifo", "g", "1", "a1")
	old := e.leaseThenEnd("q.fifo")
	latest := e.leaseThenEnd("q.fifo")
	errs, err := e.b.Delete(e.ctx, "q.fifo", []model.DeleteEntry{
		{ID: "a", Receipt: latest.Receipt}, {ID: "b", Receipt: latest.Receipt}, {ID: "c", Receipt: old.Receipt}})
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, "the latest receipt after its lease ended", errs[0], model.ErrInvalidParameterValue)
	wantErr(t, "the latest receipt again", errs[1], model.ErrInvalidParameterValue)
	if errs[2] != nil {
		t.Fatalf("an older receipt of the same message: %v, want success without effect (stale)", errs[2])
	}
	e.wantStats("q.fifo", 1, 0, 0)
}

// leaseThenEnd receives the one message of queue (visibility 10 s) and lets
// its lease end; the message is visible again.
func (e *env) leaseThenEnd(queue string) model.Delivery {
	e.t.Helper()
	d := e.receiveMax(queue, 1, 0)[0]
	e.advance(10 * time.Second)
	e.eventuallyStats(queue, 1, 0, 0)
	return d
}

func testFifoDeleteExpiredReceipt(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", map[string]string{model.AttrVisibilityTimeout: "10"})
	e.fsend("q.fifo", "g", "1", "a1")
	d := e.leaseThenEnd("q.fifo")
	wantErr(t, "FIFO Delete with the receipt of an expired lease", e.deleteErr("q.fifo", d.Receipt), model.ErrInvalidParameterValue)
	e.wantStats("q.fifo", 1, 0, 0)
	d2 := e.receiveMax("q.fifo", 1, 0)[0]
	e.mustDelete("q.fifo", d2.Receipt)
	e.wantStats("q.fifo", 0, 0, 0)
}
