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
	w1, w2 := ws.add(qid, 1), ws.add(qid, 1)
	ws.arm(w1, time.Now().Add(time.Second)) // sleeping
	ws.arm(w2, time.Time{})                 // attempting
	ws.wakeSome(qid, 1)
	if len(w1.ch) != 1 || len(w2.ch) != 0 {
		t.Fatalf("wakeSome(1): w1 signalled %d, w2 %d; want the sleeping one only", len(w1.ch), len(w2.ch))
	}
	<-w1.ch // W1 takes the wake-up, then ends before it looks
	ws.remove(qid, w1)
	ws.passOn(qid, 1)
	if len(w2.ch) != 1 {
		t.Fatal("the wake-up W1 passed on reached no one: W2, attempting, was not signalled")
	}

	// With a sleeping waiter not yet signalled, that one gets it (and only it).
	w3 := ws.add(qid, 1)
	ws.arm(w3, time.Now().Add(time.Second))
	<-w2.ch
	ws.passOn(qid, 1)
	if len(w3.ch) != 1 || len(w2.ch) != 0 {
		t.Fatalf("passOn with a sleeping waiter: w3 signalled %d, w2 %d; want w3 only", len(w3.ch), len(w2.ch))
	}
}

// TestWakeSomeCountsMaxMessages: a commit that made n messages ready wakes
// sleeping receives until their MaxMessages cover n: one receive of up to
// 10 for 10 messages (waking one per message made the others look and
// find nothing), two for 15; and, when the sleeping ones cannot cover n,
// the attempting ones too.
func TestWakeSomeCountsMaxMessages(t *testing.T) {
	var ws waiters
	ws.init()
	const qid = 7
	sleep := time.Now().Add(time.Second)
	w1, w2 := ws.add(qid, 10), ws.add(qid, 10)
	busy := ws.add(qid, 10)
	ws.arm(w1, sleep)
	ws.arm(w2, sleep)
	ws.arm(busy, time.Time{}) // attempting
	signalled := func() (n int) {
		for _, w := range []*waiter{w1, w2} {
			select {
			case <-w.ch:
				n++
			default:
			}
		}
		return n
	}
	for _, c := range []struct{ ready, want int }{{1, 1}, {10, 1}, {15, 2}, {20, 2}} {
		ws.wakeSome(qid, c.ready)
		if got := signalled(); got != c.want || len(busy.ch) != 0 {
			t.Errorf("wakeSome(%d) signalled %d sleeping receives and %d attempting, want %d and 0", c.ready, got, len(busy.ch), c.want)
		}
	}
	ws.wakeSome(qid, 25)
	if got := signalled(); got != 2 || len(busy.ch) != 1 {
		t.Errorf("wakeSome(25) for sleeping receives of 20 in all: signalled %d sleeping and %d attempting, want 2 and 1", got, len(busy.ch))
	}
}

// TestPassOnCoversTheEndingReceivesMax: a receive of up to 10, woken alone
// for 10 ready messages, that ends before it looks passes its wake-up on to
// receives that can take 10 together, not to one receive of 1; a receive
// woken for one message passes on one.
func TestPassOnCoversTheEndingReceivesMax(t *testing.T) {
	for _, c := range []struct{ ready, want int }{{10, 10}, {1, 1}} {
		var ws waiters
		ws.init()
		const qid = 7
		big := ws.add(qid, 10)
		ws.arm(big, time.Now().Add(time.Second))
		var small []*waiter
		for range 10 {
			small = append(small, ws.add(qid, 1)) // attempting: not woken while big covers the send
		}
		ws.wakeSome(qid, c.ready)
		if len(big.ch) != 1 {
			t.Fatalf("a send of %d did not wake the sleeping receive of 10", c.ready)
		}
		for _, w := range small {
			if len(w.ch) != 0 {
				t.Fatalf("a send of %d that the receive of 10 covers woke a receive of 1", c.ready)
			}
			ws.arm(w, time.Now().Add(time.Second)) // now asleep
		}
		<-big.ch // it ends before it looks
		ws.remove(qid, big)
		ws.passOn(qid, ws.shareOf(big))
		n := 0
		for _, w := range small {
			n += len(w.ch)
		}
		if n != c.want {
			t.Fatalf("for the %d messages a receive of 10 left, passOn woke %d receives of 1, want %d", c.ready, n, c.want)
		}
	}
}
