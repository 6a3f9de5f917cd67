package brokertest

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// The dead-letter tests of issue 8: a failure that used the last attempt
// moves the message to the DLQ at once, with its reason and its forensics
// (attempts, receive count, first and last receive, source); Sluice.MaxAttempts
// overrides maxReceiveCount per message.
var deadLetterTests = []testCase{
	{"LastNackMovesAtOnce", testLastNackMovesAtOnce},
	{"LastExpiryMoves", testLastExpiryMoves},
	{"MaxAttemptsOverridesLower", testMaxAttemptsLower},
	{"MaxAttemptsOverridesHigher", testMaxAttemptsHigher},
	{"IntoFullDLQNeverRefused", testDeadLetterIntoFullDLQ},
}

// wantForensics checks what a dead letter keeps, as Browse shows it.
func wantForensics(t testing.TB, m model.BrowsedMessage, attempts, receiveCount int, first, last time.Time, reason, source string) {
	t.Helper()
	if m.Attempts != attempts || m.ReceiveCount != receiveCount {
		t.Fatalf("dead letter %s: Attempts %d, ReceiveCount %d; want %d, %d", m.ID, m.Attempts, m.ReceiveCount, attempts, receiveCount)
	}
	wantTime(t, "dead letter FirstReceiveAt", m.FirstReceiveAt, first)
	wantTime(t, "dead letter LastReceiveAt", m.LastReceiveAt, last)
	if m.FailureReason != reason {
		t.Fatalf("dead letter FailureReason = %q, want %q", m.FailureReason, reason)
	}
	if m.DeadLetterSource != source {
		t.Fatalf("dead letter DeadLetterSource = %q, want %q", m.DeadLetterSource, source)
	}
	if m.State != model.StateVisible {
		t.Fatalf("dead letter State = %q, want %q", m.State, model.StateVisible)
	}
}

// testLastNackMovesAtOnce: with maxReceiveCount 2 and a RetryPolicy, the
// first nack backs off and the second (the last attempt) moves the message
// to the DLQ at once, without a backoff, with the nack's reason.
func testLastNackMovesAtOnce(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("src", map[string]string{
		model.AttrVisibilityTimeout: "30",
		model.AttrRedrivePolicy:     redrivePolicy("dlq", 2),
		model.AttrRetryPolicy:       retryPolicy(5, 300, model.JitterNone),
	})
	res := e.sendBody("src", "poison")
	e.advance(time.Second)
	t1 := e.clock.Now()
	d := e.receiveOne("src")
	e.nack("src", d.Receipt, "first failure", nil)
	e.wantStats("src", 0, 0, 1)
	e.wantStats("dlq", 0, 0, 0)
	e.advance(5 * time.Second)
	t2 := e.clock.Now()
	d = e.receiveOne("src")
	wantCounts(t, "second receive", d, 2, 2)
	e.advance(time.Second)
	e.nack("src", d.Receipt, "bad input: field x", nil)
	e.wantStats("src", 0, 0, 0)
	e.wantStats("dlq", 1, 0, 0)
	if err := e.deleteErr("src", d.Receipt); err != nil {
		t.Fatalf("Delete with the source receipt of a dead letter: %v, want success without effect", err)
	}
	wantErr(t, "ChangeVisibility with the source receipt of a dead letter", e.changeVisErr("src", d.Receipt, 0), model.ErrInvalidParameterValue)
	e.wantStats("dlq", 1, 0, 0)

	m := e.browsed("dlq", res.MessageID)
	wantForensics(t, m, 2, 2, t1, t2, "bad input: field x", "src")
	_, st, err := e.b.Stats(e.ctx, "src")
	if err != nil {
		t.Fatal(err)
	}
	if st.DeadLetters != 1 {
		t.Fatalf("Stats(src).DeadLetters = %d, want 1", st.DeadLetters)
	}
	e.advance(time.Second)
	t3 := e.clock.Now()
	dl := e.receiveOne("dlq")
	if dl.ID != res.MessageID || dl.DeadLetterSource != "src" || dl.FailureReason != "bad input: field x" {
		t.Fatalf("DLQ delivery %s source %q reason %q, want %s source src reason %q", dl.ID, dl.DeadLetterSource, dl.FailureReason, res.MessageID, "bad input: field x")
	}
	wantCounts(t, "the DLQ receive (the counts go on)", dl, 3, 3)
	wantTime(t, "DLQ FirstReceiveAt", dl.FirstReceiveAt, t1)
	wantTime(t, "DLQ LastReceiveAt", dl.LastReceiveAt, t3)
}

// testLastExpiryMoves: the last attempt's lease expiring moves the message
// to the DLQ with the reason "lease expired", noticed by a receive on the
// source at the latest, and without waiting for the RetryPolicy's backoff.
func testLastExpiryMoves(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("src", map[string]string{
		model.AttrVisibilityTimeout: "10",
		model.AttrRedrivePolicy:     redrivePolicy("dlq", 1),
		model.AttrRetryPolicy:       retryPolicy(600, 600, model.JitterNone),
	})
	res := e.sendBody("src", "slow")
	e.advance(time.Second)
	t1 := e.clock.Now()
	e.receiveOne("src")
	e.advance(10 * time.Second)
	e.moveToDLQ("src", "dlq", 1)
	e.wantStats("src", 0, 0, 0)
	wantForensics(t, e.browsed("dlq", res.MessageID), 1, 1, t1, t1, model.ReasonLeaseExpired, "src")
}

// testMaxAttemptsLower: a message's Sluice.MaxAttempts below the queue's
// maxReceiveCount moves it after its own attempts; the others keep the
// queue's.
func testMaxAttemptsLower(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("src", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 5)})
	once := e.send("src", model.SendEntry{Body: "once", Attributes: map[string]model.MessageAttribute{model.MsgAttrMaxAttempts: numAttr(1)}})[0]
	e.sendBody("src", "five")
	ds := e.receiveN(model.ReceiveRequest{Queue: "src"}, 2)
	for _, d := range ds {
		want := 0
		if d.Body == "once" {
			want = 1
		}
		if d.MaxAttempts != want {
			t.Fatalf("%q: MaxAttempts %d, want %d", d.Body, d.MaxAttempts, want)
		}
		e.mustChangeVis("src", d.Receipt, 0)
	}
	e.wantStats("src", 1, 0, 0)
	e.wantStats("dlq", 1, 0, 0)
	if m := e.browsed("dlq", once.MessageID); m.FailureReason != model.ReasonNack || m.Attempts != 1 || m.MaxAttempts != 1 {
		t.Fatalf("dead letter reason %q attempts %d max %d, want %q, 1, 1", m.FailureReason, m.Attempts, m.MaxAttempts, model.ReasonNack)
	}
	if d := e.receiveOne("src"); d.Body != "five" {
		t.Fatalf("src gave %q, want five", d.Body)
	}
}

// testMaxAttemptsHigher: Sluice.MaxAttempts above maxReceiveCount keeps the
// message for its own attempts.
func testMaxAttemptsHigher(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("src", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 1)})
	e.send("src", model.SendEntry{Body: "three", Attributes: map[string]model.MessageAttribute{model.MsgAttrMaxAttempts: numAttr(3)}})
	for n := 1; n <= 3; n++ {
		d := e.receiveOne("src")
		wantCounts(t, "receive", d, n, n)
		e.mustChangeVis("src", d.Receipt, 0)
	}
	e.wantStats("src", 0, 0, 0)
	e.wantStats("dlq", 1, 0, 0)
}

// testDeadLetterIntoFullDLQ: dead-lettering is never refused, even into a
// DLQ at its MaxDepth.
func testDeadLetterIntoFullDLQ(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", map[string]string{model.AttrMaxDepth: "1"})
	e.createQueue("src", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 1)})
	e.sendBody("dlq", "already")
	err := e.sendErr("dlq", model.SendEntry{Body: "refused"})
	wantErr(t, "a send into the full DLQ", err, model.ErrThrottled)
	e.send("src", model.SendEntry{Body: "a"}, model.SendEntry{Body: "b"})
	ds := e.receiveN(model.ReceiveRequest{Queue: "src"}, 2)
	e.mustChangeVis("src", ds[0].Receipt, 0)
	e.mustChangeLease("src", model.LeaseEntry{Receipt: ds[1].Receipt, Kind: model.DeadLetterNow, Reason: "never"})
	e.wantStats("src", 0, 0, 0)
	e.wantStats("dlq", 3, 0, 0)
}
