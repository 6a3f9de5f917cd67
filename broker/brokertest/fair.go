package brokertest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// The fair-queue tests (broker/internal/plan/fair.go): on a standard queue MessageGroupId
// names a tenant; priority levels are strict, within a level tenants with
// ready messages take turns, within a tenant send order holds. The turn
// rule's exact order is checked where it is fixed (every message sent before
// the first receive); elsewhere the tests check what a user is promised: a
// quiet tenant's message is served within the next 2 receives whatever
// another tenant's backlog. FIFO queues keep their group rule (fifo.go).
var fairTests = []testCase{
	{"QuietTenantNotDelayedByBacklog", testFairQuietTenant},
	{"HighPriorityDoesNotDelayOtherLevels", testFairPriorityCursor},
	{"ThreeTenantsTakeTurns", testFairThreeTenants},
	{"SendOrderWithinTenant", testFairSendOrder},
	{"PriorityStrictAcrossTenants", testFairPriorityStrict},
	{"NoGroupIsOneTenant", testFairNoGroup},
	{"RedeliveryKeepsItsTurn", testFairRedelivery},
	{"DeadLetterTakesATurnInTheDLQ", testFairDeadLetter},
	{"MovedMessageTakesATurn", testFairMoveTask},
	{"OrderSurvivesRestart", testFairRestart},
}

// tenantSend sends bodies as tenant (MessageGroupId; "" for none) to queue,
// ten per call, at priority p.
func (e *env) tenantSend(queue, tenant string, p int, bodies ...string) {
	e.t.Helper()
	for len(bodies) > 0 {
		n := min(len(bodies), model.MaxBatchEntries)
		entries := make([]model.SendEntry, n)
		for i, b := range bodies[:n] {
			entries[i] = withPriority(b, p)
			entries[i].GroupID = tenant
			entries[i].ID = fmt.Sprint("e", i)
		}
		e.send(queue, entries...)
		bodies = bodies[n:]
	}
}

// inOrder is the bodies of ds in the order received (bodies sorts them).
func inOrder(ds []model.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Body
	}
	return out
}

// numbered is prefix0 … prefix(n-1).
func numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(prefix, i)
	}
	return out
}

// take receives n messages of queue one at a time (MaxMessages 1) and
// deletes each, returning them in the order received.
func (e *env) take(queue string, n int) []model.Delivery {
	e.t.Helper()
	out := make([]model.Delivery, 0, n)
	for range n {
		d := e.receiveN(model.ReceiveRequest{Queue: queue, MaxMessages: 1}, 1)[0]
		e.mustDelete(queue, d.Receipt)
		out = append(out, d)
	}
	return out
}

// wantWithin takes n messages of queue one at a time and requires body among them.
func (e *env) wantWithin(queue, body string, n int) []string {
	e.t.Helper()
	got := inOrder(e.take(queue, n))
	if !slices.Contains(got, body) {
		e.t.Fatalf("the next %d receives of %s returned %v, want %q among them", n, queue, got, body)
	}
	return got
}

// wantTenantOrder checks that the bodies of each tenant (the prefix before
// the digits) come in increasing number order.
func wantTenantOrder(t testing.TB, got []string) {
	t.Helper()
	last := map[string]int{}
	for _, b := range got {
		i := strings.IndexAny(b, "0123456789")
		var n int
		if _, err := fmt.Sscan(b[i:], &n); err != nil {
			t.Fatalf("body %q: %v", b, err)
		}
		if prev, ok := last[b[:i]]; ok && n <= prev {
			t.Fatalf("received %v: %q after number %d of its tenant, send order broken", got, b, prev)
		}
		last[b[:i]] = n
	}
}

// testFairQuietTenant: a noisy tenant's backlog of 1,000 messages does not
// delay a quiet tenant's single message by more than one receive, before
// any receive and after some; the noisy tenant keeps its send order.
func testFairQuietTenant(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.tenantSend("q", "noisy", 0, numbered("n", 1000)...)
	e.tenantSend("q", "quiet", 0, "quiet0")
	got := e.wantWithin("q", "quiet0", 2)
	got = append(got, inOrder(e.take("q", 5))...)
	e.tenantSend("q", "quiet", 0, "quiet1")
	got = append(got, e.wantWithin("q", "quiet1", 2)...)
	// A tenant that had messages before and has none now is quiet again.
	e.tenantSend("q", "quiet", 0, "quiet2")
	got = append(got, e.wantWithin("q", "quiet2", 2)...)
	wantTenantOrder(t, got)
	e.wantStats("q", int64(1003-len(got)), 0, 0)
}

// testFairPriorityCursor: serving a noisy tenant's high-priority message
// does not push a quiet tenant's later message at a lower level behind the
// noisy tenant's backlog at that level (each level takes its own turns).
func testFairPriorityCursor(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.tenantSend("q", "noisy", 0, numbered("n", 100)...)
	e.tenantSend("q", "noisy", 5, "urgent")
	wantBodies(t, "the first receive", e.take("q", 1), "urgent")
	e.tenantSend("q", "quiet", 0, "quiet0")
	e.wantWithin("q", "quiet0", 2)
	wantTenantOrder(t, inOrder(e.take("q", 10)))
}

// testFairThreeTenants: with everything sent before the first receive,
// tenants take turns one message each, ties in send order.
func testFairThreeTenants(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.tenantSend("q", "a", 0, "a0", "a1", "a2", "a3")
	e.tenantSend("q", "b", 0, "b0", "b1", "b2")
	e.tenantSend("q", "c", 0, "c0", "c1")
	got := inOrder(e.take("q", 9))
	if want := "a0 b0 c0 a1 b1 c1 a2 b2 a3"; strings.Join(got, " ") != want {
		t.Fatalf("received %v, want %s", got, want)
	}
	e.receiveNone("q")
}

// testFairSendOrder: tenants sending in a mixed order are served round-robin
// (at every point, the tenants still holding messages have been served
// within one message of each other), each in its send order.
func testFairSendOrder(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	sent := map[string]int{}
	x := uint32(7)
	for range 60 {
		x = x*1103515245 + 12345
		tenant := string(rune('a' + (x>>16)%4))
		e.tenantSend("q", tenant, 0, fmt.Sprint(tenant, sent[tenant]))
		sent[tenant]++
	}
	got := inOrder(e.take("q", 60))
	wantTenantOrder(t, got)
	served := map[string]int{}
	for i, b := range got {
		served[b[:1]]++
		lo, hi := 1<<30, 0
		for tenant, n := range sent {
			if served[tenant] < n { // still has messages: its count must be within one of the others'
				lo = min(lo, served[tenant])
			}
			hi = max(hi, min(served[tenant], n))
		}
		if lo != 1<<30 && hi-lo > 1 {
			t.Fatalf("after %d receives (%v) the served counts are %v of %v: not taking turns", i+1, got[:i+1], served, sent)
		}
	}
}

// testFairPriorityStrict: priority levels are strict across tenants: a
// noisy tenant's high-priority message beats a quiet tenant's lower one,
// and the quiet tenant's low-priority message waits for the whole level 0.
func testFairPriorityStrict(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.tenantSend("q", "noisy", 0, "n0", "n1", "n2", "n3", "n4")
	e.tenantSend("q", "noisy", 5, "nhigh")
	e.tenantSend("q", "quiet", 0, "q0")
	e.tenantSend("q", "quiet", -1, "qlow")
	ds := e.take("q", 8)
	if got, want := strings.Join(inOrder(ds), " "), "nhigh n0 q0 n1 n2 n3 n4 qlow"; got != want {
		t.Fatalf("received %s, want %s", got, want)
	}
	if ds[0].GroupID != "noisy" || ds[2].GroupID != "quiet" {
		t.Fatalf("deliveries carry MessageGroupId %q and %q, want noisy and quiet", ds[0].GroupID, ds[2].GroupID)
	}
}

// testFairNoGroup: messages without a MessageGroupId form one tenant (not
// one tenant each).
func testFairNoGroup(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.tenantSend("q", "", 0, "x0", "x1", "x2")
	e.tenantSend("q", "a", 0, "a0")
	if got, want := strings.Join(inOrder(e.take("q", 4)), " "), "x0 a0 x1 x2"; got != want {
		t.Fatalf("received %s, want %s", got, want)
	}
}

// testFairRedelivery: a message keeps its turn for life: after a nack, an
// expired lease or a snooze it is served before its tenant's later messages
// and before other tenants' messages of later turns.
func testFairRedelivery(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrVisibilityTimeout: "30"})
	e.tenantSend("q", "a", 0, "a0", "a1", "a2", "a3")
	e.tenantSend("q", "b", 0, "b0", "b1", "b2", "b3")
	next := func() model.Delivery {
		t.Helper()
		return e.receiveN(model.ReceiveRequest{Queue: "q", MaxMessages: 1}, 1)[0]
	}
	a0 := next()
	wantBodies(t, "first", []model.Delivery{a0}, "a0")
	wantBodies(t, "second", e.take("q", 1), "b0")
	e.nack("q", a0.Receipt, "boom", nil) // visible again at once
	a0 = next()
	wantBodies(t, "after the nack", []model.Delivery{a0}, "a0")

	// An expired lease.
	e.advance(30 * time.Second)
	a0 = next()
	wantBodies(t, "after the lease expired", []model.Delivery{a0}, "a0")
	e.mustDelete("q", a0.Receipt)

	// A snooze with a delay: ready again after it, still before the
	// messages of later turns.
	a1 := next()
	wantBodies(t, "next", []model.Delivery{a1}, "a1")
	e.snooze("q", a1.Receipt, 10*time.Second)
	wantBodies(t, "while a1 is snoozed", e.take("q", 1), "b1")
	e.advance(10 * time.Second)
	if got, want := strings.Join(inOrder(e.take("q", 5)), " "), "a1 a2 b2 a3 b3"; got != want {
		t.Fatalf("after the snooze received %s, want %s", got, want)
	}
}

// testFairDeadLetter: a dead letter takes a turn in its dead-letter queue as
// a send does: a tenant's dead letter is not delayed by another tenant's
// backlog already there.
func testFairDeadLetter(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("src", map[string]string{
		model.AttrVisibilityTimeout: "1",
		model.AttrRedrivePolicy:     redrivePolicy("dlq", 1),
	})
	e.tenantSend("dlq", "noisy", 0, numbered("n", 30)...)
	e.tenantSend("src", "quiet", 0, "quiet0")
	if d := e.receiveOne("src"); d.Body != "quiet0" {
		t.Fatalf("received %q from src", d.Body)
	}
	e.advance(time.Second)
	e.eventuallyNotInFlight("src")
	e.moveToDLQ("src", "dlq", 31)
	got := e.wantWithin("dlq", "quiet0", 2)
	wantTenantOrder(t, append(got, inOrder(e.take("dlq", 29))...))
}

// testFairMoveTask: a message moved by a move task takes a turn in its
// destination as a send does.
func testFairMoveTask(t *testing.T, s suite) {
	e := s.setup(t)
	mt := e.b
	e.createQueue("dlq", nil)
	e.createQueue("q", map[string]string{
		model.AttrVisibilityTimeout: "1",
		model.AttrRedrivePolicy:     redrivePolicy("dlq", 1),
	})
	e.tenantSend("q", "quiet", 0, "quiet0")
	e.receiveOne("q")
	e.advance(time.Second)
	e.eventuallyNotInFlight("q")
	e.moveToDLQ("q", "dlq", 1)
	e.tenantSend("q", "noisy", 0, numbered("n", 30)...)
	if _, err := mt.StartMoveTask(e.ctx, model.MoveTaskRequest{Source: "dlq"}); err != nil {
		t.Fatal(err)
	}
	e.advanceUntilTask("dlq", model.MoveTaskCompleted, time.Minute)
	got := e.wantWithin("q", "quiet0", 2)
	wantTenantOrder(t, append(got, inOrder(e.take("q", 29))...))
}

// testFairRestart: after a restart a quiet tenant is still served within
// the next 2 receives, and each tenant keeps its send order.
func testFairRestart(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	e.createQueue("q", nil)
	e.tenantSend("q", "noisy", 0, numbered("n", 50)...)
	got := inOrder(e.take("q", 3))
	e.tenantSend("q", "quiet", 0, "quiet0")
	e.tenantSend("q", "other", 0, "o0", "o1", "o2")
	e.reopen()
	got = append(got, e.wantWithin("q", "quiet0", 2)...)
	got = append(got, inOrder(e.take("q", 49))...)
	wantTenantOrder(t, got)
	e.receiveNone("q")
}
