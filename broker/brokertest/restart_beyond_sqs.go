package brokertest

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
)

// The restart tests of the Sluice state: attempts, failure reasons,
// backoffs, priorities and the pause survive a restart (Harness.Reopen).
var sluiceRestartTests = []testCase{
	{"BackoffAndAttempts", testRestartBackoff},
	{"ExpiryIntoBackoffWhileDown", testRestartExpiryBackoff},
	{"ScheduleJitterUp", testRestartSchedule},
	{"PriorityAndPause", testRestartPriorityPause},
}

// testRestartBackoff: a message backing off after a nack stays delayed
// until its exact instant across a restart, and keeps its attempts,
// receive count, first receive and reason.
func testRestartBackoff(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	e.createQueue("q", map[string]string{model.AttrRetryPolicy: retryPolicy(10, 300, model.JitterNone)})
	e.sendBody("q", "a")
	t1 := e.clock.Now()
	d := e.receiveOne("q")
	e.snooze("q", d.Receipt, 0) // attempts back to 0, receive count 1
	d = e.receiveOne("q")
	e.nack("q", d.Receipt, "flaky", nil) // attempts 1: backs off 10 s, until t1+10
	e.advance(4 * time.Second)
	e.reopen()
	e.wantStats("q", 0, 0, 1)
	wantErr(t, "ChangeVisibility with the receipt of a backing-off message after a restart",
		e.changeVisErr("q", d.Receipt, time.Minute), model.ErrInvalidParameterValue)
	e.advance(5 * time.Second)
	e.receiveNone("q")
	e.advance(time.Second)
	d = e.receiveOne("q")
	wantCounts(t, "after the restart", d, 2, 3)
	wantTime(t, "FirstReceiveAt after the restart", d.FirstReceiveAt, t1)
	if d.FailureReason != "flaky" {
		t.Fatalf("FailureReason after the restart = %q, want flaky", d.FailureReason)
	}
}

// testRestartExpiryBackoff: a lease that ends while the backend is down
// backs off from its expiry instant, not from the restart.
func testRestartExpiryBackoff(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	e.createQueue("dlq", nil)
	e.createQueue("q", map[string]string{
		model.AttrVisibilityTimeout: "10",
		model.AttrRetryPolicy:       retryPolicy(20, 300, model.JitterNone),
		model.AttrRedrivePolicy:     redrivePolicy("dlq", 2),
	})
	e.sendBody("q", "a")
	e.receiveOne("q") // lease until t0+10, then backs off until t0+30
	e.advance(15 * time.Second)
	e.reopen() // at t0+15
	e.eventuallyStats("q", 0, 0, 1)
	e.advance(14 * time.Second) // t0+29
	e.receiveNone("q")
	e.advance(time.Second) // t0+30
	d := e.receiveOne("q")
	wantCounts(t, "after the backoff", d, 2, 2)
	// The second (last) attempt's lease ends while down: the message moves.
	e.advance(5 * time.Second)
	e.reopen()
	e.advance(5 * time.Second)
	e.eventuallyNotInFlight("q")
	e.moveToDLQ("q", "dlq", 1)
	if m := e.browsed("dlq", d.ID); m.FailureReason != model.ReasonLeaseExpired || m.Attempts != 2 || m.DeadLetterSource != "q" {
		t.Fatalf("dead letter reason %q attempts %d source %q, want %q, 2, q", m.FailureReason, m.Attempts, m.DeadLetterSource, model.ReasonLeaseExpired)
	}
}

// testRestartSchedule: a queue's schedule and jitter survive a restart, and
// a message backing off under them comes back at the same drawn instant
// (the draw is computed again from the message and attempt, not stored).
func testRestartSchedule(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	e.createQueue("q", map[string]string{model.AttrRetryPolicy: retrySchedule(model.JitterUp, 10, 60)})
	p := model.RetryPolicy{Delays: []time.Duration{10 * time.Second, 60 * time.Second}, Jitter: model.JitterUp}
	res := e.sendBody("q", "a")
	e.nack("q", e.receiveOne("q").Receipt, "", nil)
	e.advance(plan.Backoff(p, 1, plan.JitterSeed(res.MessageID, 1)))
	e.nack("q", e.receiveOne("q").Receipt, "", nil) // attempt 2: 60 s up to 90 s
	wait := plan.Backoff(p, 2, plan.JitterSeed(res.MessageID, 2))
	e.advance(30 * time.Second)
	e.reopen()
	if got := e.getQueue("q").Config.Attributes()[model.AttrRetryPolicy]; got != `{"delays":[10,60],"jitter":"up"}` {
		t.Fatalf("RetryPolicy after a restart = %s", got)
	}
	e.wantStats("q", 0, 0, 1)
	e.advance(wait - 30*time.Second - time.Millisecond)
	e.receiveNone("q")
	e.advance(2 * time.Millisecond)
	wantCounts(t, "after the restart", e.receiveOne("q"), 3, 3)
}

// testRestartPriorityPause: priorities order the queue after a restart,
// and a paused queue stays paused.
func testRestartPriorityPause(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	e.createQueue("q", nil)
	e.send("q", withPriority("low", -1), withPriority("mid", 0), withPriority("high", 9))
	e.setPaused("q", true)
	e.reopen()
	if !e.getQueue("q").Config.Paused {
		t.Fatal("the queue was resumed by a restart")
	}
	e.receiveNone("q")
	e.setPaused("q", false)
	var got []string
	for i := 0; i < 3; i++ {
		d := e.receiveN(model.ReceiveRequest{Queue: "q", MaxMessages: 1}, 1)[0]
		got = append(got, d.Body)
	}
	if got[0] != "high" || got[1] != "mid" || got[2] != "low" {
		t.Fatalf("after a restart received %v, want high mid low", got)
	}
}
