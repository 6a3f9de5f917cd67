package model

import "time"

// Time to live: a per-message expiry (the message option Sluice.TimeToLive,
// the native API's ttlSeconds) and a queue's default for the messages sent
// without one (the Sluice attribute MessageTimeToLive), and what becomes of
// an expired message (ExpiredMessageAction). docs/sluice-attributes.md has
// the user's view.
//
// A message's expiry is its send's instant plus its time to live, stored
// with it. An expired message is never handed out: a receive skips it, and
// the backend's sweeper removes it when nobody receives. A message in flight
// when its time to live passes keeps its lease (its holder may still delete
// it: expiry is no cancellation); when the lease ends, or it is nacked or
// released, it expires instead of becoming visible. A delayed or backing-off
// message expires when its time to live passes. Expiring, it moves to the
// queue's dead-letter queue with the failure reason ReasonExpired, or is
// dropped (ExpiredActionOf). A message moved to another queue (a dead
// letter, a redrive, a replay) leaves its expiry behind: a time to live
// counts from the send, in the queue the message was sent to. When a
// message's time to live and its queue's retention have both passed, the
// time to live decides (a MessageTimeToLive equal to the retention
// dead-letters the queue's old messages instead of deleting them), unless a
// live lease holds the message: the retention deletes it then, as SQS
// deletes a message in flight past its retention. From its expiry on, an
// expired message that no live lease holds is gone to the other rules too
// (DeduplicationUntil=settled, MaxDepth), before a backend removes it.
const (
	AttrMessageTimeToLive    = "MessageTimeToLive"
	AttrExpiredMessageAction = "ExpiredMessageAction"
)

// MaxTimeToLive bounds a time to live, a message's or a queue's: 14 days
// (1,209,600 seconds), the longest retention. It is never longer than the
// queue's MessageRetentionPeriod either (the retention would delete the
// message first).
const MaxTimeToLive = MaxRetention

// ExpiredAction is a queue's ExpiredMessageAction: what becomes of a
// message whose time to live passed.
type ExpiredAction string

// The values of ExpiredMessageAction.
const (
	// ExpiredDeadLetter: the message moves to the queue's dead-letter
	// queue with the failure reason ReasonExpired. The default on a queue
	// with a RedrivePolicy; refused on a queue without one. When the
	// dead-letter queue is gone, the message is dropped, as on a queue
	// without a RedrivePolicy.
	ExpiredDeadLetter ExpiredAction = "dead-letter"
	// ExpiredDrop: the message is deleted. The default on a queue without
	// a RedrivePolicy.
	ExpiredDrop ExpiredAction = "drop"
)

// applyTTL parses the two attributes into c (called by applySluice).
// MessageTimeToLive "0" (or "") removes the queue's default; an
// ExpiredMessageAction "" removes the queue's choice (the default applies).
// The rules between attributes are checkTTL's.
func (c *QueueConfig) applyTTL(name, v string) error {
	switch name {
	case AttrMessageTimeToLive:
		if v == "" {
			c.TimeToLive = 0
			return nil
		}
		d, err := parseSeconds(name, v, 0, MaxTimeToLive)
		if err != nil {
			return err
		}
		c.TimeToLive = d
	case AttrExpiredMessageAction:
		switch a := ExpiredAction(v); a {
		case "", ExpiredDeadLetter, ExpiredDrop:
			c.ExpiredAction = a
		default:
			return Errorf(ErrInvalidAttributeValue, "Invalid value for the parameter ExpiredMessageAction. Reason: must be %s or %s.", ExpiredDeadLetter, ExpiredDrop)
		}
	}
	return nil
}

// checkTTL holds the rules between the time-to-live attributes and the
// others, on the settings as they are after a CreateQueue or
// SetQueueAttributes (so that lowering MessageRetentionPeriod or raising
// DelaySeconds past the default time to live, or removing the RedrivePolicy
// of a queue that dead-letters its expired messages, is refused too).
func (c *QueueConfig) checkTTL() error {
	if c.TimeToLive > 0 {
		if c.TimeToLive > c.Retention {
			return Errorf(ErrInvalidAttributeValue, "Invalid value for the parameter MessageTimeToLive. Reason: %d seconds is longer than the queue's MessageRetentionPeriod (%d seconds), which would delete every message first.",
				int64(c.TimeToLive/time.Second), int64(c.Retention/time.Second))
		}
		if c.Delay >= c.TimeToLive {
			return Errorf(ErrInvalidAttributeValue, "Invalid value for the parameter MessageTimeToLive. Reason: %d seconds is not longer than the queue's DelaySeconds (%d): a message sent with that delay would expire before it is visible.",
				int64(c.TimeToLive/time.Second), int64(c.Delay/time.Second))
		}
	}
	if c.ExpiredAction == ExpiredDeadLetter && c.Redrive == nil {
		return Errorf(ErrInvalidAttributeValue, "Invalid value for the parameter ExpiredMessageAction. Reason: dead-letter needs a RedrivePolicy (a dead-letter queue to move expired messages to).")
	}
	return nil
}

// ttlAttributes adds the set time-to-live settings to m (Attributes).
func (c QueueConfig) ttlAttributes(m map[string]string) {
	if c.TimeToLive > 0 {
		m[AttrMessageTimeToLive] = secs(c.TimeToLive)
	}
	if c.ExpiredAction != "" {
		m[AttrExpiredMessageAction] = string(c.ExpiredAction)
	}
}

// ExpiredActionOf is what becomes of c's expired messages: its
// ExpiredMessageAction when set, else ExpiredDeadLetter on a queue with a
// RedrivePolicy and ExpiredDrop on one without.
func (c QueueConfig) ExpiredActionOf() ExpiredAction {
	switch {
	case c.ExpiredAction != "":
		return c.ExpiredAction
	case c.Redrive != nil:
		return ExpiredDeadLetter
	}
	return ExpiredDrop
}

// ExpiredToDeadLetter reports whether c's expired messages move to its
// dead-letter queue (ExpiredActionOf is ExpiredDeadLetter); a backend
// drops them when that queue is gone.
func (c QueueConfig) ExpiredToDeadLetter() bool {
	return c.Redrive != nil && c.ExpiredActionOf() == ExpiredDeadLetter
}

// DefaultOf is the value GetQueueAttributes returns for Sluice attribute
// name asked for by name on a queue with settings c where it is unset:
// SluiceAttributeDefault's, but ExpiredMessageAction's, whose default
// depends on the queue's RedrivePolicy.
func (c QueueConfig) DefaultOf(name string) string {
	if name == AttrExpiredMessageAction {
		return string(c.ExpiredActionOf())
	}
	return SluiceAttributeDefault(name)
}

// Expired reports whether a message whose expiry is expiresAt (zero: it
// has none) has expired at t: the expiry instant itself is expired.
func Expired(expiresAt, t time.Time) bool {
	return !expiresAt.IsZero() && !expiresAt.After(t)
}

// MaxTimeToLiveSeconds is MaxTimeToLive in seconds (Sluice.TimeToLive's
// and ttlSeconds' upper bound).
const MaxTimeToLiveSeconds = int(MaxTimeToLive / time.Second)
