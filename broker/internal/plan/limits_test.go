package plan

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

func TestClaimRoom(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		fifo          bool
		maxInFlight   int64
		max           int
		inFlight, cap int64
		want          int
		wantErr       bool
	}{
		{name: "no cap", max: 10, inFlight: 1 << 40, cap: 0, want: 10},
		{name: "negative cap is no cap", max: 10, inFlight: 1 << 40, cap: -1, want: 10},
		{name: "no cap FIFO", fifo: true, max: 7, inFlight: 5, cap: 0, want: 7},
		{name: "room above max", max: 10, inFlight: 0, cap: 100, want: 10},
		{name: "room equal to max", max: 10, inFlight: 90, cap: 100, want: 10},
		{name: "room below max", max: 10, inFlight: 95, cap: 100, want: 5},
		{name: "room of one", max: 10, inFlight: 99, cap: 100, want: 1},
		{name: "room below max FIFO", fifo: true, max: 10, inFlight: 97, cap: 100, want: 3},
		{name: "huge cap", max: 10, inFlight: 0, cap: 1 << 62, want: 10},
		{name: "standard at cap", max: 10, inFlight: 100, cap: 100, wantErr: true},
		{name: "standard past cap", max: 1, inFlight: 150, cap: 100, wantErr: true},
		{name: "FIFO at cap", fifo: true, max: 10, inFlight: 100, cap: 100, want: 0},
		{name: "FIFO past cap", fifo: true, max: 10, inFlight: 150, cap: 100, want: 0},
		// The queue's MaxInFlight: room up to it, then 0 (no error), on
		// standard and FIFO queues alike.
		{name: "queue cap room", maxInFlight: 5, max: 10, inFlight: 2, cap: 100, want: 3},
		{name: "queue cap above max", maxInFlight: 50, max: 10, inFlight: 2, cap: 100, want: 10},
		{name: "queue cap without the front's", maxInFlight: 5, max: 10, inFlight: 4, want: 1},
		{name: "at the queue cap", maxInFlight: 5, max: 10, inFlight: 5, cap: 100, want: 0},
		{name: "past the queue cap", maxInFlight: 5, max: 10, inFlight: 7, cap: 100, want: 0},
		{name: "at the queue cap FIFO", fifo: true, maxInFlight: 5, max: 10, inFlight: 5, cap: 100, want: 0},
		{name: "queue cap tighter than the front's", maxInFlight: 3, max: 10, inFlight: 1, cap: 2, want: 1},
		{name: "the front's cap wins at both", maxInFlight: 3, max: 10, inFlight: 3, cap: 3, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := model.DefaultQueueConfig(tc.fifo)
			c.MaxInFlight = tc.maxInFlight
			got, err := ClaimRoom(c, "q1", ClaimFacts{Max: tc.max, InFlight: tc.inFlight, Cap: tc.cap})
			if tc.wantErr {
				if got.N != 0 || !errors.Is(err, model.ErrOverLimit) {
					t.Fatalf("ClaimRoom = %+v, %v; want 0 and ErrOverLimit", got, err)
				}
				if msg := model.ErrorMessage(err); !strings.Contains(msg, "q1") || !strings.Contains(msg, "the limit is") {
					t.Errorf("message %q names neither the queue nor the cap", msg)
				}
				return
			}
			if got.N != tc.want || !got.Next.IsZero() || err != nil {
				t.Errorf("ClaimRoom = %+v, %v; want %d, no Next, nil", got, err, tc.want)
			}
		})
	}
}

// TestRateRoom: a burst of one second's worth from idle, then one message
// per interval; the instant moves by the messages taken; a stored instant
// in the past is idle; the next message's time when none may go.
func TestRateRoom(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	rate := func(s string) model.Rate {
		r, err := model.ParseRate(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r20, rHalf := rate("20"), rate("0.5")
	ms := time.Millisecond

	// Idle (no instant, or one long past): the whole burst.
	for _, at := range []time.Time{{}, now.Add(-time.Hour)} {
		n, after, next := RateRoom(at, r20, now, 100)
		if n != 20 || !after.Equal(now.Add(time.Second)) || !next.Equal(now) {
			t.Errorf("idle from %v: %d, %v, %v; want 20, now+1s, now", at, n, after.Sub(now), next.Sub(now))
		}
	}
	// Fewer wanted than allowed: the instant moves by those only.
	n, after, _ := RateRoom(time.Time{}, r20, now, 3)
	if n != 3 || !after.Equal(now.Add(150*ms)) {
		t.Errorf("3 of 20: %d, %v; want 3, now+150ms", n, after.Sub(now))
	}
	// After the burst: nothing now, the next one at now + 50 ms.
	n, after, next := RateRoom(now.Add(time.Second), r20, now, 10)
	if n != 0 || !after.Equal(now.Add(time.Second)) || !next.Equal(now.Add(50*ms)) {
		t.Errorf("after the burst: %d, %v, %v; want 0, unchanged, now+50ms", n, after.Sub(now), next.Sub(now))
	}
	// At that instant, one; 120 ms later, two more (and a 10 ms remainder).
	n, after, _ = RateRoom(now.Add(time.Second), r20, now.Add(50*ms), 10)
	if n != 1 || !after.Equal(now.Add(1050*ms)) {
		t.Errorf("one interval on: %d, %v; want 1, now+1.05s", n, after.Sub(now))
	}
	n, _, _ = RateRoom(now.Add(1050*ms), r20, now.Add(170*ms), 10)
	if n != 2 {
		t.Errorf("two intervals and a bit on: %d, want 2", n)
	}
	// 0.5 a second: a burst of one, then one every 2 s.
	n, after, _ = RateRoom(time.Time{}, rHalf, now, 10)
	if n != 1 || !after.Equal(now.Add(2*time.Second)) {
		t.Errorf("0.5/s idle: %d, %v; want 1, now+2s", n, after.Sub(now))
	}
	n, _, next = RateRoom(after, rHalf, now.Add(time.Second), 10)
	if n != 0 || !next.Equal(now.Add(2*time.Second)) {
		t.Errorf("0.5/s 1 s later: %d, next %v; want 0, now+2s", n, next.Sub(now))
	}
	// A stored instant far ahead (the rate was 0.5 and is now 20) counts as
	// one second's worth: the next message goes within one interval.
	n, _, next = RateRoom(now.Add(time.Hour), r20, now, 10)
	if n != 0 || !next.Equal(now.Add(50*ms)) {
		t.Errorf("raised rate: %d, next %v; want 0, now+50ms", n, next.Sub(now))
	}
	// Want 0: nothing, the instant unchanged.
	if n, after, _ := RateRoom(time.Time{}, r20, now, 0); n != 0 || !after.Equal(now) {
		t.Errorf("want 0: %d, %v", n, after)
	}
}

// TestRateThroughClaimRoom: ClaimRoom takes the least of the caps and the
// rate, reports when the rate lets the next message go, and RateTaken
// stores the instant for what was leased.
func TestRateThroughClaimRoom(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	c := model.DefaultQueueConfig(false)
	c.ReceiveRate, _ = model.ParseRate("2")
	c.MaxInFlight = 100

	room, err := ClaimRoom(c, "q", ClaimFacts{Max: 10, Now: now})
	if err != nil || room.N != 2 {
		t.Fatalf("idle: %+v, %v; want 2", room, err)
	}
	at := RateTaken(c, time.Time{}, now, 1) // one of the two was there
	if !at.Equal(now.Add(500 * time.Millisecond)) {
		t.Fatalf("RateTaken(1) = now+%v, want now+500ms", at.Sub(now))
	}
	at = RateTaken(c, at, now, 1)
	room, err = ClaimRoom(c, "q", ClaimFacts{Max: 10, RateAt: at, Now: now})
	if err != nil || room.N != 0 || !room.Next.Equal(now.Add(500*time.Millisecond)) {
		t.Fatalf("after the burst: %+v, %v; want 0, next now+500ms", room, err)
	}
	// The in-flight cap leaves less than the rate: the cap's room, and no
	// Next (it is not the rate that waits).
	room, _ = ClaimRoom(c, "q", ClaimFacts{Max: 10, InFlight: 99, Now: now})
	if room.N != 1 {
		t.Fatalf("1 below the cap: %+v, want 1", room)
	}
	room, _ = ClaimRoom(c, "q", ClaimFacts{Max: 10, InFlight: 100, RateAt: at, Now: now})
	if room.N != 0 || !room.Next.IsZero() {
		t.Fatalf("at the cap: %+v, want 0 and no Next", room)
	}
	// No rate: RateTaken keeps the instant.
	c.ReceiveRate = 0
	if got := RateTaken(c, at, now, 5); !got.Equal(at) {
		t.Fatalf("RateTaken without a rate moved the instant to %v", got)
	}
}
