package brokertest

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
)

// The retry tests: attempts against ReceiveCount, and the RetryPolicy's
// backoff after a nack or an expired lease (broker/internal/plan/retry.go), at exact
// instants of the fake clock.
var retryTests = []testCase{
	{"AttemptsVsReceiveCount", testAttemptsVsReceiveCount},
	{"BackoffTableAfterNack", testBackoffTable},
	{"BackoffFromLeaseExpiry", testBackoffFromExpiry},
	{"JitterFullBounds", func(t *testing.T, s suite) { testJitterBounds(t, s, model.JitterFull, false) }},
	{"JitterEqualBounds", func(t *testing.T, s suite) { testJitterBounds(t, s, model.JitterEqual, false) }},
	{"JitterUpBounds", func(t *testing.T, s suite) { testJitterBounds(t, s, model.JitterUp, false) }},
	{"ScheduleThenDeadLetter", testScheduleThenDeadLetter},
	{"ScheduleJitterUp", testScheduleJitterUp},
	{"ScheduleJitterUpBounds", func(t *testing.T, s suite) { testJitterBounds(t, s, model.JitterUp, true) }},
	{"ScheduleJitterFullBounds", func(t *testing.T, s suite) { testJitterBounds(t, s, model.JitterFull, true) }},
	{"NonZeroVisibilityHonoured", testNonZeroVisibilityHonoured},
	{"ExplicitNackDelayHonoured", testExplicitNackDelay},
	{"FifoBackoffHoldsGroup", testFifoBackoffHoldsGroup},
	{"BackoffCountsAsDelayedNotInFlight", testBackoffNotAgainstInFlightCap},
	{"ZeroSecondLeaseExpires", testZeroSecondLease},
}

// testAttemptsVsReceiveCount: a receive adds one to both counts, a snooze
// takes an attempt back, a nack and an expired lease keep it; both counts
// and the receive times are in every delivery.
func testAttemptsVsReceiveCount(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrVisibilityTimeout: "30"})
	e.sendBody("q", "a")
	e.advance(time.Second)
	t1 := e.clock.Now()
	d := e.receiveOne("q")
	wantCounts(t, "first receive", d, 1, 1)
	wantTime(t, "first receive FirstReceiveAt", d.FirstReceiveAt, t1)
	wantTime(t, "first receive LastReceiveAt", d.LastReceiveAt, t1)

	// A snooze of 10 s: delayed, the attempt given back, the receipt stale.
	e.snooze("q", d.Receipt, 10*time.Second)
	e.wantStats("q", 0, 0, 1)
	wantErr(t, "ChangeVisibility with the receipt of a snoozed message", e.changeVisErr("q", d.Receipt, 5*time.Second), model.ErrInvalidParameterValue)
	if err := e.deleteErr("q", d.Receipt); err != nil {
		t.Fatalf("Delete with the receipt of a snoozed message: %v, want success without effect", err)
	}
	e.wantStats("q", 0, 0, 1)
	e.advance(9 * time.Second)
	e.receiveNone("q")
	e.advance(time.Second)
	t2 := e.clock.Now()
	d = e.receiveOne("q")
	wantCounts(t, "receive after a snooze", d, 1, 2)
	wantTime(t, "FirstReceiveAt after a snooze", d.FirstReceiveAt, t1)
	wantTime(t, "LastReceiveAt after a snooze", d.LastReceiveAt, t2)

	// A release (a snooze of 0): visible at once, the attempt given back.
	e.snooze("q", d.Receipt, 0)
	e.wantStats("q", 1, 0, 0)
	d = e.receiveOne("q")
	wantCounts(t, "receive after a release", d, 1, 3)

	// A nack keeps the attempt.
	e.mustChangeVis("q", d.Receipt, 0)
	e.wantStats("q", 1, 0, 0)
	d = e.receiveOne("q")
	wantCounts(t, "receive after a nack", d, 2, 4)
	if d.FailureReason != model.ReasonNack {
		t.Fatalf("FailureReason after ChangeVisibility to 0 = %q, want %q", d.FailureReason, model.ReasonNack)
	}

	// An expired lease keeps it too.
	e.advance(30 * time.Second)
	t3 := e.clock.Now()
	d = e.receiveOne("q")
	wantCounts(t, "receive after an expired lease", d, 3, 5)
	wantTime(t, "FirstReceiveAt after an expired lease", d.FirstReceiveAt, t1)
	wantTime(t, "LastReceiveAt after an expired lease", d.LastReceiveAt, t3)
	if d.FailureReason != model.ReasonLeaseExpired {
		t.Fatalf("FailureReason after an expired lease = %q, want %q", d.FailureReason, model.ReasonLeaseExpired)
	}
}

// testBackoffTable: with jitter none, the n-th nack delays the message by
// exactly min(base * 2^(n-1), max) from the nack: the seed's table, 2 s,
// 4 s, 8 s … capped at 300 s. Meanwhile it is delayed, not in flight, and
// the receipt of the failed lease is stale.
func testBackoffTable(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{
		model.AttrVisibilityTimeout: "60",
		model.AttrRetryPolicy:       retryPolicy(2, 300, model.JitterNone),
	})
	res := e.sendBody("q", "a")
	table := []time.Duration{2, 4, 8, 16, 32, 64, 128, 256, 300, 300}
	for i, want := range table {
		n := i + 1
		want *= time.Second
		d := e.receiveOne("q")
		if d.ID != res.MessageID {
			t.Fatalf("receive %d: got %s, want %s", n, d.ID, res.MessageID)
		}
		wantCounts(t, fmt.Sprintf("receive %d", n), d, n, n)
		e.advance(time.Second) // the nack, not the receive, starts the backoff
		e.mustChangeVis("q", d.Receipt, 0)
		e.wantStats("q", 0, 0, 1)
		if n == 1 {
			wantErr(t, "ChangeVisibility with the receipt of a backing-off message", e.changeVisErr("q", d.Receipt, 10*time.Second), model.ErrInvalidParameterValue)
			wantErr(t, "a second nack of a backing-off message", e.changeVisErr("q", d.Receipt, 0), model.ErrInvalidParameterValue)
			if err := e.deleteErr("q", d.Receipt); err != nil {
				t.Fatalf("Delete with the receipt of a backing-off message: %v, want success without effect", err)
			}
			e.wantStats("q", 0, 0, 1)
		}
		e.advance(want - time.Second)
		e.receiveNone("q")
		e.wantStats("q", 0, 0, 1)
		e.advance(time.Second)
		e.eventuallyStats("q", 1, 0, 0)
	}
	d := e.receiveOne("q")
	wantCounts(t, "the receive after the table", d, len(table)+1, len(table)+1)
}

// testBackoffFromExpiry: an expired lease backs off from the expiry
// instant (not from when a receive notices it); the old receipt is stale.
func testBackoffFromExpiry(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{
		model.AttrVisibilityTimeout: "10",
		model.AttrRetryPolicy:       retryPolicy(4, 300, model.JitterNone),
	})
	e.sendBody("q", "a")
	d := e.receiveOne("q")      // lease until t0+10
	e.advance(10 * time.Second) // t0+10: expired, backing off 4 s
	e.eventuallyStats("q", 0, 0, 1)
	e.advance(2 * time.Second)
	wantErr(t, "ChangeVisibility with the receipt of a lease that expired into a backoff", e.changeVisErr("q", d.Receipt, 10*time.Second), model.ErrInvalidParameterValue)
	if err := e.deleteErr("q", d.Receipt); err != nil {
		t.Fatalf("Delete with the receipt of a backing-off message: %v, want success without effect", err)
	}
	e.advance(time.Second) // t0+13
	e.receiveNone("q")
	e.wantStats("q", 0, 0, 1)
	e.advance(time.Second) // t0+14
	d = e.receiveOne("q")
	wantCounts(t, "receive after the first backoff", d, 2, 2)
	if d.FailureReason != model.ReasonLeaseExpired {
		t.Fatalf("FailureReason = %q, want %q", d.FailureReason, model.ReasonLeaseExpired)
	}
	// The second expiry (t0+24) backs off 8 s; a receive in between that
	// notices the expiry late changes nothing.
	e.advance(15 * time.Second) // t0+29
	e.receiveNone("q")
	e.advance(2 * time.Second) // t0+31
	e.receiveNone("q")
	e.advance(time.Second) // t0+32
	d = e.receiveOne("q")
	wantCounts(t, "receive after the second backoff", d, 3, 3)
}

// testJitterBounds: with jitter full (in [0, d]), equal (in [d/2, d]) or up
// (in [d, 1.5 d]), many messages nacked at the same instant come back
// spread over the bounds, each at the instant plan.Backoff computes from its
// JitterSeed; d is 8 s, as the exponential form {"baseSeconds":8,
// "maxSeconds":8} or the schedule {"delays":[8]}.
func testJitterBounds(t *testing.T, s suite, jitter string, schedule bool) {
	e := s.setup(t)
	const n = 20
	d := 8 * time.Second
	p := model.RetryPolicy{Base: d, Max: d, Jitter: jitter}
	attr := retryPolicy(8, 8, jitter)
	if schedule {
		p = model.RetryPolicy{Delays: []time.Duration{d}, Jitter: jitter}
		attr = retrySchedule(jitter, 8)
	}
	e.createQueue("q", map[string]string{
		model.AttrVisibilityTimeout: "60",
		model.AttrRetryPolicy:       attr,
	})
	for i := 0; i < n; i += 10 {
		var batch []model.SendEntry
		for j := i; j < i+10; j++ {
			batch = append(batch, model.SendEntry{Body: fmt.Sprintf("m%d", j)})
		}
		e.send("q", batch...)
	}
	ds := e.receiveN(model.ReceiveRequest{Queue: "q"}, n)
	nackAt := e.clock.Now()
	var due []time.Time
	for i := 0; i < n; i += 10 {
		var entries []model.VisibilityEntry
		for j, dl := range ds[i : i+10] {
			entries = append(entries, model.VisibilityEntry{ID: fmt.Sprintf("v%d", j), Receipt: dl.Receipt})
			due = append(due, nackAt.Add(plan.Backoff(p, 1, plan.JitterSeed(dl.ID, 1))))
		}
		errs, err := e.b.ChangeVisibility(e.ctx, "q", entries)
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range errs {
			if err != nil {
				t.Fatalf("nack: %v", err)
			}
		}
	}
	sort.Slice(due, func(i, j int) bool { return due[i].Before(due[j]) })
	lo, hi := nackAt, nackAt.Add(d)
	switch jitter {
	case model.JitterEqual:
		lo = nackAt.Add(d / 2)
	case model.JitterUp:
		lo, hi = nackAt.Add(d), nackAt.Add(d+d/2)
	}
	for _, at := range due {
		if at.Before(lo) || at.After(hi) {
			t.Fatalf("plan.Backoff put a message at %v, outside [%v, %v]", at.Sub(nackAt), lo.Sub(nackAt), hi.Sub(nackAt))
		}
	}
	if due[0].Equal(due[n-1]) {
		t.Fatalf("all %d messages back off by the same %v: the jitter does not spread them", n, due[0].Sub(nackAt))
	}
	// Step through the window: at each instant the visible messages are
	// those due (within a millisecond of storage rounding), no more.
	countDue := func(at time.Time) int64 {
		k := 0
		for _, x := range due {
			if !x.After(at) {
				k++
			}
		}
		return int64(k)
	}
	for step := time.Duration(0); step <= hi.Sub(nackAt); step += 250 * time.Millisecond {
		if step > 0 {
			e.advance(250 * time.Millisecond)
		}
		now := e.clock.Now()
		atLeast, atMost := countDue(now.Add(-time.Millisecond)), countDue(now.Add(time.Millisecond))
		deadline := time.Now().Add(realTimeout)
		for {
			st := e.stats("q")
			if st.Visible > atMost {
				t.Fatalf("%v after the nack: %d messages visible, but only %d are due", step, st.Visible, atMost)
			}
			if st.Visible+st.Delayed != n || st.InFlight != 0 {
				t.Fatalf("%v after the nack: counts %+v, want %d visible or delayed, none in flight", step, counts(st), n)
			}
			if st.Visible >= atLeast {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%v after the nack: %d messages visible, want %d", step, st.Visible, atLeast)
			}
			time.Sleep(pollInterval)
		}
	}
	e.eventuallyStats("q", n, 0, 0)
}

// testScheduleThenDeadLetter: the schedule form, jitter none: after its
// n-th failed attempt a message waits exactly delays[n-1] (10 s, 60 s,
// 300 s), then the last delay again (300 s), from the nack or from the
// lease's end; the failure of its maxReceiveCount-th attempt moves it to the
// dead-letter queue at once, with its reason and counts.
func testScheduleThenDeadLetter(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("q", map[string]string{
		model.AttrVisibilityTimeout: "30",
		model.AttrRetryPolicy:       retrySchedule(model.JitterNone, 10, 60, 300),
		model.AttrRedrivePolicy:     redrivePolicy("dlq", 5),
	})
	if got := e.getQueue("q").Config.Attributes()[model.AttrRetryPolicy]; got != `{"delays":[10,60,300],"jitter":"none"}` {
		t.Fatalf("RetryPolicy reads back as %s", got)
	}
	res := e.sendBody("q", "a")
	for i, wait := range []time.Duration{10, 60, 300, 300} {
		n := i + 1
		wait *= time.Second
		d := e.receiveOne("q")
		if d.ID != res.MessageID {
			t.Fatalf("receive %d: got %s, want %s", n, d.ID, res.MessageID)
		}
		wantCounts(t, fmt.Sprintf("receive %d", n), d, n, n)
		if n == 3 {
			// This attempt fails by its lease's end: the wait runs from it.
			e.advance(30 * time.Second)
		} else {
			e.advance(time.Second) // the nack, not the receive, starts the wait
			e.mustChangeVis("q", d.Receipt, 0)
		}
		e.eventuallyStats("q", 0, 0, 1)
		e.advance(wait - time.Second)
		e.receiveNone("q")
		e.wantStats("q", 0, 0, 1)
		e.advance(time.Second)
		e.eventuallyStats("q", 1, 0, 0)
	}
	// The fifth attempt is the last (maxReceiveCount 5): its nack moves the
	// message to the dead-letter queue, without a wait.
	d := e.receiveOne("q")
	wantCounts(t, "receive 5", d, 5, 5)
	e.nack("q", d.Receipt, "card declined", nil)
	e.eventuallyStats("q", 0, 0, 0)
	e.eventuallyStats("dlq", 1, 0, 0)
	if m := e.browsed("dlq", res.MessageID); m.FailureReason != "card declined" || m.Attempts != 5 || m.ReceiveCount != 5 {
		t.Fatalf("dead letter reason %q attempts %d receives %d, want %q, 5, 5", m.FailureReason, m.Attempts, m.ReceiveCount, "card declined")
	}
}

// testScheduleJitterUp: the schedule 10 s, 60 s, 300 s with jitter up: each
// wait is the delay times a factor in [1, 1.5], at the instant plan.Backoff
// draws for the message and attempt (within a millisecond of storage
// rounding).
func testScheduleJitterUp(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{
		model.AttrVisibilityTimeout: "30",
		model.AttrRetryPolicy:       retrySchedule(model.JitterUp, 10, 60, 300),
	})
	p := model.RetryPolicy{Delays: []time.Duration{10 * time.Second, 60 * time.Second, 300 * time.Second}, Jitter: model.JitterUp}
	res := e.sendBody("q", "a")
	for i, delay := range []time.Duration{10, 60, 300, 300, 300} {
		n := i + 1
		delay *= time.Second
		d := e.receiveOne("q")
		wantCounts(t, fmt.Sprintf("receive %d", n), d, n, n)
		e.mustChangeVis("q", d.Receipt, 0)
		wait := plan.Backoff(p, n, plan.JitterSeed(res.MessageID, n))
		if wait < delay || wait > delay+delay/2 {
			t.Fatalf("attempt %d: a wait of %v, outside [%v, %v]", n, wait, delay, delay+delay/2)
		}
		e.wantStats("q", 0, 0, 1)
		e.advance(wait - time.Millisecond)
		e.receiveNone("q")
		e.wantStats("q", 0, 0, 1)
		e.advance(2 * time.Millisecond)
		e.eventuallyStats("q", 1, 0, 0)
	}
}

// testNonZeroVisibilityHonoured: on a queue with a RetryPolicy, a non-zero
// ChangeVisibility is an extension, not a failure: the lease ends exactly
// then, the receipt stays good until then, and only the lease's end is a
// failure (it backs off from that instant, as any expiry does).
func testNonZeroVisibilityHonoured(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{
		model.AttrVisibilityTimeout: "30",
		model.AttrRetryPolicy:       retryPolicy(5, 300, model.JitterNone),
	})
	e.sendBody("q", "a")
	d := e.receiveOne("q")
	e.mustChangeVis("q", d.Receipt, 7*time.Second) // lease until t0+7
	e.wantStats("q", 0, 1, 0)
	e.advance(6 * time.Second)
	e.receiveNone("q")
	e.mustChangeVis("q", d.Receipt, time.Second) // still its lease: until t0+7
	e.wantStats("q", 0, 1, 0)
	e.advance(time.Second) // t0+7: the lease ends, backing off 5 s
	e.eventuallyStats("q", 0, 0, 1)
	e.advance(4 * time.Second)
	e.receiveNone("q")
	e.advance(time.Second) // t0+12
	d = e.receiveOne("q")
	wantCounts(t, "receive after the extended lease ended", d, 2, 2)
}

// testExplicitNackDelay: a nack with a delay waits exactly that delay, not
// the backoff; a nack with a delay of 0 is visible at once; the nack's
// reason is kept.
func testExplicitNackDelay(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{
		model.AttrVisibilityTimeout: "30",
		model.AttrRetryPolicy:       retryPolicy(100, 300, model.JitterNone),
	})
	e.sendBody("q", "a")
	d := e.receiveOne("q")
	e.nack("q", d.Receipt, "upstream 503", dur(3*time.Second))
	e.wantStats("q", 0, 0, 1)
	e.advance(2 * time.Second)
	e.receiveNone("q")
	e.advance(time.Second)
	d = e.receiveOne("q")
	wantCounts(t, "receive after a nack with a 3 s delay", d, 2, 2)
	if d.FailureReason != "upstream 503" {
		t.Fatalf("FailureReason = %q, want the nack's reason", d.FailureReason)
	}
	e.nack("q", d.Receipt, "", dur(0))
	e.wantStats("q", 1, 0, 0)
	d = e.receiveOne("q")
	wantCounts(t, "receive after a nack with a delay of 0", d, 3, 3)
	if d.FailureReason != model.ReasonNack {
		t.Fatalf("FailureReason after a nack without a reason = %q, want %q", d.FailureReason, model.ReasonNack)
	}
	// A snooze with a delay is honoured exactly too, and gives the attempt back.
	e.snooze("q", d.Receipt, 4*time.Second)
	e.advance(3 * time.Second)
	e.receiveNone("q")
	e.advance(time.Second)
	d = e.receiveOne("q")
	wantCounts(t, "receive after a 4 s snooze", d, 3, 4)
}

// testFifoBackoffHoldsGroup: on a FIFO queue a backing-off message keeps
// holding its group: the next message of the group waits for it, other
// groups go on.
func testFifoBackoffHoldsGroup(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", map[string]string{
		model.AttrVisibilityTimeout: "30",
		model.AttrRetryPolicy:       retryPolicy(5, 300, model.JitterNone),
	})
	e.fsend("q.fifo", "g", "1", "a")
	e.fsend("q.fifo", "g", "2", "b")
	first := e.receiveMax("q.fifo", 1, 0)
	wantBodies(t, "first receive", first, "a")
	e.advance(time.Second)
	e.mustChangeVis("q.fifo", first[0].Receipt, 0) // a backs off until t0+6
	e.wantStats("q.fifo", 1, 0, 1)
	if ds := e.receiveMax("q.fifo", 10, 0); len(ds) != 0 {
		t.Fatalf("a backs off, yet a receive gave %v: the group must wait for it", bodies(ds))
	}
	e.fsend("q.fifo", "h", "3", "c")
	wantBodies(t, "another group while g backs off", e.receiveMax("q.fifo", 10, 0), "c")
	e.advance(4 * time.Second)
	if ds := e.receiveMax("q.fifo", 10, 0); len(ds) != 0 {
		t.Fatalf("1 s before a's backoff ends a receive gave %v", bodies(ds))
	}
	e.advance(time.Second)
	again := e.receiveMax("q.fifo", 1, 0)
	wantBodies(t, "g after a's backoff", again, "a")
	wantCounts(t, "a after its backoff", again[0], 2, 2)
	e.mustDelete("q.fifo", again[0].Receipt)
	wantBodies(t, "g after a is deleted", e.receiveMax("q.fifo", 1, 0), "b")
}

// testBackoffNotAgainstInFlightCap: a backing-off message is delayed, not
// in flight, so it does not count against the in-flight cap.
func testBackoffNotAgainstInFlightCap(t *testing.T, s suite) {
	e := s.setup(t, func(o *broker.Config) { o.MaxInFlight = 1 })
	e.createQueue("q", map[string]string{model.AttrRetryPolicy: retryPolicy(60, 300, model.JitterNone)})
	e.sendBody("q", "a")
	e.mustChangeVis("q", e.receiveOne("q").Receipt, 0)
	e.sendBody("q", "b")
	if d := e.receiveOne("q"); d.Body != "b" {
		t.Fatalf("received %q, want b", d.Body)
	}
	e.wantStats("q", 0, 1, 1)
	_, err := e.receive(model.ReceiveRequest{Queue: "q", WaitTime: dur(0)})
	wantErr(t, "a receive past the in-flight cap", err, model.ErrOverLimit)
}

// testZeroSecondLease: a receive with a visibility timeout of 0 gives a
// lease that ends at once, and its end is an expiry like any other: the
// message backs off under the RetryPolicy from that instant, with the
// reason "lease expired"; on its last attempt it moves to the DLQ.
func testZeroSecondLease(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("q", map[string]string{
		model.AttrRetryPolicy:   retryPolicy(10, 300, model.JitterNone),
		model.AttrRedrivePolicy: redrivePolicy("dlq", 2),
	})
	res := e.sendBody("q", "a")
	zero := func() {
		t.Helper()
		ds, err := e.receive(model.ReceiveRequest{Queue: "q", Visibility: dur(0), WaitTime: dur(0)})
		if err != nil || len(ds) != 1 {
			t.Fatalf("a receive with visibility 0 = %d messages, %v; want 1", len(ds), err)
		}
	}
	zero()
	e.eventuallyStats("q", 0, 0, 1)
	e.receiveNone("q")
	e.advance(9 * time.Second)
	e.receiveNone("q")
	e.advance(time.Second)
	d := e.receiveN(model.ReceiveRequest{Queue: "q", Visibility: dur(0)}, 1)[0]
	wantCounts(t, "after the backoff of a 0 s lease", d, 2, 2)
	if d.FailureReason != model.ReasonLeaseExpired {
		t.Fatalf("FailureReason after a 0 s lease = %q, want %q", d.FailureReason, model.ReasonLeaseExpired)
	}
	// That was the last attempt: its 0 s lease ends, the message moves.
	e.moveToDLQ("q", "dlq", 1)
	if m := e.browsed("dlq", res.MessageID); m.FailureReason != model.ReasonLeaseExpired || m.Attempts != 2 {
		t.Fatalf("dead letter reason %q attempts %d, want %q, 2", m.FailureReason, m.Attempts, model.ReasonLeaseExpired)
	}
}
