package brokertest

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
)

// FIFO receive attempts, restarts, dead letters, the in-flight cap and
// validation (listed in fifo.go).

// receiveAttempt does a short-poll receive of up to 10 with an attempt id.
func (e *env) receiveAttempt(queue, attempt string) ([]model.Delivery, error) {
	return e.receive(model.ReceiveRequest{Queue: queue, MaxMessages: 10, WaitTime: dur(0), AttemptID: attempt})
}

// sameDeliveries checks that b replays a: same messages, same receipts.
func sameDeliveries(t testing.TB, what string, a, b []model.Delivery) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d messages, the first receive had %d", what, len(b), len(a))
	}
	for i := range a {
		if a[i].ID != b[i].ID || a[i].Receipt != b[i].Receipt || a[i].Body != b[i].Body {
			t.Fatalf("%s: message %d is %s (receipt %.12s…), the first receive had %s (receipt %.12s…)",
				what, i, b[i].ID, b[i].Receipt, a[i].ID, a[i].Receipt)
		}
	}
}

func (e *env) attemptSetup() []model.Delivery {
	e.t.Helper()
	e.fifoQueue("q.fifo", nil)
	e.send("q.fifo", fmsg("g", "1", "a1"), fmsg("g", "2", "a2"), fmsg("h", "h1", "h1"))
	ds, err := e.receiveAttempt("q.fifo", "attempt-1")
	if err != nil || len(ds) != 3 {
		e.t.Fatalf("first receive with an attempt id: %d messages, %v", len(ds), err)
	}
	return ds
}

func testFifoAttemptRetry(t *testing.T, s suite) {
	e := s.setup(t)
	first := e.attemptSetup()
	e.fsend("q.fifo", "k", "k1", "k1") // a new message does not change the replay
	e.advance(time.Second)
	again, err := e.receiveAttempt("q.fifo", "attempt-1")
	if err != nil {
		t.Fatalf("retry with the same attempt id: %v", err)
	}
	sameDeliveries(t, "retry", first, again)
	e.wantStats("q.fifo", 1, 3, 0) // nothing leased twice, k1 untouched
	// The replayed receipts work.
	for _, d := range again {
		e.mustDelete("q.fifo", d.Receipt)
	}
	// Another attempt id is a new receive.
	ds, err := e.receiveAttempt("q.fifo", "attempt-2")
	if err != nil {
		t.Fatal(err)
	}
	wantBodies(t, "new attempt id", ds, "k1")
}

func testFifoAttemptAfterDelete(t *testing.T, s suite) {
	e := s.setup(t)
	first := e.attemptSetup()
	e.mustDelete("q.fifo", first[1].Receipt)
	_, err := e.receiveAttempt("q.fifo", "attempt-1")
	wantErr(t, "retry after a delete", err, model.ErrInvalidParameterValue)
	if !strings.Contains(model.ErrorMessage(err), "ReceiveRequestAttemptId") {
		t.Fatalf("message %q does not name ReceiveRequestAttemptId", model.ErrorMessage(err))
	}
}

func testFifoAttemptAfterVisibility(t *testing.T, s suite) {
	e := s.setup(t)
	first := e.attemptSetup()
	e.mustChangeVis("q.fifo", first[2].Receipt, 60*time.Second)
	_, err := e.receiveAttempt("q.fifo", "attempt-1")
	wantErr(t, "retry after a visibility change", err, model.ErrInvalidParameterValue)
}

func testFifoAttemptExpires(t *testing.T, s suite) {
	e := s.setup(t)
	first := e.attemptSetup()
	for _, d := range first {
		e.mustDelete("q.fifo", d.Receipt)
	}
	e.fsend("q.fifo", "g", "a3", "a3")
	e.advance(model.AttemptWindow)
	ds, err := e.receiveAttempt("q.fifo", "attempt-1")
	if err != nil {
		t.Fatalf("attempt id reused after its window: %v", err)
	}
	wantBodies(t, "attempt id reused after its window", ds, "a3")
}

// A retry whose leases have ended (the deadline is now) must not hand the
// messages out again under those leases: another receive may take them.
func testFifoAttemptLeaseEnded(t *testing.T, s suite) {
	e := s.setup(t)
	e.attemptSetup()
	e.advance(e.getQueue("q.fifo").Config.VisibilityTimeout) // every lease ends exactly now
	ds, err := e.receiveAttempt("q.fifo", "attempt-1")
	if err == nil && len(ds) > 0 && ds[0].ReceiveCount == 1 {
		t.Fatalf("retry after the leases ended replayed %v under the ended leases", bodies(ds))
	}
	if err != nil {
		wantErr(t, "retry after the leases ended", err, model.ErrInvalidParameterValue)
	}
}

func testFifoAttemptRestart(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	first := e.attemptSetup()
	e.reopen()
	again, err := e.receiveAttempt("q.fifo", "attempt-1")
	if err != nil {
		t.Fatalf("retry after a restart: %v", err)
	}
	sameDeliveries(t, "retry after a restart", first, again)
	e.mustDelete("q.fifo", first[0].Receipt)
	e.reopen()
	_, err = e.receiveAttempt("q.fifo", "attempt-1")
	wantErr(t, "retry after a delete and a restart", err, model.ErrInvalidParameterValue)
}

func testFifoAttemptStandard(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("std", nil)
	e.send("std", model.SendEntry{Body: "a"}, model.SendEntry{Body: "b"})
	got := map[string]bool{}
	for range 2 {
		ds, err := e.receive(model.ReceiveRequest{Queue: "std", MaxMessages: 1, WaitTime: dur(0), AttemptID: "same"})
		if err != nil {
			t.Fatalf("standard queue receive with an attempt id: %v", err)
		}
		for _, d := range ds {
			got[d.Body] = true
		}
	}
	if !got["a"] || !got["b"] {
		t.Fatalf("standard receives with one attempt id got %v, want a and b (the id is ignored)", got)
	}
}

func testFifoLockRestart(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	e.fifoQueue("q.fifo", map[string]string{model.AttrVisibilityTimeout: "60"})
	e.fsend("q.fifo", "g", "1", "a1")
	e.fsend("q.fifo", "g", "2", "a2")
	e.fsend("q.fifo", "h", "h1", "h1")
	wantBodies(t, "first receive", e.receiveMax("q.fifo", 1, 0), "a1")
	e.reopen()
	e.wantStats("q.fifo", 2, 1, 0)
	e.advance(time.Second)                                                  // h1's lease ends a second after a1's
	wantBodies(t, "after the restart", e.receiveMax("q.fifo", 10, 0), "h1") // g still locked
	e.receiveNone("q.fifo")
	e.advance(59 * time.Second) // a1's lease (from before the restart) ends
	e.eventuallyStats("q.fifo", 2, 1, 0)
	wantBodies(t, "after the lease ended", e.receiveMax("q.fifo", 10, 0), "a1", "a2")
}

func testFifoDLQType(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("std-dlq", nil)
	e.fifoQueue("dlq.fifo", nil)
	_, err := e.b.CreateQueue(e.ctx, "src.fifo", map[string]string{model.AttrFifoQueue: "true",
		model.AttrRedrivePolicy: redrivePolicy("std-dlq", 3)}, nil)
	wantErrOneOf(t, "FIFO queue with a standard DLQ", err, model.ErrInvalidParameterValue, model.ErrInvalidAttributeValue)
	_, err = e.b.CreateQueue(e.ctx, "src", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq.fifo", 3)}, nil)
	wantErrOneOf(t, "standard queue with a FIFO DLQ", err, model.ErrInvalidParameterValue, model.ErrInvalidAttributeValue)
	e.fifoQueue("src.fifo", nil)
	err = e.b.SetQueueAttributes(e.ctx, "src.fifo", map[string]string{model.AttrRedrivePolicy: redrivePolicy("std-dlq", 3)})
	wantErrOneOf(t, "SetQueueAttributes: FIFO queue with a standard DLQ", err, model.ErrInvalidParameterValue, model.ErrInvalidAttributeValue)
	e.fifoQueue("src2.fifo", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq.fifo", 3)})
}

func testFifoDLQMove(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("dlq.fifo", map[string]string{model.AttrMessageRetentionPeriod: "600"})
	e.fifoQueue("src.fifo", map[string]string{
		model.AttrVisibilityTimeout: "10",
		model.AttrRedrivePolicy:     redrivePolicy("dlq.fifo", 1),
	})
	poison := e.fsend("src.fifo", "g", "shared-dedup", "poison")
	wantBodies(t, "first receive", e.receiveMax("src.fifo", 1, 0), "poison")
	e.fsend("src.fifo", "g", "2", "next")
	e.advance(10 * time.Second)
	e.eventuallyNotInFlight("src.fifo")
	// The last attempt's lease expired: the head moves (at the expiry, or
	// at this receive at the latest) and the receive goes on with the group.
	wantBodies(t, "receive past maxReceiveCount", e.receiveMax("src.fifo", 10, 0), "next")
	e.wantStats("dlq.fifo", 1, 0, 0)
	// Retention restarts on a FIFO move: 10 minutes after the move, not the send.
	e.advance(595 * time.Second)
	d := e.receiveMax("dlq.fifo", 1, 0)
	if len(d) != 1 {
		t.Fatal("the dead letter expired by its original send time; FIFO moves restart retention")
	}
	dl := d[0]
	if dl.ID != poison.MessageID || dl.GroupID != "g" || dl.DeadLetterSource != "src.fifo" || dl.ReceiveCount != 2 {
		t.Fatalf("dead letter %s group %q source %q count %d, want %s group g source src.fifo count 2",
			dl.ID, dl.GroupID, dl.DeadLetterSource, dl.ReceiveCount, poison.MessageID)
	}
	if dl.DedupID != poison.MessageID {
		t.Fatalf("dead letter DedupID = %q, want its message id %s", dl.DedupID, poison.MessageID)
	}
	wantSeq(t, "dead letter", dl.SequenceNumber)
}

func testFifoInFlightCap(t *testing.T, s suite) {
	e := s.setup(t, func(o *broker.Config) { o.MaxInFlight = 2 })
	e.fifoQueue("q.fifo", nil)
	for _, g := range []string{"a", "b", "c"} {
		e.fsend("q.fifo", g, g, g)
	}
	if ds := e.receiveMax("q.fifo", 1, 0); len(ds) != 1 {
		t.Fatalf("got %d", len(ds))
	}
	if ds := e.receiveMax("q.fifo", 10, 0); len(ds) != 1 {
		t.Fatalf("receive with room for 1: got %d, want 1", len(ds))
	}
	ds, err := e.receive(model.ReceiveRequest{Queue: "q.fifo", MaxMessages: 10, WaitTime: dur(0)})
	if err != nil || len(ds) != 0 {
		t.Fatalf("FIFO receive at the in-flight cap = %d messages, %v; want none and no error", len(ds), err)
	}
}

func testFifoNeedsGroup(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", map[string]string{model.AttrContentBasedDeduplication: "true"})
	err := e.sendErr("q.fifo", model.SendEntry{Body: "a"})
	wantErr(t, "FIFO send without MessageGroupId", err, model.ErrMissingParameter)
	if !strings.Contains(model.ErrorMessage(err), "MessageGroupId") {
		t.Fatalf("message %q does not name MessageGroupId", model.ErrorMessage(err))
	}
	// In a batch, the whole call fails and nothing is stored.
	_, err = e.trySend("q.fifo", model.SendEntry{ID: "a", Body: "a", GroupID: "g"}, model.SendEntry{ID: "b", Body: "b"})
	wantErr(t, "FIFO batch with one entry lacking MessageGroupId", err, model.ErrMissingParameter)
	e.wantStats("q.fifo", 0, 0, 0)
}

func testFifoNeedsDedup(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", nil)
	err := e.sendErr("q.fifo", model.SendEntry{Body: "a", GroupID: "g"})
	wantErr(t, "FIFO send without a dedup id or content-based dedup", err, model.ErrInvalidParameterValue)
	if !strings.Contains(model.ErrorMessage(err), "ContentBasedDeduplication") {
		t.Fatalf("message %q does not mention ContentBasedDeduplication", model.ErrorMessage(err))
	}
	e.wantStats("q.fifo", 0, 0, 0)
}

func testFifoIDFormats(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", nil)
	punct := "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
	long := strings.Repeat("x", 128)
	e.fsend("q.fifo", punct, long, "ok")
	e.fsend("q.fifo", long, punct+"Az09", "ok2")
	for _, bad := range []string{"has space", strings.Repeat("x", 129), "é", "tab\t"} {
		wantErr(t, "MessageGroupId "+bad, e.sendErr("q.fifo", fmsg(bad, "d", "a")), model.ErrInvalidParameterValue)
		wantErr(t, "MessageDeduplicationId "+bad, e.sendErr("q.fifo", fmsg("g", bad, "a")), model.ErrInvalidParameterValue)
		_, err := e.receiveAttempt("q.fifo", bad)
		wantErr(t, "ReceiveRequestAttemptId "+bad, err, model.ErrInvalidParameterValue)
	}
	// A malformed entry of a batch fails alone.
	res, err := e.trySend("q.fifo", model.SendEntry{ID: "a", Body: "a", GroupID: "g", DedupID: "x1"},
		model.SendEntry{ID: "b", Body: "b", GroupID: "bad group", DedupID: "x2"})
	if err != nil || res[0].Err != nil || res[1].Err == nil {
		t.Fatalf("batch with one malformed group id: %v, %+v", err, res)
	}
	e.wantStats("q.fifo", 3, 0, 0)
}

func testFifoPerMessageDelay(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", map[string]string{model.AttrDelaySeconds: "5"})
	en := fmsg("g", "1", "a")
	en.Delay = dur(2 * time.Second)
	wantErr(t, "FIFO send with a per-message delay", e.sendErr("q.fifo", en), model.ErrInvalidParameterValue)
	e.fsend("q.fifo", "g", "2", "b") // the queue delay applies
	e.wantStats("q.fifo", 0, 0, 1)
	// DelaySeconds=0 is accepted (SQS refuses only other values), plain and in
	// a batch, and the queue delay still applies.
	zero := fmsg("g", "3", "c")
	zero.Delay = dur(0)
	if err := e.sendErr("q.fifo", zero); err != nil {
		t.Fatalf("FIFO send with DelaySeconds=0: %v", err)
	}
	b1, b2 := fmsg("g", "4", "d"), fmsg("g", "5", "e")
	b1.ID, b2.ID = "b1", "b2"
	b1.Delay = dur(0)
	res, err := e.trySend("q.fifo", b1, b2)
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("FIFO batch with DelaySeconds=0: %v, %+v", err, res)
	}
	e.wantStats("q.fifo", 0, 0, 4)
	e.advance(5 * time.Second)
	e.eventuallyStats("q.fifo", 4, 0, 0)
}

func testFifoQueueAttributes(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", nil)
	c := e.getQueue("q.fifo").Config
	if !c.Fifo || c.DedupScope != "queue" || c.ThroughputLimit != "perQueue" || c.ContentBasedDedup {
		t.Fatalf("FIFO defaults = %+v", c)
	}
	if err := e.b.SetQueueAttributes(e.ctx, "q.fifo", map[string]string{
		model.AttrDeduplicationScope: "messageGroup", model.AttrFifoThroughputLimit: "perMessageGroupId",
		model.AttrContentBasedDeduplication: "true",
	}); err != nil {
		t.Fatal(err)
	}
	a := e.getQueue("q.fifo").Config.Attributes()
	if a[model.AttrDeduplicationScope] != "messageGroup" || a[model.AttrFifoThroughputLimit] != "perMessageGroupId" ||
		a[model.AttrContentBasedDeduplication] != "true" || a[model.AttrFifoQueue] != "true" {
		t.Fatalf("attributes after set = %v", a)
	}
	err := e.b.SetQueueAttributes(e.ctx, "q.fifo", map[string]string{model.AttrDeduplicationScope: "queue"})
	wantErr(t, "perMessageGroupId with DeduplicationScope queue", err, model.ErrInvalidAttributeValue)
	_, err = e.b.CreateQueue(e.ctx, "std", map[string]string{model.AttrDeduplicationScope: "queue"}, nil)
	wantErr(t, "DeduplicationScope on a standard queue", err, model.ErrInvalidAttributeName)
}

func testFifoGroupOnStandard(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("std", nil)
	e.send("std", model.SendEntry{Body: "a", GroupID: "tenant-1"})
	if d := e.receiveOne("std"); d.GroupID != "tenant-1" || d.SequenceNumber != "" {
		t.Fatalf("standard message with a group: GroupID %q SequenceNumber %q", d.GroupID, d.SequenceNumber)
	}
	// No ordering or lock: a second message of the group is served while the first is in flight.
	e.send("std", model.SendEntry{Body: "b", GroupID: "tenant-1"})
	if d := e.receiveOne("std"); d.Body != "b" {
		t.Fatalf("got %q", d.Body)
	}
	wantErr(t, "malformed MessageGroupId on a standard queue",
		e.sendErr("std", model.SendEntry{Body: "c", GroupID: "bad group"}), model.ErrInvalidParameterValue)
	// A MessageDeduplicationId is accepted on a standard queue (an
	// idempotent send: dedup.go), and a malformed one refused as on FIFO.
	if err := e.sendErr("std", model.SendEntry{Body: "c", DedupID: "d"}); err != nil {
		t.Fatalf("MessageDeduplicationId on a standard queue: %v", err)
	}
	wantErr(t, "malformed MessageDeduplicationId on a standard queue",
		e.sendErr("std", model.SendEntry{Body: "c", DedupID: "bad id"}), model.ErrInvalidParameterValue)
}
