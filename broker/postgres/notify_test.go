package postgres

import (
	"testing"
	"time"
)

// TestPassOnReachesAnAttemptingWaiter: a send that made one message ready
// signalled the only sleeping receive (W1) and not W2, which was attempting
// (its look may have run before the send's commit). When W1 ends before it
// looks, its wake-up must reach W2: with no other sleeping waiter to take
// it, W2 would sleep until its poll interval while the message waits.
func TestPassOnReachesAnAttemptingWaiter(t *testing.T) {
	var ws waiters
	ws.init()
	const qid = 7
	w1, w2 := ws.add(qid), ws.add(qid)
	ws.arm(w1, time.Now().Add(time.Second)) // sleeping
	ws.arm(w2, time.Time{})                 // attempting
	ws.wakeSome(qid, 1)
	if len(w1.ch) != 1 || len(w2.ch) != 0 {
		t.Fatalf("wakeSome(1): w1 signalled %d, w2 %d; want the sleeping one only", len(w1.ch), len(w2.ch))
	}
	<-w1.ch // W1 takes the wake-up, then ends before it looks
	ws.remove(qid, w1)
	ws.passOn(qid)
	if len(w2.ch) != 1 {
		t.Fatal("the wake-up W1 passed on reached no one: W2, attempting, was not signalled")
	}

	// With a sleeping waiter not yet signalled, that one gets it (and only it).
	w3 := ws.add(qid)
	ws.arm(w3, time.Now().Add(time.Second))
	<-w2.ch
	ws.passOn(qid)
	if len(w3.ch) != 1 || len(w2.ch) != 0 {
		t.Fatalf("passOn with a sleeping waiter: w3 signalled %d, w2 %d; want w3 only", len(w3.ch), len(w2.ch))
	}
}
