package brokertest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
)

// A message's status by id (Broker.MessageStatus): its live states, the
// completed records a queue with CompletedRetentionSeconds keeps, a dead
// letter asked on its source queue and on its dead-letter queue, unknown ids.
var jobStatusTests = []testCase{
	{"Transitions", testJobStatusTransitions},
	{"CompletedRecords", testJobStatusCompleted},
	{"NoRecordsByDefault", testJobStatusNoRecords},
	{"DeadLettered", testJobStatusDeadLettered},
	{"Unknown", testJobStatusUnknown},
	{"ResultTooLarge", testJobStatusResultTooLarge},
	{"ResultInvalidCharacters", testJobStatusResultInvalidChars},
	{"LeaseEndedIntoBackoff", testJobStatusLeaseEndedBackoff},
	{"RecordsSurviveRestart", testJobStatusRecordsRestart},
	{"Replayed", testJobStatusReplayed},
	{"ExpiredRecords", testJobStatusExpired},
	{"FailureHistory", testJobStatusFailures},
	{"FailureHistoryBounded", testJobStatusFailuresBounded},
	{"FailureHistorySurvivesRestart", testJobStatusFailuresRestart},
	{"FailureHistoryExpiredDeadLetter", testJobStatusFailuresExpired},
}

// status reads a message's status, failing when it is not found.
func (e *env) status(queue, id string) model.MessageStatus {
	e.t.Helper()
	st, found, err := e.b.MessageStatus(e.ctx, queue, id)
	if err != nil || !found {
		e.t.Fatalf("MessageStatus(%s, %s) = found %v, err %v; want found", queue, id, found, err)
	}
	if !strings.EqualFold(st.ID, id) || st.Queue != queue {
		e.t.Fatalf("MessageStatus(%s, %s) names message %s of queue %s", queue, id, st.ID, st.Queue)
	}
	return st
}

// noStatus checks that queue knows no message id.
func (e *env) noStatus(queue, id string) {
	e.t.Helper()
	st, found, err := e.b.MessageStatus(e.ctx, queue, id)
	if err != nil || found {
		e.t.Fatalf("MessageStatus(%s, %s) = %+v, found %v, err %v; want not found", queue, id, st, found, err)
	}
}

func wantState(t testing.TB, what string, st model.MessageStatus, state model.JobState, attempts int) {
	t.Helper()
	if st.State != state || st.Attempts != attempts {
		t.Fatalf("%s: state %s, attempts %d; want %s, %d (%+v)", what, st.State, st.Attempts, state, attempts, st)
	}
}

// deleteWith deletes a lease with an ack's result.
func (e *env) deleteWith(queue, receipt string, result *string) error {
	e.t.Helper()
	errs, err := e.b.Delete(e.ctx, queue, []model.DeleteEntry{{ID: "d", Receipt: receipt, Result: result}})
	if err != nil {
		return err
	}
	return errs[0]
}

func testJobStatusTransitions(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	id := e.send("q", model.SendEntry{Body: "job", Delay: dur(60 * time.Second)})[0].MessageID
	t0 := e.clock.Now()

	st := e.status("q", id)
	wantState(t, "a delayed send", st, model.JobDelayed, 0)
	if !sameInstant(st.VisibleAt, t0.Add(60*time.Second)) {
		t.Fatalf("delayed: visibleAt %v, want %v", st.VisibleAt, t0.Add(60*time.Second))
	}
	e.advance(60 * time.Second)
	st = e.status("q", id)
	wantState(t, "its delay over", st, model.JobReady, 0)
	if !sameInstant(st.VisibleAt, t0.Add(60*time.Second)) {
		t.Fatalf("ready: visibleAt %v, want when its delay ended, %v", st.VisibleAt, t0.Add(60*time.Second))
	}

	d := e.receiveOneFor("q", 30*time.Second)
	st = e.status("q", id)
	wantState(t, "received", st, model.JobInFlight, 1)
	if !sameInstant(st.LeaseEndsAt, e.clock.Now().Add(30*time.Second)) {
		t.Fatalf("in flight: leaseEndsAt %v, want %v", st.LeaseEndsAt, e.clock.Now().Add(30*time.Second))
	}
	e.nack("q", d.Receipt, "db down", dur(10*time.Second))
	st = e.status("q", id)
	wantState(t, "nacked with a delay", st, model.JobBackingOff, 1)
	if st.Reason != "db down" || !sameInstant(st.VisibleAt, e.clock.Now().Add(10*time.Second)) {
		t.Fatalf("backing off: reason %q, visibleAt %v; want %q, %v", st.Reason, st.VisibleAt, "db down", e.clock.Now().Add(10*time.Second))
	}
	e.advance(10 * time.Second)
	st = e.status("q", id)
	wantState(t, "its backoff over", st, model.JobReady, 1)
	if st.Reason != "db down" {
		t.Fatalf("ready again: reason %q, want the last failure's", st.Reason)
	}
	d = e.receiveOne("q")
	wantState(t, "received again", e.status("q", id), model.JobInFlight, 2)
	// Ids compare in any case.
	wantState(t, "asked in upper case", e.status("q", strings.ToUpper(id)), model.JobInFlight, 2)
	e.mustDelete("q", d.Receipt)
	e.noStatus("q", id) // no CompletedRetentionSeconds: nothing kept
}

func testJobStatusCompleted(t *testing.T, s suite) {
	e := s.setup(t)
	q := e.createQueue("q", map[string]string{model.AttrCompletedRetentionSeconds: "60"})
	if q.Config.CompletedRetention != time.Minute {
		t.Fatalf("CompletedRetention = %v, want 1m", q.Config.CompletedRetention)
	}
	a := e.sendBody("q", "with a result").MessageID
	b := e.sendBody("q", "deleted as SQS does").MessageID
	ds := e.receiveN(model.ReceiveRequest{Queue: "q", MaxMessages: 2}, 2)
	e.advance(5 * time.Second)
	done := e.clock.Now()
	result := `{"invoice":"F-17"}`
	for _, d := range ds {
		var r *string
		if d.ID == a {
			r = &result
		}
		if err := e.deleteWith("q", d.Receipt, r); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
	st := e.status("q", a)
	wantState(t, "acked with a result", st, model.JobCompleted, 1)
	if st.Result == nil || *st.Result != result || !sameInstant(st.CompletedAt, done) {
		t.Fatalf("completed: result %v, completedAt %v; want %q, %v", st.Result, st.CompletedAt, result, done)
	}
	st = e.status("q", b)
	wantState(t, "deleted without a result", st, model.JobCompleted, 1)
	if st.Result != nil {
		t.Fatalf("completed by a plain delete: result %q, want none", *st.Result)
	}
	e.wantStats("q", 0, 0, 0) // a record is no message
	e.advance(59 * time.Second)
	e.status("q", a)
	e.advance(time.Second)
	e.noStatus("q", a)
	e.noStatus("q", b)
	// Lowering the retention to 0 keeps no new record.
	if err := e.b.SetQueueAttributes(e.ctx, "q", map[string]string{model.AttrCompletedRetentionSeconds: "0"}); err != nil {
		t.Fatalf("SetQueueAttributes: %v", err)
	}
	c := e.sendBody("q", "c").MessageID
	e.mustDelete("q", e.receiveOne("q").Receipt)
	e.noStatus("q", c)
}

func testJobStatusNoRecords(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	id := e.sendBody("q", "x").MessageID
	r := "done"
	if err := e.deleteWith("q", e.receiveOne("q").Receipt, &r); err != nil {
		t.Fatalf("Delete with a result: %v", err)
	}
	e.noStatus("q", id)
}

func testJobStatusDeadLettered(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("q", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 1)})
	id := e.sendBody("q", "poison").MessageID
	d := e.receiveOne("q")
	e.nack("q", d.Receipt, "bad input", nil)
	e.moveToDLQ("q", "dlq", 1)

	st := e.status("q", id) // asked on the queue it came from
	wantState(t, "asked on its source", st, model.JobDeadLettered, 1)
	if st.DeadLetterQueue != "dlq" || st.DeadLetterSource != "q" || st.Reason != "bad input" {
		t.Fatalf("dead-lettered on its source: dlq %q, source %q, reason %q; want dlq, q, bad input", st.DeadLetterQueue, st.DeadLetterSource, st.Reason)
	}
	st = e.status("dlq", id)
	wantState(t, "asked on the dead-letter queue", st, model.JobDeadLettered, 1)
	if st.DeadLetterQueue != "dlq" || st.DeadLetterSource != "q" {
		t.Fatalf("dead-lettered on its dead-letter queue: dlq %q, source %q", st.DeadLetterQueue, st.DeadLetterSource)
	}
	// Another queue with the same dead-letter queue does not see it.
	e.createQueue("other", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 1)})
	e.noStatus("other", id)
}

func testJobStatusUnknown(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.sendBody("q", "x")
	e.noStatus("q", model.NewMessageID())
	e.noStatus("q", "not-an-id")
	e.noStatus("q", "")
	_, _, err := e.b.MessageStatus(e.ctx, "missing", model.NewMessageID())
	wantErr(t, "the status on a missing queue", err, model.ErrQueueDoesNotExist)
}

func testJobStatusResultTooLarge(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrCompletedRetentionSeconds: "60"})
	id := e.sendBody("q", "x").MessageID
	d := e.receiveOne("q")
	big := strings.Repeat("r", model.MaxResultBytes+1)
	wantErr(t, "an ack with a result past 64 KiB", e.deleteWith("q", d.Receipt, &big), model.ErrInvalidParameterValue)
	wantState(t, "after the refused ack", e.status("q", id), model.JobInFlight, 1)
	most := big[:model.MaxResultBytes]
	if err := e.deleteWith("q", d.Receipt, &most); err != nil {
		t.Fatalf("an ack with a 64 KiB result: %v", err)
	}
	if st := e.status("q", id); st.Result == nil || *st.Result != most {
		t.Fatalf("the 64 KiB result was not kept whole")
	}
}

// testJobStatusResultInvalidChars: a result holds the characters a body
// may hold; one with a NUL (which PostgreSQL's text refuses) fails its
// entry alone, and the message stays leased.
func testJobStatusResultInvalidChars(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrCompletedRetentionSeconds: "60"})
	id := e.sendBody("q", "x").MessageID
	d := e.receiveOne("q")
	bad := "done\x00"
	wantErr(t, "an ack with a NUL in its result", e.deleteWith("q", d.Receipt, &bad), model.ErrInvalidParameterValue)
	wantState(t, "after the refused ack", e.status("q", id), model.JobInFlight, 1)
	good := "ok \u00e9\t\U0001F600"
	if err := e.deleteWith("q", d.Receipt, &good); err != nil {
		t.Fatalf("an ack with a valid result: %v", err)
	}
	if st := e.status("q", id); st.Result == nil || *st.Result != good {
		t.Fatalf("the result was not kept as given: %+v", st)
	}
}

// testJobStatusLeaseEndedBackoff: a lease that ended, on a queue with a
// RetryPolicy, is backing off until its backoff ends, before any sweep or
// call planned it, as it is once one did.
func testJobStatusLeaseEndedBackoff(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrRetryPolicy: retryPolicy(30, 300, model.JitterNone)})
	id := e.sendBody("q", "x").MessageID
	e.receiveOneFor("q", 10*time.Second)
	leaseEnd := e.clock.Now().Add(10 * time.Second)
	e.advance(11 * time.Second)
	st := e.status("q", id)
	wantState(t, "its lease ended", st, model.JobBackingOff, 1)
	if !sameInstant(st.VisibleAt, leaseEnd.Add(30*time.Second)) {
		t.Fatalf("backing off: visibleAt %v, want the lease's end and the backoff, %v", st.VisibleAt, leaseEnd.Add(30*time.Second))
	}
}

func testJobStatusRecordsRestart(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	e.createQueue("q", map[string]string{model.AttrCompletedRetentionSeconds: "30"})
	id := e.sendBody("q", "x").MessageID
	r := "ok"
	if err := e.deleteWith("q", e.receiveOne("q").Receipt, &r); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	e.reopen()
	if st := e.status("q", id); st.State != model.JobCompleted || st.Result == nil || *st.Result != r {
		t.Fatalf("after a restart: %+v, want completed with its result", st)
	}
	e.advance(30 * time.Second)
	e.noStatus("q", id)
}

// testJobStatusReplayed: a replayed dead letter gets a new id in its
// destination; on a dead-letter queue that keeps records its old id answers
// replayed, naming the new one, whose own status is ready.
func testJobStatusReplayed(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", map[string]string{model.AttrCompletedRetentionSeconds: "600"})
	old := e.deadLetterEntries("src", "dlq", model.SendEntry{Body: "poison"})
	e.createQueue("other", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 1)})
	e.replay("dlq", broker.ReplayRequest{})
	e.advanceUntilTask("dlq", model.MoveTaskCompleted, time.Minute)
	st := e.status("dlq", old[0].ID)
	wantState(t, "a replayed dead letter", st, model.JobReplayed, 1) // its attempts when it left
	if st.Reason != model.ReasonLeaseExpired {
		t.Fatalf("replayed: reason %q, want its last failure's %q", st.Reason, model.ReasonLeaseExpired)
	}
	if st.ReplayedAs == "" || strings.EqualFold(st.ReplayedAs, old[0].ID) {
		t.Fatalf("replayed: replayedAs %q, want the new id", st.ReplayedAs)
	}
	wantState(t, "the replayed message by its new id", e.status("src", st.ReplayedAs), model.JobReady, 0)
	// The old id asked on the queue it came from, where a user looks for
	// the job he sent: replayed, found in the dead-letter queue's record.
	fromSrc := e.status("src", old[0].ID)
	wantState(t, "the old id asked on its source queue", fromSrc, model.JobReplayed, 1)
	if fromSrc.ReplayedAs != st.ReplayedAs {
		t.Fatalf("asked on its source: replayedAs %q, want %q", fromSrc.ReplayedAs, st.ReplayedAs)
	}
	e.noStatus("other", old[0].ID) // another queue with the same dead-letter queue does not claim it
	e.advance(600 * time.Second)
	e.noStatus("dlq", old[0].ID)
	e.noStatus("src", old[0].ID)
}

// testJobStatusExpired: a message dropped for its time to live, whether the
// sweeper, a receive or its lease's end finds it, leaves an expired record
// (at the drop, with its attempts and last failure reason) on a queue that
// keeps records, for CompletedRetentionSeconds; a queue that keeps none
// forgets it, and one that dead-letters expired messages shows the dead
// letter instead.
func testJobStatusExpired(t *testing.T, s suite) {
	e := s.setup(t)
	keep := map[string]string{model.AttrCompletedRetentionSeconds: "60"}
	e.createQueue("dlq", nil)
	e.createQueue("q", keep)
	e.createQueue("held", keep)
	e.createQueue("none", nil)
	e.createQueue("dl", map[string]string{model.AttrCompletedRetentionSeconds: "60",
		model.AttrRedrivePolicy: redrivePolicy("dlq", 5), model.AttrExpiredMessageAction: string(model.ExpiredDeadLetter)})
	t0 := e.clock.Now()
	nacked := e.send("q", withTTL("nacked", 10))[0].MessageID
	e.nack("q", e.receiveOne("q").Receipt, "smtp 451", nil)
	e.nack("q", e.receiveOne("q").Receipt, "smtp 452", nil)
	swept := e.send("q", withTTL("swept", 10))[0].MessageID
	leased := e.send("held", withTTL("leased", 10))[0].MessageID
	e.receiveOneFor("held", 30*time.Second)
	forgotten := e.send("none", withTTL("forgotten", 10))[0].MessageID
	dead := e.send("dl", withTTL("dead", 10))[0].MessageID

	e.advance(10 * time.Second)
	e.eventuallyStats("q", 0, 0, 0)
	e.eventuallyStats("none", 0, 0, 0)
	e.eventuallyStats("dlq", 1, 0, 0)
	st := e.status("q", nacked)
	wantState(t, "nacked twice, then expired", st, model.JobExpired, 2)
	if st.Reason != "smtp 452" || !sameInstant(st.ExpiredAt, t0.Add(10*time.Second)) {
		t.Fatalf("expired: reason %q, expiredAt %v; want %q, %v", st.Reason, st.ExpiredAt, "smtp 452", t0.Add(10*time.Second))
	}
	wantState(t, "expired before any receive", e.status("q", swept), model.JobExpired, 0)
	wantState(t, "past its time to live under a live lease", e.status("held", leased), model.JobInFlight, 1)
	e.noStatus("none", forgotten)
	wantState(t, "expired into the dead-letter queue", e.status("dl", dead), model.JobDeadLettered, 0)

	e.advance(20 * time.Second) // the lease ends: the message expires
	e.eventuallyStats("held", 0, 0, 0)
	st = e.status("held", leased)
	wantState(t, "expired at its lease's end", st, model.JobExpired, 1)
	if !sameInstant(st.ExpiredAt, t0.Add(30*time.Second)) || st.Reason != "" {
		// Its last failure reason, as for the others: it never failed (the
		// expiry is the record's state, not a failure reason).
		t.Fatalf("expired at its lease's end: expiredAt %v, reason %q; want %v, none", st.ExpiredAt, st.Reason, t0.Add(30*time.Second))
	}
	e.advance(40 * time.Second) // 60 s after the first drops
	e.noStatus("q", nacked)
	e.noStatus("q", swept)
	e.status("held", leased)
	e.advance(20 * time.Second)
	e.noStatus("held", leased)
}

// wantFailures checks a status's failure history and count.
func wantFailures(t testing.TB, what string, st model.MessageStatus, count int, want ...model.Failure) {
	t.Helper()
	ok := st.FailureCount == count && len(st.Failures) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = st.Failures[i].Reason == want[i].Reason && sameInstant(st.Failures[i].At, want[i].At)
	}
	if !ok {
		t.Fatalf("%s: failures %+v (count %d), want %+v (count %d)", what, st.Failures, st.FailureCount, want, count)
	}
}

// failThree fails message id of queue q three times at distinct instants:
// a nack "a", a lease that ends, a nack "c". It returns the failures.
func (e *env) failThree(q, id string) []model.Failure {
	e.t.Helper()
	d := e.receiveOne(q)
	e.advance(time.Second)
	e.nack(q, d.Receipt, "a", nil)
	h := []model.Failure{{Reason: "a", At: e.clock.Now()}}
	e.receiveOneFor(q, 5*time.Second)
	h = append(h, model.Failure{Reason: model.ReasonLeaseExpired, At: e.clock.Now().Add(5 * time.Second)})
	e.advance(7 * time.Second) // the failure is the lease's end, not when it is noticed
	d = e.receiveOne(q)
	e.advance(time.Second)
	e.nack(q, d.Receipt, "c", nil)
	return append(h, model.Failure{Reason: "c", At: e.clock.Now()})
}

// testJobStatusFailures: a message's status lists its failures, oldest
// first, each with the broker clock's instant of it (a lease's end for an
// expired lease); a message that never failed lists none.
func testJobStatusFailures(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	id := e.sendBody("q", "flaky").MessageID
	wantFailures(t, "never failed", e.status("q", id), 0)
	h := e.failThree("q", id)
	st := e.status("q", id)
	wantState(t, "failed three times", st, model.JobReady, 3)
	if st.Reason != "c" {
		t.Fatalf("reason %q, want the last failure's, c", st.Reason)
	}
	wantFailures(t, "failed three times", st, 3, h...)
}

// testJobStatusFailuresBounded: past model.MaxFailures failures a message
// keeps the last ones (and counts them all), and its dead letter keeps them,
// asked on the dead-letter queue or on the queue it came from.
func testJobStatusFailuresBounded(t *testing.T, s suite) {
	e := s.setup(t)
	const fails = model.MaxFailures + 3
	e.createQueue("dlq", nil)
	e.createQueue("q", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", fails)})
	id := e.sendBody("q", "poison").MessageID
	h := e.failThree("q", id)
	for i := len(h); i < fails; i++ {
		d := e.receiveOne("q")
		e.advance(time.Second)
		e.nack("q", d.Receipt, fmt.Sprintf("fail %d", i+1), nil) // the last one dead-letters it
		h = append(h, model.Failure{Reason: fmt.Sprintf("fail %d", i+1), At: e.clock.Now()})
	}
	e.moveToDLQ("q", "dlq", 1)
	for _, q := range []string{"dlq", "q"} {
		st := e.status(q, id)
		wantState(t, "dead-lettered, asked on "+q, st, model.JobDeadLettered, fails)
		wantFailures(t, "dead-lettered, asked on "+q, st, fails, h[fails-model.MaxFailures:]...)
	}
}

// testJobStatusFailuresExpired: an expiry into the dead-letter queue is one
// more failure at the instant the message expired, also after a nack whose
// reason is "expired" too, and at its lease's end for a message that
// expired under a lease.
func testJobStatusFailuresExpired(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("q", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 5),
		model.AttrExpiredMessageAction: string(model.ExpiredDeadLetter)})
	t0 := e.clock.Now()
	nacked := e.send("q", withTTL("nacked", 10))[0].MessageID
	e.nack("q", e.receiveOne("q").Receipt, model.ReasonExpired, nil)
	h := []model.Failure{{Reason: model.ReasonExpired, At: e.clock.Now()}}
	e.advance(10 * time.Second)
	e.eventuallyStats("dlq", 1, 0, 0)
	st := e.status("dlq", nacked)
	wantState(t, "nacked, then expired", st, model.JobDeadLettered, 1)
	wantFailures(t, "nacked, then expired", st, 2, append(h, model.Failure{Reason: model.ReasonExpired, At: t0.Add(10 * time.Second)})...)

	t1 := e.clock.Now()
	leased := e.send("q", withTTL("leased", 5))[0].MessageID
	e.receiveOneFor("q", 20*time.Second)
	e.advance(30 * time.Second) // the lease ends at t1+20s, past the time to live
	e.eventuallyStats("dlq", 2, 0, 0)
	st = e.status("dlq", leased)
	wantState(t, "expired under a lease", st, model.JobDeadLettered, 1)
	wantFailures(t, "expired under a lease", st, 1, model.Failure{Reason: model.ReasonExpired, At: t1.Add(20 * time.Second)})
}

// testJobStatusFailuresRestart: the failure history survives a restart.
func testJobStatusFailuresRestart(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	e.createQueue("q", nil)
	id := e.sendBody("q", "flaky").MessageID
	h := e.failThree("q", id)
	e.reopen()
	wantFailures(t, "after a restart", e.status("q", id), 3, h...)
}
