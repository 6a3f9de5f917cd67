package brokertest

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// The long-delay and stats tests: delays past 15 minutes (SendEntry.LongDelay)
// up to the retention period, durable across restarts; QueueStats.OldestSentAt
// and OldestVisibleSince.
var longDelayTests = []testCase{
	{"PastFifteenMinutes", testLongDelay},
	{"BoundedByRetention", testLongDelayRetention},
	{"FifoRefuses", testLongDelayFifo},
	{"SurvivesRestart", testLongDelayRestart},
}

var statsTests = []testCase{
	{"OldestSentAt", testOldestSentAt},
	{"OldestSentAtOfDeadLetters", testOldestSentAtDeadLetters},
	{"OldestVisibleSince", testOldestVisibleSince},
	{"OldestVisibleSinceRestart", testOldestVisibleSinceRestart},
	{"OldestVisibleSinceUnread", testOldestVisibleSinceUnread},
	{"DeadLetterCount", testStatsDeadLetters},
}

func testLongDelay(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil) // retention 4 days
	t0 := e.clock.Now()
	res := e.send("q", model.SendEntry{Body: "later", Delay: dur(2 * time.Hour), LongDelay: true})[0]
	e.wantStats("q", 0, 0, 1)
	e.advance(2*time.Hour - time.Second)
	e.receiveNone("q")
	e.wantStats("q", 0, 0, 1)
	e.advance(time.Second)
	d := e.receiveOne("q")
	if d.ID != res.MessageID {
		t.Fatalf("received %s, want %s", d.ID, res.MessageID)
	}
	wantTime(t, "SentAt of a long-delayed message", d.SentAt, t0)
	// Without LongDelay, 15 minutes is the most.
	wantErr(t, "a 16-minute delay without LongDelay", e.sendErr("q", model.SendEntry{Body: "x", Delay: dur(16 * time.Minute)}), model.ErrInvalidParameterValue)
}

// testLongDelayRetention: a long delay must end before the message expires.
func testLongDelayRetention(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrMessageRetentionPeriod: "3600"})
	wantErr(t, "a delay of the whole retention period",
		e.sendErr("q", model.SendEntry{Body: "x", Delay: dur(time.Hour), LongDelay: true}), model.ErrInvalidParameterValue)
	wantErr(t, "a delay past the retention period",
		e.sendErr("q", model.SendEntry{Body: "x", Delay: dur(2 * time.Hour), LongDelay: true}), model.ErrInvalidParameterValue)
	wantErr(t, "a negative delay", e.sendErr("q", model.SendEntry{Body: "x", Delay: dur(-time.Second), LongDelay: true}), model.ErrInvalidParameterValue)
	e.send("q", model.SendEntry{Body: "last", Delay: dur(time.Hour - time.Second), LongDelay: true})
	e.wantStats("q", 0, 0, 1)
	e.advance(time.Hour - 2*time.Second)
	e.receiveNone("q")
	e.advance(time.Second)
	if d := e.receiveOne("q"); d.Body != "last" {
		t.Fatalf("received %q, want last", d.Body)
	}
}

// testLongDelayFifo: FIFO queues refuse per-message delays, long ones too.
func testLongDelayFifo(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", nil)
	m := fmsg("g", "1", "x")
	m.Delay, m.LongDelay = dur(time.Hour), true
	wantErr(t, "a long delay on a FIFO queue", e.sendErr("q.fifo", m), model.ErrInvalidParameterValue)
	e.wantStats("q.fifo", 0, 0, 0)
}

func testLongDelayRestart(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	e.createQueue("q", nil)
	e.send("q", model.SendEntry{Body: "later", Delay: dur(time.Hour), LongDelay: true})
	e.advance(30 * time.Minute)
	e.reopen()
	e.wantStats("q", 0, 0, 1)
	e.advance(30*time.Minute - time.Second)
	e.receiveNone("q")
	e.advance(time.Second)
	if d := e.receiveOne("q"); d.Body != "later" {
		t.Fatalf("received %q, want later", d.Body)
	}
}

// wantOldest checks a queue's OldestSentAt (zero: empty).
func (e *env) wantOldest(queue string, want time.Time) {
	e.t.Helper()
	got := e.stats(queue).OldestSentAt
	if want.IsZero() {
		if !got.IsZero() {
			e.t.Fatalf("%s OldestSentAt = %v, want zero", queue, got)
		}
		return
	}
	wantTime(e.t, queue+" OldestSentAt", got, want)
}

// testOldestSentAt: the send time of the oldest message, whatever its
// state (visible, in flight, delayed); zero when the queue is empty.
func testOldestSentAt(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.wantOldest("q", time.Time{})
	t1 := e.clock.Now()
	e.sendBody("q", "first")
	e.advance(5 * time.Second)
	t2 := e.clock.Now()
	e.send("q", model.SendEntry{Body: "second", Delay: dur(time.Minute)})
	e.advance(5 * time.Second)
	e.sendBody("q", "third")
	e.wantOldest("q", t1)
	ds := e.receiveN(model.ReceiveRequest{Queue: "q"}, 2) // first and third, in flight
	e.wantOldest("q", t1)
	for _, d := range ds {
		if d.Body == "first" {
			e.mustDelete("q", d.Receipt)
		}
	}
	e.wantOldest("q", t2) // the delayed one
	if _, err := e.b.DeleteMessages(e.ctx, "q", []string{ds[0].ID, ds[1].ID}); err != nil {
		t.Fatal(err)
	}
	e.wantOldest("q", t2)
	if err := e.b.PurgeQueue(e.ctx, "q"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the purged queue's OldestSentAt is zero", func() bool { return e.stats("q").OldestSentAt.IsZero() })
}

// wantVisibleSince checks a queue's OldestVisibleSince (zero: no message
// visible), as GetQueue and AllStats give it; a backend may round it down
// to a whole second.
func (e *env) wantVisibleSince(queue string, want time.Time) {
	e.t.Helper()
	one := e.stats(queue).OldestVisibleSince // GetQueue first: on PostgreSQL it promotes what is due
	all, err := e.b.AllStats(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, q := range all {
		if q.Name == queue && !q.Stats.OldestVisibleSince.Equal(one) {
			e.t.Fatalf("%s OldestVisibleSince: AllStats %v, GetQueue %v", queue, q.Stats.OldestVisibleSince, one)
		}
	}
	if want.IsZero() {
		if !one.IsZero() {
			e.t.Fatalf("%s OldestVisibleSince = %v, want zero (no message visible)", queue, one)
		}
		return
	}
	if d := want.Sub(one); d < 0 || d >= time.Second {
		e.t.Fatalf("%s OldestVisibleSince = %v, want %v (or up to a second before)", queue, one, want)
	}
}

// testOldestVisibleSince: when the message visible longest became visible:
// its send, the end of its delay, backoff or lease. Delayed, backing-off and
// in-flight messages do not count; a queue of delayed messages only has
// none.
func testOldestVisibleSince(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.wantVisibleSince("q", time.Time{})
	t0 := e.clock.Now()
	e.send("q", model.SendEntry{Body: "d", Delay: dur(time.Minute)})
	e.wantVisibleSince("q", time.Time{}) // delayed only
	e.advance(10 * time.Second)
	e.sendBody("q", "a")
	e.wantVisibleSince("q", t0.Add(10*time.Second))
	e.advance(5 * time.Second)
	e.sendBody("q", "b")
	e.wantVisibleSince("q", t0.Add(10*time.Second))
	var a, b model.Delivery
	for _, d := range e.receiveN(model.ReceiveRequest{Queue: "q", Visibility: dur(100 * time.Second)}, 2) {
		if d.Body == "a" {
			a = d
		} else {
			b = d
		}
	}
	if a.Body != "a" || b.Body != "b" {
		t.Fatalf("received %q and %q, want a and b", a.Body, b.Body)
	}
	e.wantVisibleSince("q", time.Time{}) // in flight and delayed only
	e.advance(45 * time.Second)          // t0+60: d's delay ends
	e.wantVisibleSince("q", t0.Add(time.Minute))
	backoff := 30 * time.Second
	e.nack("q", a.Receipt, "later", &backoff) // a backs off until t0+90
	e.wantVisibleSince("q", t0.Add(time.Minute))
	if d := e.receiveOneFor("q", time.Hour); d.Body != "d" {
		t.Fatalf("received %q, want d", d.Body)
	}
	e.wantVisibleSince("q", time.Time{}) // backing off and in flight only
	e.advance(30 * time.Second)          // t0+90: a's backoff ends
	e.wantVisibleSince("q", t0.Add(90*time.Second))
	e.advance(25 * time.Second) // t0+115: b's lease ends
	e.wantVisibleSince("q", t0.Add(90*time.Second))
	if d := e.receiveOneFor("q", time.Hour); d.Body != "a" {
		t.Fatalf("received %q, want a", d.Body)
	}
	e.wantVisibleSince("q", t0.Add(115*time.Second)) // b, since its lease ended
	if err := e.b.PurgeQueue(e.ctx, "q"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the purged queue has no visible message", func() bool { return e.stats("q").OldestVisibleSince.IsZero() })
}

// testOldestVisibleSinceRestart: OldestVisibleSince survives a restart (the
// embedded store rebuilds it from its records).
func testOldestVisibleSinceRestart(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	e.createQueue("q", nil)
	t0 := e.clock.Now()
	e.sendBody("q", "a")
	e.send("q", model.SendEntry{Body: "d", Delay: dur(time.Minute)})
	e.advance(10 * time.Second)
	e.sendBody("q", "b")
	e.reopen()
	e.wantVisibleSince("q", t0)
	e.receiveOne("q") // a
	e.wantVisibleSince("q", t0.Add(10*time.Second))
}

// testOldestVisibleSinceUnread: AllStats, which health, /v1/stats and
// /metrics read, knows when a message became visible without a receive or
// GetQueue of its queue since: a delay that ended, and a lease that ended
// (on a queue without a retry or redrive policy), make their messages wait
// for a consumer from that instant. When every consumer is gone, nothing
// else reads the queue, and its age is what must show it.
func testOldestVisibleSinceUnread(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.createQueue("r", nil)
	t0 := e.clock.Now()
	e.send("q", model.SendEntry{Body: "d", Delay: dur(time.Minute)})
	e.sendBody("r", "a")
	e.receiveOneFor("r", 30*time.Second)
	e.advance(2 * time.Minute)
	all, err := e.b.AllStats(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Time{"q": t0.Add(time.Minute), "r": t0.Add(30 * time.Second)}
	for _, q := range all {
		w, ok := want[q.Name]
		if !ok {
			continue
		}
		delete(want, q.Name)
		if got := q.Stats.OldestVisibleSince; got.IsZero() || w.Sub(got) < 0 || w.Sub(got) >= time.Second {
			t.Errorf("%s: AllStats OldestVisibleSince = %v, want %v (or up to a second before)", q.Name, got, w)
		}
	}
	if len(want) > 0 {
		t.Fatalf("AllStats lacks %v", want)
	}
}

// testOldestSentAtDeadLetters: a dead letter in a standard DLQ keeps its
// send time, and so the DLQ's oldest message is as old as it.
func testOldestSentAtDeadLetters(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("src", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 1)})
	t0 := e.clock.Now()
	e.sendBody("src", "a")
	e.advance(time.Minute)
	e.mustChangeVis("src", e.receiveOne("src").Receipt, 0)
	e.wantStats("dlq", 1, 0, 0)
	e.wantOldest("dlq", t0)
	e.wantOldest("src", time.Time{})
}

// testStatsDeadLetters: Stats counts the messages of the queue's DLQ, -1
// without one.
func testStatsDeadLetters(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("src", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 1)})
	e.createQueue("plain", nil)
	e.send("src", model.SendEntry{Body: "a"}, model.SendEntry{Body: "b"})
	for _, d := range e.receiveN(model.ReceiveRequest{Queue: "src"}, 2) {
		e.mustChangeVis("src", d.Receipt, 0)
	}
	_, st, err := e.b.Stats(e.ctx, "src")
	if err != nil {
		t.Fatal(err)
	}
	if st.DeadLetters != 2 || counts(st.QueueStats) != (model.QueueStats{}) {
		t.Fatalf("Stats(src) = %+v, want 2 dead letters and no message", st)
	}
	if _, st, err := e.b.Stats(e.ctx, "plain"); err != nil || st.DeadLetters != -1 {
		t.Fatalf("Stats(plain) = %+v, %v; want DeadLetters -1", st, err)
	}
}
