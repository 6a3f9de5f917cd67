package brokertest

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
)

var visibilityTests = []testCase{
	{"QueueDefault", testVisibilityQueueDefault},
	{"PerReceiveOverride", testVisibilityPerReceive},
	{"ReceiveWithZeroVisibility", testReceiveZeroVisibility},
	{"ChangeVisibilityExtends", testChangeVisibilityExtends},
	{"ChangeVisibilityHeartbeatThenDelete", testHeartbeatThenDelete},
	{"ChangeVisibilityZeroNacks", testChangeVisibilityZero},
	{"ChangeVisibilityRange", testChangeVisibilityRange},
	{"StaleReceipt", testStaleReceipt},
	{"ExpiredLease", testExpiredLease},
	{"DeletedMessageReceipt", testDeletedMessageReceipt},
	{"GarbageReceipt", testGarbageReceipt},
	{"ReceiptOfAnotherQueue", testReceiptOfAnotherQueue},
	{"InFlightCap", testInFlightCap},
	{"InFlightCapBatchReceive", testInFlightCapBatchReceive},
}

func testVisibilityQueueDefault(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil) // VisibilityTimeout 30 s
	res := e.sendBody("q", "a")
	e.advance(time.Second)
	firstAt := e.clock.Now()
	d1 := e.receiveOne("q")
	e.wantStats("q", 0, 1, 0)
	e.advance(29 * time.Second)
	e.receiveNone("q")
	e.wantStats("q", 0, 1, 0)
	e.advance(time.Second)
	e.eventuallyStats("q", 1, 0, 0)
	d2 := e.receiveOne("q")
	if d2.ID != res.MessageID || d2.ReceiveCount != 2 {
		t.Fatalf("after the lease expired got %s count %d, want %s count 2", d2.ID, d2.ReceiveCount, res.MessageID)
	}
	wantTime(t, "FirstReceiveAt of the second delivery", d2.FirstReceiveAt, firstAt)
	wantTime(t, "FirstReceiveAt of the first delivery", d1.FirstReceiveAt, firstAt)
	if d2.Receipt == d1.Receipt {
		t.Fatal("the second lease has the same receipt handle as the first")
	}
	e.wantStats("q", 0, 1, 0)
}

func testVisibilityPerReceive(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil) // VisibilityTimeout 30 s
	e.sendBody("q", "a")
	e.receiveOneFor("q", 5*time.Second)
	e.advance(4 * time.Second)
	e.receiveNone("q")
	e.advance(time.Second)
	if d := e.receiveOne("q"); d.ReceiveCount != 2 {
		t.Fatalf("after a 5 s lease ReceiveCount = %d, want 2", d.ReceiveCount)
	}
	// The override applied to that receive only: this lease is the queue's 30 s.
	e.advance(5 * time.Second)
	e.receiveNone("q")
	e.advance(24 * time.Second)
	e.receiveNone("q")
	e.advance(time.Second)
	if d := e.receiveOne("q"); d.ReceiveCount != 3 {
		t.Fatalf("after the default 30 s lease ReceiveCount = %d, want 3", d.ReceiveCount)
	}
	// The longest lease is 12 h.
	e.sendBody("q", "b")
	e.receiveOneFor("q", model.MaxVisibilityTimeout)
}

func testReceiveZeroVisibility(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.sendBody("q", "a")
	d1 := e.receiveOneFor("q", 0)
	e.eventuallyStats("q", 1, 0, 0)
	d2 := e.receiveOne("q")
	if d2.ID != d1.ID || d2.ReceiveCount != 2 {
		t.Fatalf("after a 0 s lease got %s count %d, want %s count 2", d2.ID, d2.ReceiveCount, d1.ID)
	}
}

func testChangeVisibilityExtends(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.sendBody("q", "a")
	d := e.receiveOneFor("q", 10*time.Second) // until t0+10
	e.advance(8 * time.Second)
	e.mustChangeVis("q", d.Receipt, 10*time.Second) // counted from now: until t0+18
	e.advance(4 * time.Second)                      // t0+12: the first lease would have ended
	e.receiveNone("q")
	e.wantStats("q", 0, 1, 0)
	e.mustChangeVis("q", d.Receipt, 6*time.Second) // heartbeat again, until t0+18
	e.advance(5 * time.Second)                     // t0+17
	e.receiveNone("q")
	e.advance(time.Second) // t0+18
	d2 := e.receiveOne("q")
	if d2.ReceiveCount != 2 {
		t.Fatalf("after the extended lease ReceiveCount = %d, want 2", d2.ReceiveCount)
	}
	// A visibility change is not remembered: this lease is the queue's 30 s.
	e.advance(29 * time.Second)
	e.receiveNone("q")
	e.advance(time.Second)
	if d3 := e.receiveOne("q"); d3.ReceiveCount != 3 {
		t.Fatalf("ReceiveCount = %d, want 3", d3.ReceiveCount)
	}
}

func testHeartbeatThenDelete(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.sendBody("q", "a")
	d := e.receiveOneFor("q", 10*time.Second)
	for i := 0; i < 5; i++ {
		e.advance(8 * time.Second)
		e.mustChangeVis("q", d.Receipt, 10*time.Second)
		e.receiveNone("q")
	}
	e.mustDelete("q", d.Receipt)
	e.wantStats("q", 0, 0, 0)
	e.advance(time.Minute)
	e.receiveNone("q")
}

func testChangeVisibilityZero(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.sendBody("q", "a")
	d := e.receiveOne("q")
	e.mustChangeVis("q", d.Receipt, 0)
	e.wantStats("q", 1, 0, 0)
	d2 := e.receiveOne("q") // the clock has not moved
	if d2.ID != d.ID || d2.ReceiveCount != 2 {
		t.Fatalf("after a nack got %s count %d, want %s count 2", d2.ID, d2.ReceiveCount, d.ID)
	}
	wantTime(t, "FirstReceiveAt after a nack", d2.FirstReceiveAt, d.FirstReceiveAt)
}

func testChangeVisibilityRange(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.sendBody("q", "a")
	d := e.receiveOne("q")
	for _, bad := range []time.Duration{model.MaxVisibilityTimeout + time.Second, -time.Second} {
		wantErr(t, "ChangeVisibility "+bad.String(), e.changeVisErr("q", d.Receipt, bad), model.ErrInvalidParameterValue)
	}
	e.mustChangeVis("q", d.Receipt, model.MaxVisibilityTimeout)
	e.advance(model.MaxVisibilityTimeout - time.Second)
	e.receiveNone("q")
	e.advance(time.Second)
	e.receiveOne("q")
}

// testStaleReceipt: a handle from an earlier lease never deletes or changes
// a message that has since been received again; the current holder is unaffected.
func testStaleReceipt(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.sendBody("q", "a")
	d1 := e.receiveOneFor("q", 5*time.Second)
	e.advance(5 * time.Second)
	d2 := e.receiveOne("q") // lease of 30 s
	if d2.ReceiveCount != 2 {
		t.Fatalf("ReceiveCount = %d, want 2", d2.ReceiveCount)
	}
	if err := e.deleteErr("q", d1.Receipt); err != nil {
		t.Fatalf("Delete with a stale receipt: %v, want success without effect", err)
	}
	e.wantStats("q", 0, 1, 0)
	wantErr(t, "ChangeVisibility with a stale receipt", e.changeVisErr("q", d1.Receipt, 0), model.ErrInvalidParameterValue)
	e.wantStats("q", 0, 1, 0)
	e.receiveNone("q")
	// The current holder is unaffected.
	e.mustChangeVis("q", d2.Receipt, time.Minute)
	e.mustDelete("q", d2.Receipt)
	e.wantStats("q", 0, 0, 0)
	e.advance(2 * time.Minute)
	e.receiveNone("q")
}

// testExpiredLease: after a lease expires, with no receive since, the
// handle is still the latest: a visibility change fails with
// ErrMessageNotInflight, and a delete deletes (SQS standard queues).
func testExpiredLease(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.sendBody("q", "a")
	d := e.receiveOneFor("q", 5*time.Second)
	e.advance(5 * time.Second)
	e.eventuallyStats("q", 1, 0, 0)
	wantErr(t, "ChangeVisibility after the lease expired", e.changeVisErr("q", d.Receipt, time.Minute), model.ErrMessageNotInflight)
	e.wantStats("q", 1, 0, 0)
	e.mustDelete("q", d.Receipt)
	e.wantStats("q", 0, 0, 0)
	e.receiveNone("q")
}

func testDeletedMessageReceipt(t *testing.T, s suite) {
	e := s.setup(t)
	q := e.createQueue("q", nil)
	e.sendBody("q", "a")
	d := e.receiveOne("q")
	e.mustDelete("q", d.Receipt)
	for i := 0; i < 3; i++ {
		if err := e.deleteErr("q", d.Receipt); err != nil {
			t.Fatalf("Delete #%d of a deleted message: %v, want success", i+2, err)
		}
	}
	wantErr(t, "ChangeVisibility of a deleted message", e.changeVisErr("q", d.Receipt, time.Minute), model.ErrInvalidParameterValue)
	// A well-formed handle of a message that never existed behaves alike.
	never := e.be.Receipts().Encode(model.Receipt{QueueID: q.ID, Key: 1 << 60, Lease: 1})
	if err := e.deleteErr("q", never); err != nil {
		t.Fatalf("Delete with a well-formed handle of no message: %v, want success", err)
	}
	wantErr(t, "ChangeVisibility with a handle of no message", e.changeVisErr("q", never, 0), model.ErrInvalidParameterValue)
}

func testGarbageReceipt(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.sendBody("q", "a")
	d := e.receiveOne("q")
	for _, h := range []string{"garbage", "AAAA", d.Receipt + "x", d.Receipt[1:]} {
		wantErr(t, "Delete("+h+")", e.deleteErr("q", h), model.ErrReceiptHandleInvalid)
		wantErr(t, "ChangeVisibility("+h+")", e.changeVisErr("q", h, 0), model.ErrReceiptHandleInvalid)
	}
	e.wantStats("q", 0, 1, 0)
}

func testReceiptOfAnotherQueue(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("a", nil)
	e.createQueue("b", nil)
	e.sendBody("a", "x")
	e.sendBody("b", "y")
	da := e.receiveOne("a")
	e.receiveOne("b")
	wantErr(t, "Delete on b with a receipt of a", e.deleteErr("b", da.Receipt), model.ErrReceiptHandleInvalid)
	wantErr(t, "ChangeVisibility on b with a receipt of a", e.changeVisErr("b", da.Receipt, 0), model.ErrReceiptHandleInvalid)
	e.wantStats("a", 0, 1, 0)
	e.wantStats("b", 0, 1, 0)
}

func testInFlightCap(t *testing.T, s suite) {
	e := s.setup(t, func(o *broker.Config) { o.MaxInFlight = 3 })
	e.createQueue("q", nil)
	e.createQueue("other", nil)
	for i := 0; i < 5; i++ {
		e.sendBody("q", "m")
	}
	var ds []model.Delivery
	for i := 0; i < 3; i++ {
		ds = append(ds, e.receiveOne("q"))
	}
	e.wantStats("q", 2, 3, 0)
	for _, wait := range []time.Duration{0, 20 * time.Second} {
		got, err := e.receive(model.ReceiveRequest{Queue: "q", MaxMessages: 10, WaitTime: dur(wait)})
		wantErr(t, "Receive at the in-flight cap (wait "+wait.String()+")", err, model.ErrOverLimit)
		if len(got) != 0 {
			t.Fatalf("Receive at the cap returned %d messages", len(got))
		}
	}
	e.wantStats("q", 2, 3, 0)
	// The cap is per queue.
	e.sendBody("other", "o")
	e.receiveOne("other")
	// A delete and a nack each free a slot.
	e.mustDelete("q", ds[0].Receipt)
	e.receiveOne("q")
	_, err := e.receive(model.ReceiveRequest{Queue: "q", WaitTime: dur(0)})
	wantErr(t, "Receive at the cap again", err, model.ErrOverLimit)
	e.mustChangeVis("q", ds[1].Receipt, 0)
	e.receiveOne("q")
	e.wantStats("q", 1, 3, 0)
	// Expired leases free their slots.
	e.advance(30 * time.Second)
	e.eventuallyStats("q", 4, 0, 0)
	e.receiveOne("q")
}

// testInFlightCapBatchReceive: a receive of 10 below a cap of 3 never takes
// the queue past the cap (it returns fewer messages or ErrOverLimit).
func testInFlightCapBatchReceive(t *testing.T, s suite) {
	e := s.setup(t, func(o *broker.Config) { o.MaxInFlight = 3 })
	e.createQueue("q", nil)
	for i := 0; i < 10; i++ {
		e.sendBody("q", "m")
	}
	got, err := e.receive(model.ReceiveRequest{Queue: "q", MaxMessages: 10, WaitTime: dur(20 * time.Second)})
	if err != nil {
		wantErr(t, "Receive of 10 below a cap of 3", err, model.ErrOverLimit)
	}
	if len(got) > 3 {
		t.Fatalf("Receive of 10 with a cap of 3 returned %d messages", len(got))
	}
	if st := e.stats("q"); st.InFlight > 3 || st.InFlight != int64(len(got)) || st.Visible != 10-int64(len(got)) {
		t.Fatalf("after a receive of %d messages the counts are %+v", len(got), st)
	}
}
