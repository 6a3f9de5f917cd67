package brokertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

var redriveTests = []testCase{
	{"MoveAfterMaxReceiveCount1", func(t *testing.T, s suite) { testRedriveMove(t, s, 1) }},
	{"MoveAfterMaxReceiveCount3", func(t *testing.T, s suite) { testRedriveMove(t, s, 3) }},
	{"MoveBesideOtherMessages", testRedriveBesideOthers},
	{"PolicyTargetMustExist", testRedrivePolicyMissingTarget},
	{"PolicyTargetNotItself", testRedrivePolicyItself},
	{"PolicySetAndRemove", testRedrivePolicySetAndRemove},
	{"AllowPolicyDenyAll", testRedriveAllowDenyAll},
	{"AllowPolicyByQueue", testRedriveAllowByQueue},
	// FIFO↔FIFO type matching belongs with the FIFO tests.
}

func redrivePolicy(dlq string, maxReceiveCount int) string {
	return fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":%d}`, arn(dlq), maxReceiveCount)
}

// moveToDLQ short-polls src, which must return nothing, until the DLQ counts
// wantVisible messages: the receive past maxReceiveCount moves a message
// instead of returning it. src must hold no other visible message.
func (e *env) moveToDLQ(src, dlq string, wantVisible int64) {
	e.t.Helper()
	deadline := time.Now().Add(realTimeout)
	for {
		ds, err := e.receive(model.ReceiveRequest{Queue: src, MaxMessages: 10, WaitTime: dur(0)})
		if err != nil {
			e.t.Fatalf("Receive(%s) past maxReceiveCount: %v", src, err)
		}
		if len(ds) > 0 {
			e.t.Fatalf("Receive(%s) past maxReceiveCount returned %q (ReceiveCount %d) instead of moving it to %s",
				src, ds[0].Body, ds[0].ReceiveCount, dlq)
		}
		if e.stats(dlq).Visible == wantVisible {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no message moved from %s to %s: DLQ counts %+v", src, dlq, e.stats(dlq))
		}
		time.Sleep(pollInterval)
	}
}

// eventuallyNotInFlight waits (real time) until queue has no message in
// flight: a lease that ended on the last attempt may leave the message
// visible until a receive moves it, or move it to the DLQ at once.
func (e *env) eventuallyNotInFlight(queue string) {
	e.t.Helper()
	eventually(e.t, queue+" has no message in flight", func() bool { return e.stats(queue).InFlight == 0 })
}

func testRedriveMove(t *testing.T, s suite, n int) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("src", map[string]string{
		model.AttrVisibilityTimeout: "10",
		model.AttrRedrivePolicy:     redrivePolicy("dlq", n),
	})
	e.advance(time.Second)
	sentAt := e.clock.Now()
	entry := model.SendEntry{
		ID: "m", Body: "poison", Attributes: sampleAttributes(),
		SystemAttributes: sampleSystemAttributes(), SenderID: "AIDAEXAMPLE",
	}
	res := e.send("src", entry)[0]
	e.advance(time.Second)
	firstAt := e.clock.Now()
	var last model.Delivery
	for i := 1; i <= n; i++ {
		d := e.receiveOne("src")
		last = d
		if d.ID != res.MessageID || d.ReceiveCount != i {
			t.Fatalf("receive %d: got %s count %d, want %s count %d", i, d.ID, d.ReceiveCount, res.MessageID, i)
		}
		wantTime(t, fmt.Sprintf("receive %d FirstReceiveAt", i), d.FirstReceiveAt, firstAt)
		e.advance(10 * time.Second) // the lease expires
		if i < n {
			e.eventuallyStats("src", 1, 0, 0)
		}
	}
	// The last attempt's lease expired: the message moves to the DLQ when
	// the backend notices (at the expiry, or at the next receive at the
	// latest), never back to visible on src.
	e.moveToDLQ("src", "dlq", 1)
	e.wantStats("src", 0, 0, 0)
	e.wantStats("dlq", 1, 0, 0)
	// The last source receipt is stale: it neither deletes nor changes the dead letter.
	if err := e.deleteErr("src", last.Receipt); err != nil {
		t.Fatalf("Delete with the source receipt of a dead-lettered message: %v, want success without effect", err)
	}
	wantErr(t, "ChangeVisibility with the source receipt of a dead-lettered message",
		e.changeVisErr("src", last.Receipt, 0), model.ErrInvalidParameterValue)
	e.wantStats("dlq", 1, 0, 0)

	d := e.receiveOne("dlq")
	wantSameMessage(t, d, res.MessageID, entry, sentAt)
	if d.ReceiveCount != n+1 {
		t.Fatalf("first DLQ receive: ReceiveCount %d, want %d (it keeps counting)", d.ReceiveCount, n+1)
	}
	wantTime(t, "DLQ FirstReceiveAt", d.FirstReceiveAt, firstAt)
	if d.DeadLetterSource != "src" {
		t.Fatalf("DeadLetterSource = %q, want src", d.DeadLetterSource)
	}
	e.mustDelete("dlq", d.Receipt)
	e.wantStats("dlq", 0, 0, 0)
	e.advance(time.Minute)
	e.receiveNone("src")
	e.receiveNone("dlq")
}

// testRedriveBesideOthers: a receive of several messages moves the one past
// its count and returns the others.
func testRedriveBesideOthers(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("src", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 1)})
	e.sendBody("src", "poison")
	p := e.receiveOne("src")
	e.mustChangeVis("src", p.Receipt, 0)
	e.send("src", model.SendEntry{Body: "fine1"}, model.SendEntry{Body: "fine2"})
	got := map[string]bool{}
	deadline := time.Now().Add(realTimeout)
	for len(got) < 2 {
		ds, err := e.receive(model.ReceiveRequest{Queue: "src", MaxMessages: 10, WaitTime: dur(model.MaxWaitTime)})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.Body == "poison" {
				t.Fatalf("the message past maxReceiveCount was returned (ReceiveCount %d)", d.ReceiveCount)
			}
			got[d.Body] = true
		}
		if time.Now().After(deadline) {
			t.Fatalf("received %v, want fine1 and fine2", got)
		}
	}
	e.moveToDLQ("src", "dlq", 1)
	e.wantStats("src", 0, 2, 0)
	if d := e.receiveOne("dlq"); d.Body != "poison" || d.ReceiveCount != 2 {
		t.Fatalf("DLQ holds %q count %d, want poison count 2", d.Body, d.ReceiveCount)
	}
}

func testRedrivePolicyMissingTarget(t *testing.T, s suite) {
	e := s.setup(t)
	_, err := e.b.CreateQueue(e.ctx, "src", map[string]string{model.AttrRedrivePolicy: redrivePolicy("nope", 3)}, nil)
	wantErrOneOf(t, "CreateQueue with a RedrivePolicy to a missing queue", err, model.ErrInvalidParameterValue, model.ErrInvalidAttributeValue)
	_, err = e.b.GetQueue(e.ctx, "src")
	wantErr(t, "GetQueue after the refused CreateQueue", err, model.ErrQueueDoesNotExist)
	e.createQueue("src", nil)
	err = e.b.SetQueueAttributes(e.ctx, "src", map[string]string{model.AttrRedrivePolicy: redrivePolicy("nope", 3)})
	wantErrOneOf(t, "SetQueueAttributes with a RedrivePolicy to a missing queue", err, model.ErrInvalidParameterValue, model.ErrInvalidAttributeValue)
	if r := e.getQueue("src").Config.Redrive; r != nil {
		t.Fatalf("refused RedrivePolicy was stored: %+v", r)
	}
	// A queue that was deleted is missing too.
	e.createQueue("gone", nil)
	if err := e.b.DeleteQueue(e.ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	err = e.b.SetQueueAttributes(e.ctx, "src", map[string]string{model.AttrRedrivePolicy: redrivePolicy("gone", 3)})
	wantErrOneOf(t, "RedrivePolicy to a deleted queue", err, model.ErrInvalidParameterValue, model.ErrInvalidAttributeValue)
}

// testRedrivePolicyItself: a queue can't be its own dead-letter queue, at
// creation or later (such a message would never move), and the refusal says
// so in the same words both times.
func testRedrivePolicyItself(t *testing.T, s suite) {
	e := s.setup(t)
	_, createErr := e.b.CreateQueue(e.ctx, "q", map[string]string{model.AttrRedrivePolicy: redrivePolicy("q", 3)}, nil)
	wantErr(t, "CreateQueue with a RedrivePolicy naming the queue itself", createErr, model.ErrInvalidParameterValue)
	e.createQueue("q", nil)
	setErr := e.b.SetQueueAttributes(e.ctx, "q", map[string]string{model.AttrRedrivePolicy: redrivePolicy("q", 3)})
	wantErr(t, "SetQueueAttributes with a RedrivePolicy naming the queue itself", setErr, model.ErrInvalidParameterValue)
	if createErr.Error() != setErr.Error() {
		t.Fatalf("CreateQueue says %q, SetQueueAttributes %q: want the same refusal", createErr, setErr)
	}
	if r := e.getQueue("q").Config.Redrive; r != nil {
		t.Fatalf("the refused RedrivePolicy was stored: %+v", r)
	}
}

func testRedrivePolicySetAndRemove(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("src", nil)
	for _, bad := range []string{
		fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":0}`, arn("dlq")),
		fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":1001}`, arn("dlq")),
	} {
		err := e.b.SetQueueAttributes(e.ctx, "src", map[string]string{model.AttrRedrivePolicy: bad})
		wantErr(t, "RedrivePolicy "+bad, err, model.ErrInvalidAttributeValue)
	}
	if err := e.b.SetQueueAttributes(e.ctx, "src", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 2)}); err != nil {
		t.Fatal(err)
	}
	e.sendBody("src", "a")
	d := e.receiveOne("src")
	e.mustChangeVis("src", d.Receipt, 0) // attempt 1 of 2 failed: visible again
	// Lowering maxReceiveCount to 1 dooms the message at its next receive…
	if err := e.b.SetQueueAttributes(e.ctx, "src", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 1)}); err != nil {
		t.Fatal(err)
	}
	r := e.getQueue("src").Config.Redrive
	if r == nil || r.DeadLetterQueue != "dlq" || r.MaxReceiveCount != 1 {
		t.Fatalf("stored RedrivePolicy = %+v", r)
	}
	// …but removing the policy: the message is returned again instead of moving.
	if err := e.b.SetQueueAttributes(e.ctx, "src", map[string]string{model.AttrRedrivePolicy: ""}); err != nil {
		t.Fatal(err)
	}
	if r := e.getQueue("src").Config.Redrive; r != nil {
		t.Fatalf("RedrivePolicy after removal = %+v", r)
	}
	if d := e.receiveOne("src"); d.ReceiveCount != 2 {
		t.Fatalf("ReceiveCount %d, want 2", d.ReceiveCount)
	}
	e.wantStats("dlq", 0, 0, 0)
}

func testRedriveAllowDenyAll(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", map[string]string{model.AttrRedriveAllowPolicy: `{"redrivePermission":"denyAll"}`})
	_, err := e.b.CreateQueue(e.ctx, "src", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 3)}, nil)
	wantErrOneOf(t, "CreateQueue with a RedrivePolicy to a denyAll DLQ", err, model.ErrInvalidParameterValue, model.ErrInvalidAttributeValue)
	e.createQueue("src", nil)
	err = e.b.SetQueueAttributes(e.ctx, "src", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 3)})
	wantErrOneOf(t, "SetQueueAttributes with a RedrivePolicy to a denyAll DLQ", err, model.ErrInvalidParameterValue, model.ErrInvalidAttributeValue)
	// allowAll, explicit or by default, lets any source in.
	e.createQueue("open", map[string]string{model.AttrRedriveAllowPolicy: `{"redrivePermission":"allowAll"}`})
	e.createQueue("src2", map[string]string{model.AttrRedrivePolicy: redrivePolicy("open", 3)})
}

func testRedriveAllowByQueue(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", map[string]string{
		model.AttrRedriveAllowPolicy: fmt.Sprintf(`{"redrivePermission":"byQueue","sourceQueueArns":[%q]}`, arn("src-ok")),
	})
	e.createQueue("src-ok", map[string]string{
		model.AttrRedrivePolicy:     redrivePolicy("dlq", 1),
		model.AttrVisibilityTimeout: "5",
	})
	_, err := e.b.CreateQueue(e.ctx, "src-bad", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 1)}, nil)
	wantErrOneOf(t, "CreateQueue of a source the byQueue policy does not list", err, model.ErrInvalidParameterValue, model.ErrInvalidAttributeValue)
	// The allowed source really dead-letters.
	e.sendBody("src-ok", "a")
	e.receiveOne("src-ok")
	e.advance(5 * time.Second)
	e.eventuallyNotInFlight("src-ok")
	e.moveToDLQ("src-ok", "dlq", 1)
}
