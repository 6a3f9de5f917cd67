package model

import (
	"strconv"
	"time"
)

// Idempotent sends and unique jobs on standard queues: the Sluice attributes
// DeduplicationWindowSeconds and DeduplicationUntil (docs/sluice-attributes.md).
//
// A send to a standard queue may carry a MessageDeduplicationId (the native
// API's dedupId), as a send to a FIFO queue does. A second send with the same
// id within the queue's window is answered with the first one's message id
// and stores nothing, as FIFO deduplication answers (plan.Original holds the
// rule). DeduplicationUntil=settled also makes the id a duplicate while a
// message carrying it is still in the queue, however long that is: unique
// jobs. FIFO queues keep SQS's rule exactly: a fixed 5-minute interval
// (DedupWindow), no settled mode.
const (
	AttrDeduplicationWindowSeconds = "DeduplicationWindowSeconds"
	AttrDeduplicationUntil         = "DeduplicationUntil"
)

// The bounds of a standard queue's DeduplicationWindowSeconds.
const (
	// DefaultDedupWindow is a standard queue's window when it has no
	// DeduplicationWindowSeconds: SQS's FIFO interval, 5 minutes.
	DefaultDedupWindow = DedupWindow
	// MinDedupWindow and MaxDedupWindow bound DeduplicationWindowSeconds
	// (60 to 86,400 seconds).
	MinDedupWindow = time.Minute
	MaxDedupWindow = 24 * time.Hour
)

// DedupUntil is a standard queue's DeduplicationUntil: how long a dedup id
// stays a duplicate.
type DedupUntil string

// The values of DeduplicationUntil.
const (
	// DedupUntilWindow: for the window after the send that introduced the
	// id (the default, stored as "").
	DedupUntilWindow DedupUntil = "window"
	// DedupUntilSettled: for the window, and also while a message carrying
	// the id is in the queue (queued, delayed, backing off or in flight);
	// the id is released when the last such message leaves it (deleted,
	// dead-lettered, expired by retention, purged).
	DedupUntilSettled DedupUntil = "settled"
)

// applyDedup parses the two attributes into c (called by applySluice). Both
// are refused on a FIFO queue, but DeduplicationUntil=window, the only rule
// a FIFO queue has: its deduplication is SQS's, whose fixed 5-minute
// interval FIFO clients rely on. A value equal to the default is stored as
// unset, so that the queue's All lists the attribute only when it differs.
func (c *QueueConfig) applyDedup(name, v string) error {
	switch name {
	case AttrDeduplicationWindowSeconds:
		if c.Fifo {
			return Errorf(ErrInvalidAttributeValue, "Invalid value for the parameter DeduplicationWindowSeconds. Reason: a FIFO queue keeps SQS's fixed 5-minute deduplication interval; the window is for standard queues only.")
		}
		d, err := parseSeconds(name, v, MinDedupWindow, MaxDedupWindow)
		if err != nil {
			return err
		}
		if d == DefaultDedupWindow {
			d = 0
		}
		c.DedupWindow = d
	case AttrDeduplicationUntil:
		switch DedupUntil(v) {
		case DedupUntilWindow:
			c.DedupUntil = ""
		case DedupUntilSettled:
			if c.Fifo {
				return Errorf(ErrInvalidAttributeValue, "Invalid value for the parameter DeduplicationUntil. Reason: settled is for standard queues only (a FIFO queue keeps SQS's deduplication rule).")
			}
			c.DedupUntil = DedupUntilSettled
		default:
			return Errorf(ErrInvalidAttributeValue, "Invalid value for the parameter DeduplicationUntil. Reason: must be %s or %s.", DedupUntilWindow, DedupUntilSettled)
		}
	}
	return nil
}

// dedupAttributes adds the set dedup settings to m (Attributes).
func (c QueueConfig) dedupAttributes(m map[string]string) {
	if c.DedupWindow > 0 {
		m[AttrDeduplicationWindowSeconds] = strconv.FormatInt(int64(c.DedupWindow/time.Second), 10)
	}
	if c.DedupUntil != "" {
		m[AttrDeduplicationUntil] = string(c.DedupUntil)
	}
}

// DedupWindowOf is how long a dedup id is remembered after the send that
// introduced it: DedupWindow on a FIFO queue, the queue's
// DeduplicationWindowSeconds (default DefaultDedupWindow) on a standard one.
func (c QueueConfig) DedupWindowOf() time.Duration {
	if c.Fifo || c.DedupWindow <= 0 {
		return DedupWindow
	}
	return c.DedupWindow
}

// DedupUntilSettled reports whether a dedup id is also a duplicate while a
// message carrying it is in the queue (DeduplicationUntil=settled; standard
// queues only).
func (c QueueConfig) DedupUntilSettled() bool {
	return !c.Fifo && c.DedupUntil == DedupUntilSettled
}
