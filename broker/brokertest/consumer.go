package brokertest

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// The consumer controls (Broker.ChangeLeases): nack with a reason and a
// delay, snooze, release, dead-letter now and extend, single and batched.
var consumerTests = []testCase{
	{"NackReasonAndDelay", testNackReasonAndDelay},
	{"SnoozeNeverDeadLetters", testSnoozeNeverDeadLetters},
	{"ReleaseVisibleAtOnce", testRelease},
	{"DeadLetterNow", testDeadLetterNow},
	{"DeadLetterNowWithoutDLQ", testDeadLetterNowWithoutDLQ},
	{"Extend", testExtend},
	{"Batch", testChangeLeasesBatch},
	{"Ranges", testChangeLeasesRanges},
	{"SameReceiptTwice", testChangeLeasesSameReceiptTwice},
}

// testNackReasonAndDelay: a nack with a reason and a delay: delayed exactly
// that long, the reason kept (cut to MaxReasonBytes), the attempt counted.
func testNackReasonAndDelay(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.sendBody("q", "a")
	d := e.receiveOne("q")
	e.nack("q", d.Receipt, "db down", dur(20*time.Second))
	e.wantStats("q", 0, 0, 1)
	wantErr(t, "a second nack with the same receipt", e.changeLease("q", model.LeaseEntry{Receipt: d.Receipt, Kind: model.Nack}), model.ErrInvalidParameterValue)
	e.advance(19 * time.Second)
	e.receiveNone("q")
	e.advance(time.Second)
	d = e.receiveOne("q")
	wantCounts(t, "after a nack", d, 2, 2)
	if d.FailureReason != "db down" {
		t.Fatalf("FailureReason = %q, want %q", d.FailureReason, "db down")
	}
	long := strings.Repeat("é", model.MaxReasonBytes) // 2 bytes each
	e.nack("q", d.Receipt, long, nil)
	d = e.receiveOne("q")
	if d.FailureReason != model.CutReason(long) || len(d.FailureReason) != model.MaxReasonBytes {
		t.Fatalf("a %d-byte reason is kept as %d bytes, want it cut to %d", len(long), len(d.FailureReason), model.MaxReasonBytes)
	}
}

// testSnoozeNeverDeadLetters: a snooze gives the attempt back, so even at
// maxReceiveCount 1 the message comes back instead of moving.
func testSnoozeNeverDeadLetters(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("src", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 1)})
	e.sendBody("src", "a")
	for i := 1; i <= 3; i++ {
		d := e.receiveOne("src")
		wantCounts(t, "after snoozes", d, 1, i)
		e.snooze("src", d.Receipt, 5*time.Second)
		e.wantStats("src", 0, 0, 1)
		e.advance(4 * time.Second)
		e.receiveNone("src")
		e.advance(time.Second)
	}
	e.wantStats("dlq", 0, 0, 0)
	d := e.receiveOne("src")
	e.mustChangeVis("src", d.Receipt, 0) // the one attempt fails
	e.wantStats("dlq", 1, 0, 0)
}

// testRelease: a snooze of 0 hands the message back at once, as a worker
// does on shutdown, without counting an attempt or a failure.
func testRelease(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrRetryPolicy: retryPolicy(60, 300, model.JitterNone)})
	e.sendBody("q", "a")
	d := e.receiveOne("q")
	e.snooze("q", d.Receipt, 0)
	e.wantStats("q", 1, 0, 0)
	// The lease ended with the message visible (FateVisible): its receipt
	// no longer changes visibility, whichever of the two answers it gets.
	wantErrOneOf(t, "a release with a released receipt", e.changeLease("q", model.LeaseEntry{Receipt: d.Receipt, Kind: model.Snooze}),
		model.ErrInvalidParameterValue, model.ErrMessageNotInflight)
	d = e.receiveOne("q")
	wantCounts(t, "after a release", d, 1, 2)
	if d.FailureReason != "" {
		t.Fatalf("FailureReason after a release = %q, want none", d.FailureReason)
	}
}

// testDeadLetterNow: dead-letter now moves the message whatever its
// attempts, with the reason.
func testDeadLetterNow(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("src", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 10)})
	res := e.sendBody("src", "a")
	e.advance(time.Second)
	t1 := e.clock.Now()
	d := e.receiveOne("src")
	e.advance(time.Second)
	e.mustChangeLease("src", model.LeaseEntry{Receipt: d.Receipt, Kind: model.DeadLetterNow, Reason: "cannot parse"})
	e.wantStats("src", 0, 0, 0)
	e.wantStats("dlq", 1, 0, 0)
	wantForensics(t, e.browsed("dlq", res.MessageID), 1, 1, t1, t1, "cannot parse", "src")
	wantErr(t, "dead-letter now with the receipt of a dead letter",
		e.changeLease("src", model.LeaseEntry{Receipt: d.Receipt, Kind: model.DeadLetterNow}), model.ErrInvalidParameterValue)
	e.wantStats("dlq", 1, 0, 0)
}

// testDeadLetterNowWithoutDLQ: on a queue without a RedrivePolicy the entry
// fails with ErrConflict and the lease is untouched.
func testDeadLetterNowWithoutDLQ(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.sendBody("q", "a")
	d := e.receiveOne("q")
	wantErr(t, "dead-letter now without a RedrivePolicy",
		e.changeLease("q", model.LeaseEntry{Receipt: d.Receipt, Kind: model.DeadLetterNow, Reason: "x"}), model.ErrConflict)
	e.wantStats("q", 0, 1, 0)
	e.mustDelete("q", d.Receipt)
	e.wantStats("q", 0, 0, 0)
}

// testExtend: ChangeTimeout > 0 extends the lease from now; the receipt
// stays good.
func testExtend(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrVisibilityTimeout: "10"})
	e.sendBody("q", "a")
	d := e.receiveOne("q")
	e.advance(9 * time.Second)
	e.mustChangeLease("q", model.LeaseEntry{Receipt: d.Receipt, Kind: model.ChangeTimeout, Timeout: 50 * time.Second})
	e.advance(49 * time.Second)
	e.receiveNone("q")
	e.wantStats("q", 0, 1, 0)
	e.mustChangeLease("q", model.LeaseEntry{Receipt: d.Receipt, Kind: model.ChangeTimeout, Timeout: 10 * time.Second})
	e.advance(9 * time.Second)
	e.receiveNone("q")
	e.advance(time.Second)
	d2 := e.receiveOne("q")
	wantCounts(t, "after the extended lease ended", d2, 2, 2)
	wantErr(t, "extend with the receipt of the ended lease",
		e.changeLease("q", model.LeaseEntry{Receipt: d.Receipt, Kind: model.ChangeTimeout, Timeout: time.Second}), model.ErrInvalidParameterValue)
}

// testChangeLeasesSameReceiptTwice: a batch that names one receipt twice
// changes the lease once: the first entry applies, the second finds the
// lease gone (its message visible again, or moved), and the counters count
// each message once.
func testChangeLeasesSameReceiptTwice(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("src", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 10)})
	e.send("src", model.SendEntry{Body: "nack"}, model.SendEntry{Body: "dead"})
	ds := e.receiveN(model.ReceiveRequest{Queue: "src"}, 2)
	by := map[string]model.Delivery{}
	for _, d := range ds {
		by[d.Body] = d
	}
	errs, err := e.b.ChangeLeases(e.ctx, "src", []model.LeaseEntry{
		{ID: "n1", Receipt: by["nack"].Receipt, Kind: model.Nack},
		{ID: "d1", Receipt: by["dead"].Receipt, Kind: model.DeadLetterNow, Reason: "poison"},
		{ID: "n2", Receipt: by["nack"].Receipt, Kind: model.Nack},
		{ID: "d2", Receipt: by["dead"].Receipt, Kind: model.DeadLetterNow, Reason: "poison"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("the first entries of each receipt: %v, %v; want both applied", errs[0], errs[1])
	}
	wantErrOneOf(t, "the second nack with the same receipt", errs[2], model.ErrMessageNotInflight, model.ErrInvalidParameterValue)
	wantErrOneOf(t, "the second dead-letter-now with the same receipt", errs[3], model.ErrMessageNotInflight, model.ErrInvalidParameterValue)
	e.wantStats("src", 1, 0, 0)
	e.wantStats("dlq", 1, 0, 0)
	d := e.receiveOne("src")
	errs, err = e.b.ChangeVisibility(e.ctx, "src", []model.VisibilityEntry{
		{ID: "a", Receipt: d.Receipt, Timeout: 0}, {ID: "b", Receipt: d.Receipt, Timeout: 0}})
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil {
		t.Fatalf("the first ChangeMessageVisibility entry: %v", errs[0])
	}
	wantErrOneOf(t, "the second ChangeMessageVisibility entry with the same receipt", errs[1], model.ErrMessageNotInflight, model.ErrInvalidParameterValue)
	e.wantStats("src", 1, 0, 0)
}

// testChangeLeasesBatch: one call with every kind, each entry answered on
// its own; a bad receipt fails only its entry.
func testChangeLeasesBatch(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("src", map[string]string{
		model.AttrVisibilityTimeout: "30",
		model.AttrRedrivePolicy:     redrivePolicy("dlq", 10),
	})
	e.send("src", model.SendEntry{Body: "nack"}, model.SendEntry{Body: "snooze"}, model.SendEntry{Body: "dead"},
		model.SendEntry{Body: "extend"}, model.SendEntry{Body: "release"})
	ds := e.receiveN(model.ReceiveRequest{Queue: "src"}, 5)
	by := map[string]model.Delivery{}
	for _, d := range ds {
		by[d.Body] = d
	}
	entries := []model.LeaseEntry{
		{ID: "n", Receipt: by["nack"].Receipt, Kind: model.Nack, Reason: "r", Delay: dur(10 * time.Second)},
		{ID: "s", Receipt: by["snooze"].Receipt, Kind: model.Snooze, Timeout: 20 * time.Second},
		{ID: "d", Receipt: by["dead"].Receipt, Kind: model.DeadLetterNow, Reason: "poison"},
		{ID: "x", Receipt: "garbage", Kind: model.Nack},
		{ID: "e", Receipt: by["extend"].Receipt, Kind: model.ChangeTimeout, Timeout: time.Hour},
		{ID: "r", Receipt: by["release"].Receipt, Kind: model.Snooze},
	}
	errs, err := e.b.ChangeLeases(e.ctx, "src", entries)
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != len(entries) {
		t.Fatalf("ChangeLeases of %d entries answered %d", len(entries), len(errs))
	}
	for i, err := range errs {
		if entries[i].ID == "x" {
			wantErr(t, "the garbage receipt's entry", err, model.ErrReceiptHandleInvalid)
		} else if err != nil {
			t.Fatalf("entry %s: %v", entries[i].ID, err)
		}
	}
	e.wantStats("src", 1, 1, 2) // release visible, extend in flight, nack and snooze delayed
	e.wantStats("dlq", 1, 0, 0)
	if d := e.receiveOne("src"); d.Body != "release" {
		t.Fatalf("received %q, want release", d.Body)
	}
	e.advance(10 * time.Second)
	if d := e.receiveOne("src"); d.Body != "nack" || d.FailureReason != "r" {
		t.Fatalf("received %q (reason %q), want nack (reason r)", d.Body, d.FailureReason)
	}
	e.advance(10 * time.Second)
	if d := e.receiveOne("src"); d.Body != "snooze" || d.Attempts != 1 {
		t.Fatalf("received %q (attempts %d), want snooze (attempts 1)", d.Body, d.Attempts)
	}
}

// testChangeLeasesRanges: the front refuses out-of-range times per entry.
func testChangeLeasesRanges(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.sendBody("q", "a")
	d := e.receiveOne("q")
	over := model.MaxVisibilityTimeout + time.Second
	for _, le := range []model.LeaseEntry{
		{Receipt: d.Receipt, Kind: model.Snooze, Timeout: over},
		{Receipt: d.Receipt, Kind: model.Nack, Delay: dur(over)},
		{Receipt: d.Receipt, Kind: model.Nack, Delay: dur(-time.Second)},
		{Receipt: d.Receipt, Kind: model.ChangeTimeout, Timeout: over},
	} {
		wantErr(t, "an out-of-range consumer control", e.changeLease("q", le), model.ErrInvalidParameterValue)
	}
	e.wantStats("q", 0, 1, 0)
}
