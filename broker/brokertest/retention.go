package brokertest

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// Retention is enforced by a sweeper on the backend's clock: these tests
// advance the fake clock in steps and poll, in real time, for its work.
var retentionTests = []testCase{
	{"SweepsEveryState", testRetentionSweepsEveryState},
	{"DeadLetterKeepsSentAt", testRetentionDeadLetterKeepsSentAt},
	{"LoweredRetention", testRetentionLowered},
}

// retentionLimit bounds how far the retention tests move the clock past
// the expiry: less than MaxDelay, so a delayed message never becomes visible
// by its delay ending (which would hide a sweeper that skips delayed messages).
const retentionLimit = 13 * time.Minute

func testRetentionSweepsEveryState(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", map[string]string{model.AttrMessageRetentionPeriod: "60"})
	e.createQueue("q", map[string]string{
		model.AttrMessageRetentionPeriod: "60",
		model.AttrRedrivePolicy:          redrivePolicy("dlq", 1),
	})
	e.createQueue("other", nil)
	e.sendBody("other", "kept") // default retention: 4 days

	e.sendBody("q", "dead")
	d := e.receiveOne("q")
	e.mustChangeVis("q", d.Receipt, 0)
	e.moveToDLQ("q", "dlq", 1)

	e.sendBody("q", "inflight")
	inflight := e.receiveOneFor("q", model.MaxVisibilityTimeout)
	e.send("q", model.SendEntry{Body: "ready"}, model.SendEntry{Body: "delayed", Delay: dur(model.MaxDelay)})
	e.wantStats("q", 1, 1, 1)
	e.wantStats("dlq", 1, 0, 0)

	e.advance(59 * time.Second)
	e.wantStats("q", 1, 1, 1)
	e.wantStats("dlq", 1, 0, 0)

	zero := model.QueueStats{}
	e.advanceUntil(5*time.Second, retentionLimit, "ready, in-flight, delayed and dead-lettered messages expire", func() bool {
		return e.stats("q") == zero && e.stats("dlq") == zero
	})
	e.receiveNone("q")
	e.receiveNone("dlq")
	wantErr(t, "ChangeVisibility of an expired in-flight message", e.changeVisErr("q", inflight.Receipt, 0), model.ErrInvalidParameterValue)
	if err := e.deleteErr("q", inflight.Receipt); err != nil {
		t.Fatalf("Delete of an expired in-flight message: %v, want success", err)
	}
	// The expired delayed message never surfaces when its delay would have ended.
	e.advance(model.MaxDelay)
	e.receiveNone("q")
	e.wantStats("q", 0, 0, 0)
	e.wantStats("other", 1, 0, 0)
}

// testRetentionDeadLetterKeepsSentAt: a standard queue's dead letter expires
// by its original send time under the DLQ's retention, not by its move time.
func testRetentionDeadLetterKeepsSentAt(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", map[string]string{model.AttrMessageRetentionPeriod: "120"})
	e.createQueue("q", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 1)})
	t0 := e.clock.Now()
	e.sendBody("q", "a")
	d := e.receiveOneFor("q", time.Hour)
	e.advance(100 * time.Second)
	e.mustChangeVis("q", d.Receipt, 0)
	e.moveToDLQ("q", "dlq", 1)
	e.advance(19 * time.Second) // t0+119
	e.wantStats("dlq", 1, 0, 0)
	e.advanceUntil(time.Second, 90*time.Second, "a dead letter expires 120 s after it was sent (t0+120), not after its move (t0+220)", func() bool {
		return e.stats("dlq") == model.QueueStats{}
	})
	if gone := e.clock.Now().Sub(t0); gone < 120*time.Second {
		t.Fatalf("the dead letter expired %v after it was sent, before the DLQ's 120 s retention", gone)
	}
	e.receiveNone("dlq")
}

func testRetentionLowered(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.sendBody("q", "old")
	e.advance(2 * time.Minute)
	e.wantStats("q", 1, 0, 0)
	if err := e.b.SetQueueAttributes(e.ctx, "q", map[string]string{model.AttrMessageRetentionPeriod: "60"}); err != nil {
		t.Fatal(err)
	}
	e.advanceUntil(5*time.Second, retentionLimit, "a message older than a lowered retention expires", func() bool {
		return e.stats("q") == model.QueueStats{}
	})
	e.receiveNone("q")
}
