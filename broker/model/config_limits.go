package model

import (
	"strconv"
	"strings"
	"time"
)

// The rate limits of a queue (docs/sluice-attributes.md): how many of its
// messages may be in flight at once, and how many may be handed out per
// second, across every consumer and every broker. A receive that meets a
// limit gets what the limit allows now, or waits within its wait time as on
// an empty queue: never an error. plan.ClaimRoom holds the rules; each
// backend runs it inside the atomic step of its claim.
const (
	// AttrMaxInFlight is the queue's own in-flight cap: an integer
	// 1..DefaultMaxInFlight; unset ("") = no cap but the broker's.
	AttrMaxInFlight = "MaxInFlight"
	// AttrMaxReceivesPerSecond is the queue's receive rate: a decimal
	// number of messages per second, above 0 and at most MaxReceiveRate,
	// with at most RateDecimals decimal places ("0.5", "20"); unset ("")
	// = no limit.
	AttrMaxReceivesPerSecond = "MaxReceivesPerSecond"
)

// MaxReceiveRate bounds MaxReceivesPerSecond (messages per second).
const MaxReceiveRate = 100_000

// RateDecimals is how many decimal places MaxReceivesPerSecond may have:
// the slowest rate is one message in 10^6 seconds (11.6 days).
const RateDecimals = 6

// rateUnit is one message per second in a Rate's unit (millionths).
const rateUnit = 1_000_000

// Rate is a receive rate in millionths of a message per second (500000 is
// 0.5 a second): exact, whatever decimal the attribute gave. 0 = no limit.
type Rate int64

// String renders r as its attribute value: the shortest decimal ("0.5",
// "20", "0.000001").
func (r Rate) String() string {
	s := strconv.FormatInt(int64(r)/rateUnit, 10)
	if frac := int64(r) % rateUnit; frac != 0 {
		f := strconv.FormatInt(frac+rateUnit, 10)[1:] // RateDecimals digits, leading zeros kept
		s += "." + strings.TrimRight(f, "0")
	}
	return s
}

// Interval is the time one message takes at rate r (r > 0), rounded up to
// the nanosecond, so that the rate is never exceeded: 2 s at 0.5 a second,
// 50 ms at 20.
func (r Rate) Interval() time.Duration {
	const perSecond = int64(time.Second) * rateUnit
	return time.Duration((perSecond + int64(r) - 1) / int64(r))
}

// Burst is how many messages may go at once after an idle second at rate
// r (r > 0): one second's worth, at least one.
func (r Rate) Burst() int64 { return max(1, int64(r)/rateUnit) }

// ParseRate parses a MaxReceivesPerSecond value: "" (unset: 0) or a plain
// decimal, digits with an optional fraction of at most RateDecimals digits
// (no sign, exponent or hexadecimal form), above 0 and at most
// MaxReceiveRate.
func ParseRate(v string) (Rate, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, nil
	}
	bad := func(reason string) error {
		return Errorf(ErrInvalidAttributeValue, "Invalid value for the parameter %s. Reason: %s", AttrMaxReceivesPerSecond, reason)
	}
	const want = "must be a number of messages per second above 0 and at most 100000, e.g. 0.5 or 20 (remove the limit with an empty value)."
	whole, frac, _ := strings.Cut(v, ".")
	if whole == "" && frac == "" || !allDigits(whole) || !allDigits(frac) || len(whole) > 6 {
		return 0, bad(want)
	}
	if len(frac) > RateDecimals {
		return 0, bad("at most 6 decimal places (the slowest rate is 0.000001, one message in 11.6 days).")
	}
	var r int64
	if whole != "" {
		n, _ := strconv.ParseInt(whole, 10, 64) // at most 6 digits
		r = n * rateUnit
	}
	if frac != "" {
		n, _ := strconv.ParseInt(frac+strings.Repeat("0", RateDecimals-len(frac)), 10, 64)
		r += n
	}
	if r <= 0 || r > MaxReceiveRate*rateUnit {
		return 0, bad(want)
	}
	return Rate(r), nil
}

// allDigits reports whether s holds ASCII digits only ("" does).
func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// applyLimits sets a rate-limit attribute (applySluice calls it).
func (c *QueueConfig) applyLimits(name, v string) (err error) {
	switch name {
	case AttrMaxInFlight:
		if strings.TrimSpace(v) == "" {
			c.MaxInFlight = 0
			return nil
		}
		n, perr := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if perr != nil || n < 1 || n > DefaultMaxInFlight {
			return Errorf(ErrInvalidAttributeValue, "Invalid value for the parameter %s. Reason: must be an integer between 1 and %d (remove the limit with an empty value).", name, DefaultMaxInFlight)
		}
		c.MaxInFlight = n
	case AttrMaxReceivesPerSecond:
		c.ReceiveRate, err = ParseRate(v)
	}
	return err
}

// limitsAttributes adds the set rate limits to m (sluiceAttributes calls
// it).
func (c QueueConfig) limitsAttributes(m map[string]string) {
	if c.MaxInFlight > 0 {
		m[AttrMaxInFlight] = strconv.FormatInt(c.MaxInFlight, 10)
	}
	if c.ReceiveRate > 0 {
		m[AttrMaxReceivesPerSecond] = c.ReceiveRate.String()
	}
}

// Limited reports whether the queue has a rate limit (MaxInFlight or
// MaxReceivesPerSecond): a backend then plans its claims under a lock of
// the queue's limits (plan.ClaimRoom).
func (c QueueConfig) Limited() bool { return c.MaxInFlight > 0 || c.ReceiveRate > 0 }
