package brokertest

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// The long-delay and stats tests: delays past 15 minutes (SendEntry.LongDelay)
// up to the retention period, durable across restarts; QueueStats.OldestSentAt.
var longDelayTests = []testCase{
	{"PastFifteenMinutes", testLongDelay},
	{"BoundedByRetention", testLongDelayRetention},
	{"FifoRefuses", testLongDelayFifo},
	{"SurvivesRestart", testLongDelayRestart},
}

var statsTests = []testCase{
	{"OldestSentAt", testOldestSentAt},
	{"OldestSentAtOfDeadLetters", testOldestSentAtDeadLetters},
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
