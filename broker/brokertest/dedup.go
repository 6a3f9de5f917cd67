package brokertest

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// Idempotent sends and unique jobs on standard queues (model/config_dedup.go,
// plan.Original): a MessageDeduplicationId sent again within the queue's
// DeduplicationWindowSeconds is answered with the original message id and
// stores nothing; with DeduplicationUntil=settled it is also a duplicate
// while a message carrying it is in the queue, whatever its state.
var dedupTests = []testCase{
	{"Window", testDedupWindow},
	{"WindowAttribute", testDedupWindowAttribute},
	{"WindowBounds", testDedupWindowBounds},
	{"AttributesListedWhenSet", testDedupAttributesListed},
	{"WithoutIDNotDeduplicated", testDedupWithoutID},
	{"InBatch", testDedupInBatch},
	{"AfterDeleteWithinWindow", testDedupAfterDelete},
	{"WindowChangeAppliesToLaterSends", testDedupWindowChange},
	{"SettledThroughReceiveNackBackoff", testDedupSettledLifecycle},
	{"SettledDelayed", testDedupSettledDelayed},
	{"SettledReleasedByDeadLetter", testDedupSettledDeadLetter},
	{"SettledReleasedByPurge", testDedupSettledPurge},
	{"SettledReleasedByRetention", testDedupSettledRetention},
	{"SettledSwitchedOn", testDedupSettledSwitchedOn},
	{"Restart", testDedupRestart},
	{"SettledRestart", testDedupSettledRestart},
}

// dsend sends body with dedup id id to a standard queue.
func (e *env) dsend(queue, id, body string) model.SendResult {
	e.t.Helper()
	return e.send(queue, model.SendEntry{ID: "m", Body: body, DedupID: id})[0]
}

// wantSame checks that a send was answered as a duplicate of orig: orig's
// message id, and no sequence number on a standard queue.
func wantSame(t testing.TB, what string, got, orig model.SendResult) {
	t.Helper()
	if got.MessageID != orig.MessageID || got.SequenceNumber != "" {
		t.Fatalf("%s: answered %s (sequence number %q), want the original %s", what, got.MessageID, got.SequenceNumber, orig.MessageID)
	}
}

// settledQueue creates a standard queue with DeduplicationUntil=settled and
// a 60-second window (the minimum), plus attrs.
func (e *env) settledQueue(name string, attrs map[string]string) {
	e.t.Helper()
	a := map[string]string{model.AttrDeduplicationUntil: "settled", model.AttrDeduplicationWindowSeconds: "60"}
	for k, v := range attrs {
		a[k] = v
	}
	e.createQueue(name, a)
}

// testDedupWindow: the default window is 5 minutes from the first send (a
// duplicate does not extend it), as on a FIFO queue; a duplicate stores
// nothing, and the stored message carries its dedup id.
func testDedupWindow(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	orig := e.dsend("q", "charge-42", "first")
	e.advance(model.DefaultDedupWindow - time.Second)
	wantSame(t, "the same id 4:59 later", e.dsend("q", "charge-42", "second"), orig)
	e.wantStats("q", 1, 0, 0)
	e.advance(time.Second)
	later := e.dsend("q", "charge-42", "third")
	wantNew(t, "the same id 5:00 later", later, orig)
	e.wantStats("q", 2, 0, 0)
	ds := e.receiveN(model.ReceiveRequest{Queue: "q", MaxMessages: 10}, 2)
	got := map[string]string{}
	for _, d := range ds {
		got[d.Body] = d.ID
		if d.DedupID != "charge-42" {
			t.Fatalf("delivery %q: DedupID %q, want charge-42", d.Body, d.DedupID)
		}
	}
	if got["first"] != orig.MessageID || got["third"] != later.MessageID || len(got) != 2 {
		t.Fatalf("received %v, want first (%s) and third (%s)", got, orig.MessageID, later.MessageID)
	}
}

// testDedupWindowAttribute: DeduplicationWindowSeconds sets the window, at
// its minimum and at its maximum.
func testDedupWindowAttribute(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("short", map[string]string{model.AttrDeduplicationWindowSeconds: "60"})
	e.createQueue("long", map[string]string{model.AttrDeduplicationWindowSeconds: "86400", model.AttrMessageRetentionPeriod: "1209600"})
	short, long := e.dsend("short", "d", "a"), e.dsend("long", "d", "a")
	e.advance(59 * time.Second)
	wantSame(t, "short window, 59 s later", e.dsend("short", "d", "b"), short)
	e.advance(time.Second)
	wantNew(t, "short window, 60 s later", e.dsend("short", "d", "c"), short)
	e.advance(24*time.Hour - time.Minute - time.Second)
	wantSame(t, "long window, 23:59:59 later", e.dsend("long", "d", "b"), long)
	e.advance(time.Second)
	wantNew(t, "long window, 24 h later", e.dsend("long", "d", "c"), long)
	e.wantStats("short", 2, 0, 0)
	e.wantStats("long", 2, 0, 0)
}

// testDedupWindowBounds: the attributes' values and queue types are checked
// on CreateQueue and SetQueueAttributes, and a refused change changes
// nothing.
func testDedupWindowBounds(t *testing.T, s suite) {
	e := s.setup(t)
	for _, attrs := range []map[string]string{
		{model.AttrDeduplicationWindowSeconds: "59"},
		{model.AttrDeduplicationWindowSeconds: "86401"},
		{model.AttrDeduplicationWindowSeconds: "-1"},
		{model.AttrDeduplicationWindowSeconds: "ten"},
		{model.AttrDeduplicationUntil: "forever"},
		{model.AttrDeduplicationUntil: ""},
	} {
		_, err := e.b.CreateQueue(e.ctx, "bad", attrs, nil)
		wantErr(t, "CreateQueue with "+strconv.Quote(attrs[model.AttrDeduplicationWindowSeconds]+attrs[model.AttrDeduplicationUntil]), err, model.ErrInvalidAttributeValue)
	}
	if _, err := e.b.GetQueue(e.ctx, "bad"); !errors.Is(err, model.ErrQueueDoesNotExist) {
		t.Fatalf("a refused CreateQueue created the queue: %v", err)
	}
	e.createQueue("q", map[string]string{model.AttrDeduplicationWindowSeconds: "600"})
	err := e.b.SetQueueAttributes(e.ctx, "q", map[string]string{model.AttrDeduplicationWindowSeconds: "86401"})
	wantErr(t, "SetQueueAttributes past the maximum", err, model.ErrInvalidAttributeValue)
	if got := e.getQueue("q").Config.DedupWindowOf(); got != 10*time.Minute {
		t.Fatalf("after a refused change the window is %v, want 10m", got)
	}
	// FIFO queues keep SQS's fixed 5 minutes and have no settled mode.
	fifo := map[string]string{model.AttrFifoQueue: "true"}
	for _, attrs := range []map[string]string{
		{model.AttrFifoQueue: "true", model.AttrDeduplicationWindowSeconds: "600"},
		{model.AttrFifoQueue: "true", model.AttrDeduplicationUntil: "settled"},
	} {
		_, err := e.b.CreateQueue(e.ctx, "f.fifo", attrs, nil)
		wantErr(t, "a dedup setting on a FIFO queue", err, model.ErrInvalidAttributeValue)
	}
	e.createQueue("f.fifo", fifo)
	err = e.b.SetQueueAttributes(e.ctx, "f.fifo", map[string]string{model.AttrDeduplicationWindowSeconds: "300"})
	wantErr(t, "DeduplicationWindowSeconds set on a FIFO queue", err, model.ErrInvalidAttributeValue)
}

// testDedupAttributesListed: the two attributes appear in All only when
// set, and read back as set.
func testDedupAttributesListed(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	a := e.getQueue("q").Config.Attributes()
	for _, n := range []string{model.AttrDeduplicationWindowSeconds, model.AttrDeduplicationUntil} {
		if _, ok := a[n]; ok {
			t.Fatalf("a plain queue lists %s: %v", n, a)
		}
	}
	if err := e.b.SetQueueAttributes(e.ctx, "q", map[string]string{
		model.AttrDeduplicationWindowSeconds: "3600", model.AttrDeduplicationUntil: "settled",
	}); err != nil {
		t.Fatal(err)
	}
	a = e.getQueue("q").Config.Attributes()
	if a[model.AttrDeduplicationWindowSeconds] != "3600" || a[model.AttrDeduplicationUntil] != "settled" {
		t.Fatalf("attributes after set: %v", a)
	}
}

// testDedupWithoutID: a send without a dedup id is never deduplicated, even
// with the body of a deduplicated one (no content-based deduplication on a
// standard queue).
func testDedupWithoutID(t *testing.T, s suite) {
	e := s.setup(t)
	e.settledQueue("q", nil)
	e.dsend("q", "d", "same")
	e.sendBody("q", "same")
	e.sendBody("q", "same")
	e.wantStats("q", 3, 0, 0)
}

// testDedupInBatch: within one batch, a second entry with the same id is a
// duplicate of the first; other entries are stored.
func testDedupInBatch(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	res, err := e.trySend("q",
		model.SendEntry{ID: "a", Body: "a", DedupID: "d"},
		model.SendEntry{ID: "b", Body: "b", DedupID: "d"},
		model.SendEntry{ID: "c", Body: "c", DedupID: "other"},
		model.SendEntry{ID: "d", Body: "d"},
		model.SendEntry{ID: "e", Body: "e", DedupID: "bad id"}, // refused alone
	)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res[:4] {
		if r.Err != nil {
			t.Fatalf("entry %d: %v", i, r.Err)
		}
	}
	if !errors.Is(res[4].Err, model.ErrInvalidParameterValue) {
		t.Fatalf("a malformed dedup id: %v, want InvalidParameterValue", res[4].Err)
	}
	wantSame(t, "the second entry of the batch", res[1], res[0])
	wantNew(t, "another id", res[2], res[0])
	e.wantStats("q", 3, 0, 0)
	// And in the next batch.
	again := e.send("q", model.SendEntry{Body: "x", DedupID: "other"}, model.SendEntry{Body: "y", DedupID: "d"})
	wantSame(t, "a later batch", again[0], res[2])
	wantSame(t, "a later batch", again[1], res[0])
	e.wantStats("q", 3, 0, 0)
}

// testDedupAfterDelete: in window mode the window outlives the message.
func testDedupAfterDelete(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	orig := e.dsend("q", "d", "x")
	e.mustDelete("q", e.receiveOne("q").Receipt)
	wantSame(t, "a resend after the delete", e.dsend("q", "d", "x"), orig)
	e.wantStats("q", 0, 0, 0)
}

// testDedupWindowChange: a window is fixed at the send that opened it; a
// new DeduplicationWindowSeconds applies to the sends after it.
func testDedupWindowChange(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrDeduplicationWindowSeconds: "3600"})
	a := e.dsend("q", "a", "a")
	if err := e.b.SetQueueAttributes(e.ctx, "q", map[string]string{model.AttrDeduplicationWindowSeconds: "60"}); err != nil {
		t.Fatal(err)
	}
	b := e.dsend("q", "b", "b")
	e.advance(time.Minute)
	wantNew(t, "an id sent after the change, 60 s later", e.dsend("q", "b", "b2"), b)
	wantSame(t, "an id sent before the change, 60 s later", e.dsend("q", "a", "a2"), a)
	e.advance(time.Hour)
	wantNew(t, "an id sent before the change, an hour later", e.dsend("q", "a", "a3"), a)
}

// testDedupSettledLifecycle: with DeduplicationUntil=settled, an id stays a
// duplicate past its window while its message is queued, in flight,
// nacked and backing off (a RetryPolicy), and ready again; the delete
// releases it.
func testDedupSettledLifecycle(t *testing.T, s suite) {
	e := s.setup(t)
	e.settledQueue("q", map[string]string{
		model.AttrVisibilityTimeout: "30",
		model.AttrRetryPolicy:       retryPolicy(600, 600, model.JitterNone),
	})
	orig := e.dsend("q", "job-7", "work")
	e.advance(2 * time.Minute) // past the 60-second window
	wantSame(t, "queued, past the window", e.dsend("q", "job-7", "again"), orig)
	d := e.receiveOne("q")
	if d.ID != orig.MessageID || d.DedupID != "job-7" {
		t.Fatalf("received %s (dedup id %q), want %s (job-7)", d.ID, d.DedupID, orig.MessageID)
	}
	wantSame(t, "in flight", e.dsend("q", "job-7", "again"), orig)
	e.advance(31 * time.Second) // the lease ends: a backoff of 600 s
	e.eventuallyStats("q", 0, 0, 1)
	wantSame(t, "backing off after an expired lease", e.dsend("q", "job-7", "again"), orig)
	e.advance(600 * time.Second)
	e.eventuallyStats("q", 1, 0, 0)
	d = e.receiveOne("q")
	e.nack("q", d.Receipt, "boom", nil) // a backoff of 600 s again
	e.wantStats("q", 0, 0, 1)
	wantSame(t, "backing off after a nack", e.dsend("q", "job-7", "again"), orig)
	e.advance(600 * time.Second)
	e.eventuallyStats("q", 1, 0, 0)
	wantSame(t, "ready again", e.dsend("q", "job-7", "again"), orig)
	e.wantStats("q", 1, 0, 0)
	e.mustDelete("q", e.receiveOne("q").Receipt)
	next := e.dsend("q", "job-7", "next")
	wantNew(t, "after the delete", next, orig)
	e.wantStats("q", 1, 0, 0)
	wantSame(t, "the next job, queued", e.dsend("q", "job-7", "again"), next)
}

// testDedupSettledDelayed: a delayed message holds its id past the window.
func testDedupSettledDelayed(t *testing.T, s suite) {
	e := s.setup(t)
	e.settledQueue("q", nil)
	orig := e.send("q", model.SendEntry{Body: "later", DedupID: "d", Delay: dur(model.MaxDelay)})[0]
	e.advance(model.MaxDelay - time.Second)
	e.wantStats("q", 0, 0, 1)
	wantSame(t, "delayed, past the window", e.dsend("q", "d", "again"), orig)
	e.wantStats("q", 0, 0, 1)
}

// testDedupSettledDeadLetter: a message moved to the dead-letter queue
// leaves the queue and releases its id there; it keeps its dedup id in the
// dead-letter queue.
func testDedupSettledDeadLetter(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.settledQueue("q", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 1)})
	orig := e.dsend("q", "d", "poison")
	e.advance(2 * time.Minute)
	d := e.receiveOne("q")
	wantSame(t, "in flight on its last attempt", e.dsend("q", "d", "again"), orig)
	e.mustChangeVis("q", d.Receipt, 0)
	e.moveToDLQ("q", "dlq", 1)
	next := e.dsend("q", "d", "next")
	wantNew(t, "after the dead-letter move", next, orig)
	e.wantStats("q", 1, 0, 0)
	dead := e.receiveOne("dlq")
	if dead.ID != orig.MessageID || dead.DedupID != "d" {
		t.Fatalf("dead letter %s with dedup id %q, want %s with d", dead.ID, dead.DedupID, orig.MessageID)
	}
}

// testDedupSettledPurge: a purge releases every id, and clears the window.
func testDedupSettledPurge(t *testing.T, s suite) {
	e := s.setup(t)
	e.settledQueue("q", nil)
	orig := e.dsend("q", "d", "a")
	if err := e.b.PurgeQueue(e.ctx, "q"); err != nil {
		t.Fatal(err)
	}
	wantNew(t, "after a purge, within the window", e.dsend("q", "d", "b"), orig)
	e.wantStats("q", 1, 0, 0)
}

// testDedupSettledRetention: a message expired by retention releases its id.
func testDedupSettledRetention(t *testing.T, s suite) {
	e := s.setup(t)
	e.settledQueue("q", map[string]string{model.AttrMessageRetentionPeriod: "120"})
	orig := e.dsend("q", "d", "a")
	e.advance(90 * time.Second)
	wantSame(t, "past the window, before retention", e.dsend("q", "d", "b"), orig)
	e.advanceUntil(5*time.Second, retentionLimit, "the message expires", func() bool {
		return e.stats("q") == model.QueueStats{}
	})
	wantNew(t, "after the message expired", e.dsend("q", "d", "c"), orig)
}

// testDedupSettledSwitchedOn: settled counts the messages already in the
// queue when it is switched on, and window mode forgets them again.
func testDedupSettledSwitchedOn(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrDeduplicationWindowSeconds: "60"})
	orig := e.dsend("q", "d", "a")
	e.advance(time.Minute)
	if err := e.b.SetQueueAttributes(e.ctx, "q", map[string]string{model.AttrDeduplicationUntil: "settled"}); err != nil {
		t.Fatal(err)
	}
	wantSame(t, "switched to settled, past the window", e.dsend("q", "d", "b"), orig)
	if err := e.b.SetQueueAttributes(e.ctx, "q", map[string]string{model.AttrDeduplicationUntil: "window"}); err != nil {
		t.Fatal(err)
	}
	wantNew(t, "back to window mode", e.dsend("q", "d", "c"), orig)
	e.wantStats("q", 2, 0, 0)
}

// testDedupRestart: the window survives a restart (the record is written
// with the message), and ends on time after it.
func testDedupRestart(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	e.createQueue("q", map[string]string{model.AttrDeduplicationWindowSeconds: "600"})
	orig := e.dsend("q", "d", "a")
	e.mustDelete("q", e.receiveOne("q").Receipt)
	e.advance(5 * time.Minute)
	e.reopen()
	if got := e.getQueue("q").Config.DedupWindowOf(); got != 10*time.Minute {
		t.Fatalf("the window after a restart is %v, want 10m", got)
	}
	wantSame(t, "after a restart, inside the window", e.dsend("q", "d", "b"), orig)
	e.wantStats("q", 0, 0, 0)
	e.advance(5 * time.Minute)
	e.reopen()
	wantNew(t, "after a restart, past the window", e.dsend("q", "d", "c"), orig)
}

// testDedupSettledRestart: the messages that hold their ids are known again
// after a restart, in flight or queued, and release them as before.
func testDedupSettledRestart(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	e.settledQueue("q", nil)
	a := e.dsend("q", "a", "a")
	b := e.dsend("q", "b", "b")
	d := e.receiveN(model.ReceiveRequest{Queue: "q", MaxMessages: 1, Visibility: dur(time.Hour)}, 1)[0]
	e.advance(2 * time.Minute)
	e.reopen()
	if !e.getQueue("q").Config.DedupUntilSettled() {
		t.Fatal("the queue lost DeduplicationUntil=settled across the restart")
	}
	wantSame(t, "after a restart, a", e.dsend("q", "a", "a2"), a)
	wantSame(t, "after a restart, b", e.dsend("q", "b", "b2"), b)
	e.wantStats("q", 1, 1, 0)
	e.mustDelete("q", d.Receipt)
	released := map[string]model.SendResult{"a": a, "b": b}
	id := d.DedupID
	wantNew(t, "after the delete", e.dsend("q", id, "new"), released[id])
}
