package brokertest

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
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
	wantErr(t, "a second nack with the same receipt", e.changeLease("q", broker.LeaseEntry{Receipt: d.Receipt, Kind: broker.Nack}), broker.ErrInvalidParameterValue)
	e.advance(19 * time.Second)
	e.receiveNone("q")
	e.advance(time.Second)
	d = e.receiveOne("q")
	wantCounts(t, "after a nack", d, 2, 2)
	if d.FailureReason != "db down" {
		t.Fatalf("FailureReason = %q, want %q", d.FailureReason, "db down")
	}
	long := strings.Repeat("é", broker.MaxReasonBytes) // 2 bytes each
	e.nack("q", d.Receipt, long, nil)
	d = e.receiveOne("q")
	if d.FailureReason != broker.CutReason(long) || len(d.FailureReason) != broker.MaxReasonBytes {
		t.Fatalf("a %d-byte reason is kept as %d bytes, want it cut to %d", len(long), len(d.FailureReason), broker.MaxReasonBytes)
	}
}

// testSnoozeNeverDeadLetters: a snooze gives the attempt back, so even at
// maxReceiveCount 1 the message comes back instead of moving.
func testSnoozeNeverDeadLetters(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("src", map[string]string{broker.AttrRedrivePolicy: redrivePolicy("dlq", 1)})
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
	e.createQueue("q", map[string]string{broker.AttrRetryPolicy: retryPolicy(60, 300, broker.JitterNone)})
	e.sendBody("q", "a")
	d := e.receiveOne("q")
	e.snooze("q", d.Receipt, 0)
	e.wantStats("q", 1, 0, 0)
	// The lease ended with the message visible (FateVisible): its receipt
	// no longer changes visibility, whichever of the two answers it gets.
	wantErrOneOf(t, "a release with a released receipt", e.changeLease("q", broker.LeaseEntry{Receipt: d.Receipt, Kind: broker.Snooze}),
		broker.ErrInvalidParameterValue, broker.ErrMessageNotInflight)
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
	e.createQueue("src", map[string]string{broker.AttrRedrivePolicy: redrivePolicy("dlq", 10)})
	res := e.sendBody("src", "a")
	e.advance(time.Second)
	t1 := e.clock.Now()
	d := e.receiveOne("src")
	e.advance(time.Second)
	e.mustChangeLease("src", broker.LeaseEntry{Receipt: d.Receipt, Kind: broker.DeadLetterNow, Reason: "cannot parse"})
	e.wantStats("src", 0, 0, 0)
	e.wantStats("dlq", 1, 0, 0)
	wantForensics(t, e.browsed("dlq", res.MessageID), 1, 1, t1, t1, "cannot parse", "src")
	wantErr(t, "dead-letter now with the receipt of a dead letter",
		e.changeLease("src", broker.LeaseEntry{Receipt: d.Receipt, Kind: broker.DeadLetterNow}), broker.ErrInvalidParameterValue)
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
		e.changeLease("q", broker.LeaseEntry{Receipt: d.Receipt, Kind: broker.DeadLetterNow, Reason: "x"}), broker.ErrConflict)
	e.wantStats("q", 0, 1, 0)
	e.mustDelete("q", d.Receipt)
	e.wantStats("q", 0, 0, 0)
}

// testExtend: ChangeTimeout > 0 extends the lease from now; the receipt
// stays good.
func testExtend(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{broker.AttrVisibilityTimeout: "10"})
	e.sendBody("q", "a")
	d := e.receiveOne("q")
	e.advance(9 * time.Second)
	e.mustChangeLease("q", broker.LeaseEntry{Receipt: d.Receipt, Kind: broker.ChangeTimeout, Timeout: 50 * time.Second})
	e.advance(49 * time.Second)
	e.receiveNone("q")
	e.wantStats("q", 0, 1, 0)
	e.mustChangeLease("q", broker.LeaseEntry{Receipt: d.Receipt, Kind: broker.ChangeTimeout, Timeout: 10 * time.Second})
	e.advance(9 * time.Second)
	e.receiveNone("q")
	e.advance(time.Second)
	d2 := e.receiveOne("q")
	wantCounts(t, "after the extended lease ended", d2, 2, 2)
	wantErr(t, "extend with the receipt of the ended lease",
		e.changeLease("q", broker.LeaseEntry{Receipt: d.Receipt, Kind: broker.ChangeTimeout, Timeout: time.Second}), broker.ErrInvalidParameterValue)
}

// testChangeLeasesSameReceiptTwice: a batch that names one receipt twice
// changes the lease once: the first entry applies, the second finds the
// lease gone (its message visible again, or moved), and the counters count
// each message once.
func testChangeLeasesSameReceiptTwice(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("src", map[string]string{broker.AttrRedrivePolicy: redrivePolicy("dlq", 10)})
	e.send("src", broker.SendEntry{Body: "nack"}, broker.SendEntry{Body: "dead"})
	ds := e.receiveN(broker.ReceiveRequest{Queue: "src"}, 2)
	by := map[string]broker.Delivery{}
	for _, d := range ds {
		by[d.Body] = d
	}
	errs, err := e.b.ChangeLeases(e.ctx, "src", []broker.LeaseEntry{
		{ID: "n1", Receipt: by["nack"].Receipt, Kind: broker.Nack},
		{ID: "d1", Receipt: by["dead"].Receipt, Kind: broker.DeadLetterNow, Reason: "poison"},
		{ID: "n2", Receipt: by["nack"].Receipt, Kind: broker.Nack},
		{ID: "d2", Receipt: by["dead"].Receipt, Kind: broker.DeadLetterNow, Reason: "poison"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("the first entries of each receipt: %v, %v; want both applied", errs[0], errs[1])
	}
	wantErrOneOf(t, "the second nack with the same receipt", errs[2], broker.ErrMessageNotInflight, broker.ErrInvalidParameterValue)
	wantErrOneOf(t, "the second dead-letter-now with the same receipt", errs[3], broker.ErrMessageNotInflight, broker.ErrInvalidParameterValue)
	e.wantStats("src", 1, 0, 0)
	e.wantStats("dlq", 1, 0, 0)
	d := e.receiveOne("src")
	errs, err = e.b.ChangeVisibility(e.ctx, "src", []broker.VisibilityEntry{
		{ID: "a", Receipt: d.Receipt, Timeout: 0}, {ID: "b", Receipt: d.Receipt, Timeout: 0}})
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil {
		t.Fatalf("the first ChangeMessageVisibility entry: %v", errs[0])
	}
	wantErrOneOf(t, "the second ChangeMessageVisibility entry with the same receipt", errs[1], broker.ErrMessageNotInflight, broker.ErrInvalidParameterValue)
	e.wantStats("src", 1, 0, 0)
}

// testChangeLeasesBatch: one call with every kind, each entry answered on
// its own; a bad receipt fails only its entry.
func testChangeLeasesBatch(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("src", map[string]string{
		broker.AttrVisibilityTimeout: "30",
		broker.AttrRedrivePolicy:     redrivePolicy("dlq", 10),
	})
	e.send("src", broker.SendEntry{Body: "nack"}, broker.SendEntry{Body: "snooze"}, broker.SendEntry{Body: "dead"},
		broker.SendEntry{Body: "extend"}, broker.SendEntry{Body: "release"})
	ds := e.receiveN(broker.ReceiveRequest{Queue: "src"}, 5)
	by := map[string]broker.Delivery{}
	for _, d := range ds {
		by[d.Body] = d
	}
	entries := []broker.LeaseEntry{
		{ID: "n", Receipt: by["nack"].Receipt, Kind: broker.Nack, Reason: "r", Delay: dur(10 * time.Second)},
		{ID: "s", Receipt: by["snooze"].Receipt, Kind: broker.Snooze, Timeout: 20 * time.Second},
		{ID: "d", Receipt: by["dead"].Receipt, Kind: broker.DeadLetterNow, Reason: "poison"},
		{ID: "x", Receipt: "garbage", Kind: broker.Nack},
		{ID: "e", Receipt: by["extend"].Receipt, Kind: broker.ChangeTimeout, Timeout: time.Hour},
		{ID: "r", Receipt: by["release"].Receipt, Kind: broker.Snooze},
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
			wantErr(t, "the garbage receipt's entry", err, broker.ErrReceiptHandleInvalid)
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
	over := broker.MaxVisibilityTimeout + time.Second
	for _, le := range []broker.LeaseEntry{
		{Receipt: d.Receipt, Kind: broker.Snooze, Timeout: over},
		{Receipt: d.Receipt, Kind: broker.Nack, Delay: dur(over)},
		{Receipt: d.Receipt, Kind: broker.Nack, Delay: dur(-time.Second)},
		{Receipt: d.Receipt, Kind: broker.ChangeTimeout, Timeout: over},
	} {
		wantErr(t, "an out-of-range consumer control", e.changeLease("q", le), broker.ErrInvalidParameterValue)
	}
	e.wantStats("q", 0, 1, 0)
}
