package brokertest

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// The restart tests reopen the backend on the same storage (Harness.Reopen)
// and the same fake clock: every acknowledged change must survive.
var restartTests = []testCase{
	{"KeepsState", testRestartKeepsState},
	{"LeaseExpiredAcrossRestart", testRestartLeaseExpired},
	{"QueueSettingsAndIDs", testRestartQueueSettings},
	{"RetentionAfterRestart", testRestartRetention},
	{"RecreatedQueueRejectsOldReceipts", testRestartRecreatedQueueReceipts},
}

// testRestartRecreatedQueueReceipts: a queue deleted and created again
// after a restart is a new queue (a new id), and the receipts of the old
// one are invalid on it.
func testRestartRecreatedQueueReceipts(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	q1 := e.createQueue("q", nil)
	e.sendBody("q", "a")
	d := e.receiveOne("q")
	if err := e.b.DeleteQueue(e.ctx, "q"); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	q2 := e.createQueue("q", nil)
	if q2.ID == q1.ID {
		t.Fatalf("the re-created queue reused id %d", q1.ID)
	}
	wantErr(t, "Delete with a receipt of the deleted queue", e.deleteErr("q", d.Receipt), model.ErrReceiptHandleInvalid)
	wantErr(t, "ChangeVisibility with a receipt of the deleted queue", e.changeVisErr("q", d.Receipt, 0), model.ErrReceiptHandleInvalid)
	e.wantStats("q", 0, 0, 0)
}

func testRestartKeepsState(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	q := e.createQueue("q", map[string]string{model.AttrVisibilityTimeout: "60"})
	e.createQueue("gone", nil)
	e.createQueue("dlq", nil)
	e.createQueue("src", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 1)})
	t0 := e.clock.Now()

	e.sendBody("q", "inflight")
	inflight := e.receiveOne("q") // lease until t0+60
	e.sendBody("q", "heartbeat")
	heartbeat := e.receiveOneFor("q", 10*time.Second)
	e.mustChangeVis("q", heartbeat.Receipt, 100*time.Second) // lease until t0+100
	e.sendBody("q", "deleted")
	e.mustDelete("q", e.receiveOne("q").Receipt)
	e.sendBody("q", "later")
	later := e.receiveOne("q") // deleted after the restart
	e.send("q", model.SendEntry{Body: "delayed", Delay: dur(30 * time.Second)})
	readyEntry := model.SendEntry{
		ID: "r", Body: "ready", Attributes: sampleAttributes(),
		SystemAttributes: sampleSystemAttributes(), SenderID: "AIDAEXAMPLE",
	}
	ready := e.send("q", readyEntry)[0]
	e.sendBody("src", "dead")
	e.mustChangeVis("src", e.receiveOne("src").Receipt, 0)
	e.moveToDLQ("src", "dlq", 1)
	if err := e.b.DeleteQueue(e.ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	e.wantStats("q", 1, 3, 1)

	e.advance(5 * time.Second) // t0+5
	e.reopen()

	info := e.getQueue("q")
	if info.ID != q.ID || info.Config.VisibilityTimeout != time.Minute {
		t.Fatalf("after restart queue id %d visibility %v, want id %d visibility 1m", info.ID, info.Config.VisibilityTimeout, q.ID)
	}
	wantTime(t, "CreatedAt after restart", info.CreatedAt, q.CreatedAt)
	if counts(info.Stats) != (model.QueueStats{Visible: 1, InFlight: 3, Delayed: 1}) {
		t.Fatalf("counts after restart = %+v, want visible 1, in flight 3, delayed 1", info.Stats)
	}
	_, err := e.b.GetQueue(e.ctx, "gone")
	wantErr(t, "GetQueue of a queue deleted before the restart", err, model.ErrQueueDoesNotExist)
	e.wantStats("dlq", 1, 0, 0)

	// A receipt from before the restart still deletes.
	e.mustDelete("q", later.Receipt)
	e.wantStats("q", 1, 2, 1)
	d := e.receiveOne("q")
	wantSameMessage(t, d, ready.MessageID, readyEntry, t0)
	e.mustDelete("q", d.Receipt)
	e.receiveNone("q")

	e.reopen() // a second restart, after more changes
	e.wantStats("q", 0, 2, 1)
	e.advance(25 * time.Second) // t0+30: the delay ends
	if d := e.receiveOne("q"); d.Body != "delayed" || d.ReceiveCount != 1 {
		t.Fatalf("at t0+30 received %q count %d, want delayed count 1", d.Body, d.ReceiveCount)
	} else {
		e.mustDelete("q", d.Receipt)
	}
	e.advance(29 * time.Second) // t0+59: leases hold their deadlines across restarts
	e.receiveNone("q")
	e.advance(time.Second) // t0+60
	d = e.receiveOne("q")
	if d.ID != inflight.ID || d.ReceiveCount != 2 {
		t.Fatalf("at t0+60 received %q count %d, want inflight count 2", d.Body, d.ReceiveCount)
	}
	wantTime(t, "FirstReceiveAt after restart", d.FirstReceiveAt, inflight.FirstReceiveAt)
	e.mustDelete("q", d.Receipt)
	e.advance(39 * time.Second) // t0+99
	e.receiveNone("q")
	e.advance(time.Second) // t0+100
	if d := e.receiveOne("q"); d.ID != heartbeat.ID || d.ReceiveCount != 2 {
		t.Fatalf("at t0+100 received %q count %d, want heartbeat count 2", d.Body, d.ReceiveCount)
	} else {
		e.mustDelete("q", d.Receipt)
	}
	e.wantStats("q", 0, 0, 0)
	e.receiveNone("q") // "deleted" never came back

	dl := e.receiveOne("dlq")
	if dl.Body != "dead" || dl.DeadLetterSource != "src" || dl.ReceiveCount != 2 {
		t.Fatalf("DLQ after restart: %q source %q count %d, want dead from src count 2", dl.Body, dl.DeadLetterSource, dl.ReceiveCount)
	}
}

// testRestartLeaseExpired: a lease whose deadline passed while the backend
// was restarting is visible again after it.
func testRestartLeaseExpired(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	e.createQueue("q", nil)
	e.sendBody("q", "a")
	d := e.receiveOneFor("q", 10*time.Second)
	e.advance(10 * time.Second)
	e.reopen()
	e.eventuallyStats("q", 1, 0, 0)
	wantErr(t, "ChangeVisibility of a lease that expired across a restart", e.changeVisErr("q", d.Receipt, time.Minute), model.ErrMessageNotInflight)
	if got := e.receiveOne("q"); got.ID != d.ID || got.ReceiveCount != 2 {
		t.Fatalf("after restart got %s count %d, want %s count 2", got.ID, got.ReceiveCount, d.ID)
	}
	// A stale receipt stays stale across a restart.
	e.reopen()
	if err := e.deleteErr("q", d.Receipt); err != nil {
		t.Fatalf("Delete with a stale receipt after restart: %v", err)
	}
	e.wantStats("q", 0, 1, 0)
}

func testRestartQueueSettings(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	attrs := map[string]string{
		model.AttrDelaySeconds: "7", model.AttrMessageRetentionPeriod: "600",
		model.AttrMaximumMessageSize: "2048", model.AttrReceiveMessageWaitTimeSeconds: "3",
		model.AttrRedriveAllowPolicy: `{"redrivePermission":"denyAll"}`,
		model.AttrPolicy:             `{"Version":"2012-10-17","Statement":[]}`,
		"KmsMasterKeyId":             "alias/aws/sqs",
	}
	q, err := e.b.CreateQueue(e.ctx, "a", attrs, map[string]string{"team": "billing"})
	if err != nil {
		t.Fatal(err)
	}
	old := e.createQueue("b", nil)
	if err := e.b.DeleteQueue(e.ctx, "b"); err != nil {
		t.Fatal(err)
	}
	e.advance(time.Second)
	if err := e.b.SetQueueAttributes(e.ctx, "a", map[string]string{model.AttrVisibilityTimeout: "17"}); err != nil {
		t.Fatal(err)
	}
	modified := e.clock.Now()
	e.reopen()
	info := e.getQueue("a")
	for k, v := range attrs {
		if got := info.Config.Attributes()[k]; got != v {
			t.Fatalf("after restart %s = %q, want %q", k, got, v)
		}
	}
	if info.Config.VisibilityTimeout != 17*time.Second || info.ID != q.ID {
		t.Fatalf("after restart visibility %v id %d", info.Config.VisibilityTimeout, info.ID)
	}
	wantTime(t, "ModifiedAt after restart", info.ModifiedAt, modified)
	wantTime(t, "CreatedAt after restart", info.CreatedAt, q.CreatedAt)
	if info.Tags["team"] != "billing" {
		t.Fatalf("tags after restart = %v", info.Tags)
	}
	// Queue ids are never reused, even across restarts.
	b := e.createQueue("b", nil)
	if b.ID == old.ID || b.ID == q.ID {
		t.Fatalf("re-created queue b got id %d (old b %d, a %d)", b.ID, old.ID, q.ID)
	}
	e.wantList("", "", 0, "a", "b")
}

// testRestartRetention: the retention sweeper picks up, after a restart, the
// messages that were stored before it.
func testRestartRetention(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	e.createQueue("q", map[string]string{model.AttrMessageRetentionPeriod: "60"})
	e.sendBody("q", "inflight")
	e.receiveOneFor("q", model.MaxVisibilityTimeout)
	e.send("q", model.SendEntry{Body: "ready"}, model.SendEntry{Body: "delayed", Delay: dur(model.MaxDelay)})
	e.advance(30 * time.Second)
	e.reopen()
	e.wantStats("q", 1, 1, 1)
	e.advanceUntil(5*time.Second, retentionLimit, "messages stored before a restart expire after it", func() bool {
		return e.stats("q") == model.QueueStats{}
	})
	e.receiveNone("q")
}
