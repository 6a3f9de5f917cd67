package brokertest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// FIFO dedup window and sequence numbers (listed in fifo.go).

// wantDuplicate checks that a send answered as a duplicate of orig.
func wantDuplicate(t testing.TB, what string, got, orig model.SendResult) {
	t.Helper()
	if got.MessageID != orig.MessageID || got.SequenceNumber != orig.SequenceNumber {
		t.Fatalf("%s: answered %s seq %s, want the original %s seq %s",
			what, got.MessageID, got.SequenceNumber, orig.MessageID, orig.SequenceNumber)
	}
}

func wantNew(t testing.TB, what string, got, orig model.SendResult) {
	t.Helper()
	if got.MessageID == orig.MessageID {
		t.Fatalf("%s: answered the message id of the earlier send %s, want a new message", what, orig.MessageID)
	}
}

func testFifoDedupWindow(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", nil)
	orig := e.fsend("q.fifo", "g", "d", "first")
	e.advance(model.DedupWindow - time.Second)
	wantDuplicate(t, "same dedup id 4:59 later", e.fsend("q.fifo", "g", "d", "second"), orig)
	e.wantStats("q.fifo", 1, 0, 0)
	e.advance(time.Second) // the window counts from the first send, not the duplicate
	later := e.fsend("q.fifo", "g", "d", "third")
	wantNew(t, "same dedup id 5:00 later", later, orig)
	e.wantStats("q.fifo", 2, 0, 0)
	wantBodies(t, "receive", e.receiveMax("q.fifo", 10, 0), "first", "third")
}

func testFifoDedupAfterDelete(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", nil)
	orig := e.fsend("q.fifo", "g", "d", "x")
	d := e.receiveMax("q.fifo", 1, 0)[0]
	e.mustDelete("q.fifo", d.Receipt)
	wantDuplicate(t, "resend after delete", e.fsend("q.fifo", "g", "d", "x"), orig)
	e.receiveNone("q.fifo")
	e.wantStats("q.fifo", 0, 0, 0)
}

func testFifoDedupInBatch(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", nil)
	res := e.send("q.fifo", fmsg("g", "d", "a"), fmsg("g", "d", "b"), fmsg("g", "other", "c"))
	wantDuplicate(t, "second entry of the batch", res[1], res[0])
	wantNew(t, "third entry", res[2], res[0])
	wantBodies(t, "receive", e.receiveMax("q.fifo", 10, 0), "a", "c")
}

func testFifoDedupScopeQueue(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", nil) // DeduplicationScope defaults to queue
	orig := e.fsend("q.fifo", "g1", "d", "a")
	wantDuplicate(t, "same dedup id in another group (scope queue)", e.fsend("q.fifo", "g2", "d", "b"), orig)
	e.wantStats("q.fifo", 1, 0, 0)
}

func testFifoDedupScopeGroup(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", map[string]string{
		model.AttrDeduplicationScope:  string(model.DedupScopeMessageGroup),
		model.AttrFifoThroughputLimit: string(model.ThroughputPerMessageGroupID),
	})
	a := e.fsend("q.fifo", "g1", "d", "a")
	b := e.fsend("q.fifo", "g2", "d", "b")
	wantNew(t, "same dedup id in another group (scope messageGroup)", b, a)
	wantDuplicate(t, "same dedup id in the same group", e.fsend("q.fifo", "g1", "d", "c"), a)
	e.wantStats("q.fifo", 2, 0, 0)
}

func testFifoContentBasedDedup(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", map[string]string{model.AttrContentBasedDeduplication: "true"})
	orig := e.fsend("q.fifo", "g", "", "body")
	// Attributes do not count: only the body.
	dup := e.send("q.fifo", model.SendEntry{GroupID: "g", Body: "body",
		Attributes: map[string]model.MessageAttribute{"k": {DataType: "String", StringValue: "v"}}})[0]
	wantDuplicate(t, "same body", dup, orig)
	wantNew(t, "other body", e.fsend("q.fifo", "g", "", "other"), orig)
	wantNew(t, "same body with an explicit dedup id", e.fsend("q.fifo", "g", "explicit", "body"), orig)
	ds := e.receiveMax("q.fifo", 10, 0)
	wantBodies(t, "receive", ds, "body", "other", "body")
	sum := sha256.Sum256([]byte("body"))
	if want := hex.EncodeToString(sum[:]); ds[0].DedupID != want {
		t.Fatalf("content-based DedupID = %q, want the SHA-256 hex of the body %s", ds[0].DedupID, want)
	}
	if ds[2].DedupID != "explicit" {
		t.Fatalf("explicit DedupID = %q", ds[2].DedupID)
	}
}

func testFifoPurgeClearsDedup(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", nil)
	orig := e.fsend("q.fifo", "g", "d", "a")
	if err := e.b.PurgeQueue(e.ctx, "q.fifo"); err != nil {
		t.Fatal(err)
	}
	wantNew(t, "same dedup id after a purge", e.fsend("q.fifo", "g", "d", "b"), orig)
	wantBodies(t, "receive", e.receiveMax("q.fifo", 10, 0), "b")
}

func testFifoDedupRestart(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	e.fifoQueue("q.fifo", nil)
	orig := e.fsend("q.fifo", "g", "d", "a")
	d := e.receiveMax("q.fifo", 1, 0)[0]
	e.mustDelete("q.fifo", d.Receipt)
	e.advance(time.Minute)
	e.reopen()
	wantDuplicate(t, "same dedup id after a restart inside the window", e.fsend("q.fifo", "g", "d", "b"), orig)
	e.receiveNone("q.fifo")
	e.advance(4 * time.Minute)
	e.reopen()
	wantNew(t, "same dedup id after a restart past the window", e.fsend("q.fifo", "g", "d", "c"), orig)
}

// seqLess compares decimal sequence numbers numerically.
func seqLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

func wantSeq(t testing.TB, what, seq string) {
	t.Helper()
	if seq == "" {
		t.Fatalf("%s: no SequenceNumber", what)
	}
	for _, c := range seq {
		if c < '0' || c > '9' {
			t.Fatalf("%s: SequenceNumber %q is not a decimal string", what, seq)
		}
	}
}

func testFifoSequenceNumbers(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", nil)
	e.createQueue("std", nil)
	if r := e.sendBody("std", "x"); r.SequenceNumber != "" {
		t.Fatalf("standard queue send has SequenceNumber %q", r.SequenceNumber)
	}
	var sent []model.SendResult
	for i := range 3 {
		sent = append(sent, e.fsend("q.fifo", "g", fmt.Sprint(i), fmt.Sprint(i)))
	}
	sent = append(sent, e.send("q.fifo", fmsg("h", "a", "3"), fmsg("g", "b", "4"))...)
	for i, r := range sent {
		wantSeq(t, fmt.Sprintf("send %d", i), r.SequenceNumber)
		if i > 0 && !seqLess(sent[i-1].SequenceNumber, r.SequenceNumber) {
			t.Fatalf("send %d: SequenceNumber %s not above the previous %s", i, r.SequenceNumber, sent[i-1].SequenceNumber)
		}
	}
	bySeq := map[string]string{}
	for _, r := range sent {
		bySeq[r.MessageID] = r.SequenceNumber
	}
	for _, d := range e.receiveMax("q.fifo", 10, 0) {
		if d.SequenceNumber != bySeq[d.ID] {
			t.Fatalf("received %s with SequenceNumber %q, its send answered %q", d.Body, d.SequenceNumber, bySeq[d.ID])
		}
	}
}

func testFifoSequenceRestart(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	e.fifoQueue("q.fifo", nil)
	last := e.fsend("q.fifo", "g", "1", "a").SequenceNumber
	d := e.receiveMax("q.fifo", 1, 0)[0]
	e.mustDelete("q.fifo", d.Receipt) // the queue is empty: nothing left to number from
	for i := range 2 {
		e.reopen()
		next := e.fsend("q.fifo", "g", fmt.Sprint("r", i), "b").SequenceNumber
		wantSeq(t, "after restart", next)
		if !seqLess(last, next) {
			t.Fatalf("restart %d: SequenceNumber %s not above %s from before the restart", i, next, last)
		}
		last = next
	}
}
