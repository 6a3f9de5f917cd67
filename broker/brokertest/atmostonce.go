package brokertest

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// The at-most-once tests (DeliveryMode at-most-once): a receive removes the
// message; its receipt deletes nothing and changes nothing.
var atMostOnceTests = []testCase{
	{"ReceiveRemoves", testAtMostOnceRemoves},
	{"Refusals", testAtMostOnceRefusals},
	{"SurvivesRestart", testAtMostOnceRestart},
}

func testAtMostOnceRemoves(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrDeliveryMode: model.DeliveryAtMostOnce, model.AttrVisibilityTimeout: "10"})
	e.send("q", model.SendEntry{Body: "a"}, model.SendEntry{Body: "b"})
	d := e.receiveN(model.ReceiveRequest{Queue: "q", MaxMessages: 1}, 1)[0]
	e.wantStats("q", 1, 0, 0)
	if err := e.deleteErr("q", d.Receipt); err != nil {
		t.Fatalf("Delete with an at-most-once receipt: %v, want success without effect", err)
	}
	e.wantStats("q", 1, 0, 0)
	wantErr(t, "ChangeVisibility with an at-most-once receipt", e.changeVisErr("q", d.Receipt, 0), model.ErrMessageNotInflight)
	wantErr(t, "a nack of an at-most-once receipt", e.changeLease("q", model.LeaseEntry{Receipt: d.Receipt, Kind: model.Nack}), model.ErrMessageNotInflight)
	e.advance(10 * time.Second) // its lease would have ended
	d2 := e.receiveOne("q")
	if d2.Body == d.Body {
		t.Fatalf("at-most-once delivered %q twice", d.Body)
	}
	e.advance(time.Minute)
	e.receiveNone("q")
	e.wantStats("q", 0, 0, 0)
}

// testAtMostOnceRefusals: standard queues only, never with a RedrivePolicy
// or a RetryPolicy, whichever is set first.
func testAtMostOnceRefusals(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	amo := map[string]string{model.AttrDeliveryMode: model.DeliveryAtMostOnce}
	for _, c := range []struct {
		name  string
		attrs map[string]string
	}{
		{"q.fifo", map[string]string{model.AttrFifoQueue: "true"}},
		{"q1", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 3)}},
		{"q2", map[string]string{model.AttrRetryPolicy: retryPolicy(1, 10, model.JitterFull)}},
	} {
		attrs := map[string]string{model.AttrDeliveryMode: model.DeliveryAtMostOnce}
		for k, v := range c.attrs {
			attrs[k] = v
		}
		_, err := e.b.CreateQueue(e.ctx, c.name, attrs, nil)
		wantErr(t, "CreateQueue "+c.name+" at-most-once", err, model.ErrInvalidAttributeValue)
	}
	e.createQueue("amo", amo)
	wantErr(t, "a RetryPolicy on an at-most-once queue",
		e.b.SetQueueAttributes(e.ctx, "amo", map[string]string{model.AttrRetryPolicy: retryPolicy(1, 10, model.JitterFull)}), model.ErrInvalidAttributeValue)
	wantErrOneOf(t, "a RedrivePolicy on an at-most-once queue",
		e.b.SetQueueAttributes(e.ctx, "amo", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 3)}),
		model.ErrInvalidAttributeValue, model.ErrInvalidParameterValue)
	e.createQueue("redriven", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 3)})
	wantErr(t, "at-most-once on a queue with a RedrivePolicy",
		e.b.SetQueueAttributes(e.ctx, "redriven", amo), model.ErrInvalidAttributeValue)
	if c := e.getQueue("amo").Config; c.Retry != nil || c.Redrive != nil || !c.AtMostOnce() {
		t.Fatalf("refused settings were stored: %+v", c)
	}
	if e.getQueue("redriven").Config.AtMostOnce() {
		t.Fatal("the refused DeliveryMode was stored")
	}
}

// testAtMostOnceRestart: a received message stays gone after a restart
// (the removal is durable before the answer).
func testAtMostOnceRestart(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	e.createQueue("q", map[string]string{model.AttrDeliveryMode: model.DeliveryAtMostOnce})
	e.send("q", model.SendEntry{Body: "a"}, model.SendEntry{Body: "b"})
	d := e.receiveN(model.ReceiveRequest{Queue: "q", MaxMessages: 1}, 1)[0]
	e.reopen()
	if !e.getQueue("q").Config.AtMostOnce() {
		t.Fatal("the queue lost its DeliveryMode across the restart")
	}
	e.wantStats("q", 1, 0, 0)
	d2 := e.receiveOne("q")
	if d2.Body == d.Body {
		t.Fatalf("%q was delivered again after a restart", d.Body)
	}
	e.advance(time.Hour)
	e.receiveNone("q")
}
