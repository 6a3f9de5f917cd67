package plan

import (
	"hash/fnv"
	"math/bits"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// Attempts, retries and the dead-letter rule, as pure planners that each
// backend applies inside its own atomic step (see Backend).
//
// A message keeps two counts. ReceiveCount is SQS's ApproximateReceiveCount:
// every delivery adds one. Attempts is Sluice's: a delivery adds one and a
// snooze takes it back, so without snoozes the two are equal. The dead-letter
// rule (maxReceiveCount, Sluice.MaxAttempts), the backoff's n and the native
// envelope's attempts all use Attempts.
//
// A failure is a nack (ChangeMessageVisibility to 0, or the native nack) or
// an expired lease. After a failure a message either moves to its queue's
// dead-letter queue at once (it used its last attempt), or waits for the
// retry policy's backoff (counted from the nack or from the lease's end; it
// is "delayed" meanwhile, and its receipt is stale), or, with no retry
// policy, is visible again at once.

// Backoff is how long a message waits after its attempts-th attempt failed,
// under policy p: the scheduled delay d, jittered. d is
// min(Base * 2^(attempts-1), Max) in the exponential form, and
// Delays[attempts-1] in the schedule form (the last delay for every attempt
// past the list). The jitter is drawn from seed (JitterSeed), not from a
// global source, so that a backend can compute the same instant again
// (after a restart, or on another broker) without storing it, and tests are
// exact:
//
//	full   uniform in [0, d]
//	equal  d/2 + uniform in [0, d/2]
//	none   d
//	up     d + uniform in [0, d/2] (d times a factor in [1, 1.5])
func Backoff(p model.RetryPolicy, attempts int, seed uint64) time.Duration {
	d := scheduled(p, max(attempts, 1))
	switch p.Jitter {
	case model.JitterNone:
		return d
	case model.JitterEqual:
		half := d / 2
		return half + time.Duration(uniform(seed, uint64(d-half)+1))
	case model.JitterUp:
		return d + time.Duration(uniform(seed, uint64(d/2)+1))
	default: // full
		return time.Duration(uniform(seed, uint64(d)+1))
	}
}

// scheduled is policy p's delay after the n-th failed attempt (n >= 1),
// before the jitter.
func scheduled(p model.RetryPolicy, n int) time.Duration {
	if len(p.Delays) > 0 {
		return p.Delays[min(n, len(p.Delays))-1]
	}
	d := p.Base
	for i := 1; i < n && d < p.Max; i++ {
		d *= 2
	}
	return min(d, p.Max)
}

// JitterSeed is the seed of a message's backoff after a given attempt: the
// same message and attempt always draw the same jitter, different messages
// failing together spread out.
func JitterSeed(messageID string, attempts int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(messageID))
	var b [8]byte
	for i := range b {
		b[i] = byte(uint64(attempts) >> (8 * i))
	}
	h.Write(b[:])
	return h.Sum64()
}

// uniform maps seed to [0, n) (splitmix64, then a multiply-shift).
func uniform(seed, n uint64) uint64 {
	if n == 0 {
		return 0
	}
	z := seed + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	hi, _ := bits.Mul64(z, n)
	return hi
}

// LeaseFacts is what a backend knows of a leased message when it plans a
// change of its lease: its id and counts.
type LeaseFacts struct {
	MessageID string
	// Attempts is the message's attempts count (this lease's receive included).
	Attempts int
	// MaxAttempts is its own Sluice.MaxAttempts (0: the queue's).
	MaxAttempts int
	// ExpiresAt is when its time to live passes (zero: it has none).
	ExpiresAt time.Time
}

// LeaseFate is where a lease change or an expiry leaves a message.
type LeaseFate uint8

// The fates.
const (
	// FateInFlight: still leased, until At (the lease is extended or cut;
	// the receipt stays valid).
	FateInFlight LeaseFate = iota
	// FateVisible: visible again at once (At = now); the receipt is stale
	// for visibility changes, and a delete of it still works on a standard
	// queue as before (SQS's rule for an ended lease).
	FateVisible
	// FateDelayed: backing off or snoozed, visible at At; its receipt is
	// stale. On a FIFO queue it keeps holding its group.
	FateDelayed
	// FateDeadLetter: moves to the queue's dead-letter queue now, with
	// Reason.
	FateDeadLetter
	// FateExpired: its time to live has passed (model.Expired), so it
	// leaves the queue now instead of being visible or delayed again: to
	// the dead-letter queue with Reason (model.ReasonExpired) when the
	// queue's ExpiredMessageAction is dead-letter
	// (model.QueueConfig.ExpiredToDeadLetter) and that queue exists, else
	// it is dropped.
	FateExpired
)

// LeasePlan is the planned change of one leased message.
type LeasePlan struct {
	Fate LeaseFate
	// At is the lease end (FateInFlight) or when the message is visible
	// again (FateVisible, FateDelayed).
	At time.Time
	// Attempts is the message's new attempts count.
	Attempts int
	// Reason, when SetReason, replaces the message's failure reason.
	Reason    string
	SetReason bool
}

// LeaseChange plans one ChangeVisibility entry for a message whose lease
// the receipt names and which is still in flight, on a queue with settings c,
// at now. Kinds (VisibilityChange.Kind):
//   - ChangeTimeout with Timeout > 0 (SQS's ChangeMessageVisibility, the
//     native extend): the lease ends Timeout from now.
//   - ChangeTimeout with Timeout 0, or a Nack: a failure. With its attempts
//     used (MaxAttempts) it is dead-lettered; else it is visible again after
//     the explicit Delay (Nack only), or the retry policy's Backoff, or at
//     once. The reason (ReasonNack when none) is kept.
//   - Snooze: attempts - 1, visible after Delay (0: at once, a release).
//     Never dead-letters; keeps the reason.
//   - DeadLetterNow: dead-lettered with the reason, whatever its attempts.
//     The front has checked that the queue has a dead-letter queue.
//
// A message whose time to live has passed (m.ExpiresAt) may still be
// extended or dead-lettered now by its holder, as it may be deleted; any
// other change (a nack, a snooze, a release) expires it (FateExpired).
func LeaseChange(c model.QueueConfig, m LeaseFacts, ch model.VisibilityChange, now time.Time) LeasePlan {
	p := leaseChange(c, m, ch, now)
	if p.Fate != FateInFlight && ch.Kind != model.DeadLetterNow && model.Expired(m.ExpiresAt, now) {
		return expiredPlan(p.Attempts, now)
	}
	return p
}

func leaseChange(c model.QueueConfig, m LeaseFacts, ch model.VisibilityChange, now time.Time) LeasePlan {
	p := LeasePlan{Attempts: m.Attempts}
	switch ch.Kind {
	case model.DeadLetterNow:
		return LeasePlan{Fate: FateDeadLetter, At: now, Attempts: m.Attempts, Reason: reasonOr(ch.Reason, model.ReasonNack), SetReason: true}
	case model.Snooze:
		p.Attempts = max(m.Attempts-1, 0)
		return delayPlan(p, now, ch.Timeout)
	case model.ChangeTimeout:
		if ch.Timeout > 0 {
			p.Fate, p.At = FateInFlight, now.Add(ch.Timeout)
			return p
		}
	}
	// A failure: ChangeTimeout to 0, or a Nack.
	p.Reason, p.SetReason = reasonOr(ch.Reason, model.ReasonNack), true
	if limit := model.MaxAttempts(c.Redrive, m.MaxAttempts); limit > 0 && m.Attempts >= limit {
		p.Fate, p.At = FateDeadLetter, now
		return p
	}
	switch {
	case ch.Kind == model.Nack && ch.Delay != nil:
		return delayPlan(p, now, *ch.Delay)
	case c.Retry != nil:
		return delayPlan(p, now, Backoff(*c.Retry, m.Attempts, JitterSeed(m.MessageID, m.Attempts)))
	}
	p.Fate, p.At = FateVisible, now
	return p
}

// LeaseExpiry plans what happens to a message whose lease ended at
// expiredAt without a delete or a nack: it expires (FateExpired) if its
// time to live passed by then, else it is dead-lettered ("lease expired")
// if that was its last attempt, else it backs off from expiredAt under the
// retry policy, else it is visible from expiredAt. A backend may apply it
// late (when it next looks at the queue): the instants are computed from
// expiredAt, not from when the backend noticed (a time to live that passed
// after expiredAt is the backend's to apply to the visible or backing-off
// message then).
func LeaseExpiry(c model.QueueConfig, m LeaseFacts, expiredAt time.Time) LeasePlan {
	if model.Expired(m.ExpiresAt, expiredAt) {
		return expiredPlan(m.Attempts, expiredAt)
	}
	p := LeasePlan{Attempts: m.Attempts, Reason: model.ReasonLeaseExpired, SetReason: true}
	if limit := model.MaxAttempts(c.Redrive, m.MaxAttempts); limit > 0 && m.Attempts >= limit {
		p.Fate, p.At = FateDeadLetter, expiredAt
		return p
	}
	if c.Retry != nil {
		return delayPlan(p, expiredAt, Backoff(*c.Retry, m.Attempts, JitterSeed(m.MessageID, m.Attempts)))
	}
	p.Fate, p.At = FateVisible, expiredAt
	return p
}

// ExpiryVisibleAt is when a message whose lease ended at expiredAt without
// a delete is visible again, for a backend that computes it without storing
// it (LeaseExpiry's instant when its fate is not a dead letter).
func ExpiryVisibleAt(c model.QueueConfig, messageID string, attempts int, expiredAt time.Time) time.Time {
	if c.Retry == nil {
		return expiredAt
	}
	return expiredAt.Add(Backoff(*c.Retry, attempts, JitterSeed(messageID, attempts)))
}

// expiredPlan is FateExpired at `at`, keeping attempts: the failure reason
// becomes model.ReasonExpired (what a dead letter of it says).
func expiredPlan(attempts int, at time.Time) LeasePlan {
	return LeasePlan{Fate: FateExpired, At: at, Attempts: attempts, Reason: model.ReasonExpired, SetReason: true}
}

func delayPlan(p LeasePlan, from time.Time, d time.Duration) LeasePlan {
	p.At = from.Add(d)
	if d <= 0 {
		p.Fate = FateVisible
	} else {
		p.Fate = FateDelayed
	}
	return p
}

func reasonOr(reason, dflt string) string {
	if reason == "" {
		return dflt
	}
	return reason
}

// ShouldDeadLetterOnReceive reports whether a receive that finds a ready
// message with attempts attempts so far moves it to the dead-letter queue
// instead of delivering it (the receive would start an attempt past its
// limit). The failure path (LeaseChange, LeaseExpiry) normally moves
// it first; this catches a limit lowered since, and messages stored before
// attempts were kept.
func ShouldDeadLetterOnReceive(r *model.RedrivePolicy, attempts, ownMax int) bool {
	limit := model.MaxAttempts(r, ownMax)
	return limit > 0 && attempts >= limit
}
