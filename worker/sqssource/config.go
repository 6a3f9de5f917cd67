package sqssource

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"
)

// MaxVisibility is SQS's longest visibility timeout: 43,200 s (12 h). A
// lease, a snooze, a retry delay and the backoff's cap are at most this
// long; SQS also rejects a visibility change that takes a message's lease
// past 12 h after its receive, so a long delay late in a long lease may be
// refused.
const MaxVisibility = 12 * time.Hour

// The backoff defaults (DefaultConfig).
const (
	// DefaultBackoffBase is 1 s: SQS's visibility timeout has whole-second
	// granularity, so a finer first delay means nothing, and most transient
	// failures (a timeout, a dropped connection, a lock) clear within
	// seconds: a first retry soon costs little.
	DefaultBackoffBase = time.Second
	// DefaultBackoffMax is 5 min: the cap of Sluice's own RetryPolicy when
	// none is given (maxSeconds 300, the seed's cap), so a handler sees the
	// same retry timing on Sluice's native API and on plain SQS; 1 s doubling
	// reaches it after the 9th attempt. It is far below MaxVisibility,
	// which leaves room for SQS's 12 h limit counted from the receive.
	DefaultBackoffMax = 5 * time.Minute
)

// Backoff is the client-side retry backoff of a nack without a delay:
// before its n-th retry (after its n-th receive failed) a message stays
// invisible for a delay drawn uniformly from [0, min(Base*2^(n-1), Max)]
// ("full jitter": messages failing together spread out instead of coming
// back in a herd), rounded up to whole seconds. The delay is the visibility
// timeout set with ChangeMessageVisibility, so SQS's own redrive
// (maxReceiveCount) still counts the receives and dead-letters the message.
type Backoff struct {
	// Base is the first delay's upper bound: 1 s..12 h; default 1 s
	// (DefaultBackoffBase). 0 takes the default.
	Base time.Duration
	// Max caps every delay: Base..12 h; default 5 min (DefaultBackoffMax).
	// 0 takes the default (or Base, when Base is larger).
	Max time.Duration
}

// withDefaults fills the zero fields.
func (b Backoff) withDefaults() Backoff {
	if b.Base == 0 {
		b.Base = DefaultBackoffBase
	}
	if b.Max == 0 {
		b.Max = max(DefaultBackoffMax, b.Base)
	}
	return b
}

// Ceiling is the upper bound of the delay after the receiveCount-th
// receive: min(Base*2^(receiveCount-1), Max); receiveCount < 1 counts as 1.
func (b Backoff) Ceiling(receiveCount int) time.Duration {
	b = b.withDefaults()
	d := b.Base
	// Doubling stops at Max, so d never overflows.
	for i := 1; i < receiveCount && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// Delay is the delay after the receiveCount-th receive for a jitter draw r
// in [0, 1): r*Ceiling(receiveCount), rounded up to whole seconds.
func (b Backoff) Delay(receiveCount int, r float64) time.Duration {
	r = min(max(r, 0), 1)
	return roundUp(time.Duration(r * float64(b.Ceiling(receiveCount))))
}

// Config configures a Source. Start from DefaultConfig; the zero value
// works too (every zero field takes its default).
type Config struct {
	// Backoff is the client-side backoff of a nack without a delay (an
	// ordinary handler error); default DefaultBackoffBase doubling up to
	// DefaultBackoffMax, full jitter.
	Backoff Backoff
	// Rand draws the backoff's jitter: a uniform float64 in [0, 1). It is
	// called from several goroutines at once. Default math/rand/v2.Float64;
	// tests inject a constant.
	Rand func() float64
	// DeadLetterQueueURL is where KindDeadLetter sends messages. Empty (the
	// default): the queue's RedrivePolicy names it (its deadLetterTargetArn,
	// resolved with GetQueueUrl once and cached). Set it when the queue has
	// no RedrivePolicy, or when the consumer may not call GetQueueAttributes.
	DeadLetterQueueURL string
	// Logger receives the source's warnings (a dead-letter reason that did
	// not fit, an unreadable RedrivePolicy). Default: discarded.
	Logger *slog.Logger
}

// DefaultConfig returns the defaults: the backoff of 1 s doubling to 5 min
// with full jitter, math/rand/v2's jitter, the dead-letter queue from the
// queue's RedrivePolicy, no logging.
func DefaultConfig() Config {
	return Config{
		Backoff: Backoff{Base: DefaultBackoffBase, Max: DefaultBackoffMax},
		Rand:    rand.Float64,
		Logger:  slog.New(slog.DiscardHandler),
	}
}

// Validate reports the first field out of range, naming it and its range.
func (c Config) Validate() error {
	b := c.Backoff.withDefaults()
	if b.Base < time.Second || b.Base > MaxVisibility {
		return fmt.Errorf("sqssource: Config.Backoff.Base is %v; it must be 1s..12h (SQS's visibility timeout is whole seconds up to 12 h), or 0 for the default %v", c.Backoff.Base, DefaultBackoffBase)
	}
	if b.Max < b.Base || b.Max > MaxVisibility {
		return fmt.Errorf("sqssource: Config.Backoff.Max is %v; it must be Backoff.Base (%v)..12h, or 0 for the default %v", c.Backoff.Max, b.Base, DefaultBackoffMax)
	}
	return nil
}

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	c.Backoff = c.Backoff.withDefaults()
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// roundUp rounds d up to whole seconds (SQS's unit); negative is 0.
func roundUp(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return (d + time.Second - 1) / time.Second * time.Second
}

// seconds is d rounded up to whole seconds, as SQS takes it.
func seconds(d time.Duration) int32 { return int32(roundUp(d) / time.Second) }
