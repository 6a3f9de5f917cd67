package plan

import (
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// The claim limits: how many messages one receive may lease now, under the
// front's in-flight cap (SQS's) and the queue's own limits, MaxInFlight and
// MaxReceivesPerSecond (model/config_limits.go). A backend runs ClaimRoom
// inside its claim's atomic step, with the in-flight count and the rate's
// stored instant as it reads them there (under its lock, or with the
// queue's limits row locked in the claim's transaction), and stores
// RateTaken's instant with the claim: so the limits hold across every
// consumer and, on PostgreSQL, every broker.

// ClaimFacts is what a backend knows of a queue when a receive claims.
type ClaimFacts struct {
	// Max is how many messages the receive asks for (ReceivePlan.Max).
	Max int
	// InFlight is how many of the queue's messages are leased now.
	InFlight int64
	// Cap is the front's in-flight cap (ReceiveRequest.InFlightCap; <= 0:
	// none).
	Cap int64
	// RateAt is the queue's stored rate instant (RateTaken; zero: none
	// yet), and Now the claim's instant.
	RateAt, Now time.Time
}

// Room is ClaimRoom's answer.
type Room struct {
	// N is how many messages the receive may lease now; 0: it takes none
	// and waits, within its wait time, as on an empty queue.
	N int
	// Next, when N is 0 because of MaxReceivesPerSecond, is when the rate
	// lets the next message go: a waiting receive looks again then (zero
	// otherwise: room comes back with a delete, a nack or a lease's end,
	// which wake the waiting receives).
	Next time.Time
}

// ClaimRoom is how many messages a receive may lease now on queue name
// (settings c), given f:
//   - the front's cap (SQS's): a standard queue at it fails with
//     ErrOverLimit; a FIFO queue at it gets 0, as in SQS;
//   - the queue's MaxInFlight: at most MaxInFlight - InFlight (0 at or past
//     it: the receive waits, on standard and FIFO queues alike);
//   - the queue's MaxReceivesPerSecond: what RateRoom allows now.
func ClaimRoom(c model.QueueConfig, name string, f ClaimFacts) (Room, error) {
	room := int64(max(f.Max, 0))
	if f.Cap > 0 {
		left := f.Cap - f.InFlight
		if left <= 0 {
			if c.Fifo {
				return Room{}, nil
			}
			return Room{}, model.Errorf(model.ErrOverLimit, "Too many messages in flight on queue %s (the limit is %d).", name, f.Cap)
		}
		room = min(room, left)
	}
	if c.MaxInFlight > 0 {
		room = min(room, max(c.MaxInFlight-f.InFlight, 0))
	}
	if room == 0 {
		return Room{}, nil
	}
	if c.ReceiveRate > 0 {
		n, _, next := RateRoom(f.RateAt, c.ReceiveRate, f.Now, int(room))
		if n == 0 {
			return Room{Next: next}, nil
		}
		room = int64(n)
	}
	return Room{N: int(room)}, nil
}

// RateTaken is the queue's rate instant to store after a claim at now
// leased k messages (k <= the Room's N), given the instant it read
// (rateAt): unchanged when the queue has no MaxReceivesPerSecond or k is 0.
func RateTaken(c model.QueueConfig, rateAt, now time.Time, k int) time.Time {
	if c.ReceiveRate <= 0 || k <= 0 {
		return rateAt
	}
	base, _, t := rateBase(rateAt, c.ReceiveRate, now)
	return base.Add(time.Duration(k) * t)
}

// RateRoom is the rate rule, a generic cell rate algorithm (GCRA): the
// queue keeps one instant, its theoretical arrival time tat, which each
// message handed out moves on by the rate's interval T (from now, when tat
// is past); a message may go at now while tat - now stays within the burst
// tolerance (B-1)*T, B being one second's worth of messages (at least one).
// So an idle queue hands out a burst of B at once, then one every T.
//
// Given the stored instant rateAt (zero: none), the rate r, now and how
// many messages are wanted, it answers how many may go now (n <= want),
// the instant to store if those n go (after), and when the next message
// may go (next: now when n > 0). A stored instant further ahead than a
// second's worth at r (r was raised) counts as a second's worth, so that a
// new rate applies from the next receive on.
func RateRoom(rateAt time.Time, r model.Rate, now time.Time, want int) (n int, after, next time.Time) {
	base, burst, t := rateBase(rateAt, r, now)
	// The k-th message (k from 1) may go when base + (k-1)*T - now <=
	// (B-1)*T, so n = floor((now + B*T - base) / T).
	free := now.Add(time.Duration(burst) * t).Sub(base)
	n = int(min(int64(free/t), int64(max(want, 0))))
	if n > 0 {
		return n, base.Add(time.Duration(n) * t), now
	}
	return 0, base, base.Add(-time.Duration(burst-1) * t)
}

// rateBase is where the next message's interval starts: the stored instant
// or now, whichever is later, but no later than a burst ahead of now; with
// the burst B and the interval T of rate r.
func rateBase(rateAt time.Time, r model.Rate, now time.Time) (base time.Time, burst int64, t time.Duration) {
	t, burst = r.Interval(), r.Burst()
	base = now
	if rateAt.After(now) {
		base = rateAt
	}
	if limit := now.Add(time.Duration(burst) * t); base.After(limit) {
		base = limit
	}
	return base, burst, t
}
