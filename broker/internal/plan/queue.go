package plan

import (
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// QueueUpdate is a queue's settings and tags as an UpdateQueue finds them
// inside its atomic step, and, after Apply, as it stores them.
type QueueUpdate struct {
	// Queue is the queue updated.
	Queue model.QueueRef
	// Config and Tags are the queue's; Apply replaces them (it never
	// changes the maps it was given in place).
	Config model.QueueConfig
	Tags   map[string]string
	// Modified is set by Apply when LastModifiedTimestamp moves to now:
	// attribute changes do, tag changes do not.
	Modified bool
}

// Apply makes change of u's queue, or returns why it is refused (then u is
// unchanged and nothing may be written). It is pure, so a backend can run it
// again in a retried transaction.
func (u *QueueUpdate) Apply(change model.QueueChange) error {
	switch {
	case change.Attributes != nil:
		cfg, err := model.ApplyAttributes(u.Config, change.Attributes)
		if err != nil {
			return err
		}
		u.Config, u.Modified = cfg, true
	case change.AddTags != nil:
		merged := model.MergeTags(u.Tags, change.AddTags, nil)
		if err := model.ValidateTags(u.Queue.Name, merged); err != nil {
			return err
		}
		u.Tags = merged
	case change.RemoveTags != nil:
		u.Tags = model.MergeTags(u.Tags, nil, change.RemoveTags)
	case change.AddPermission != nil:
		policy, err := model.AddPolicyStatement(u.Config.Policy, *change.AddPermission)
		if err != nil {
			return err
		}
		u.Config = u.Config.Clone()
		u.Config.Policy, u.Modified = policy, true
	case change.RemovePermission != "":
		policy, err := model.RemovePolicyStatement(u.Config.Policy, change.RemovePermission)
		if err != nil {
			return err
		}
		u.Config = u.Config.Clone()
		u.Config.Policy, u.Modified = policy, true
	}
	return nil
}

// PurgeInterval is AWS's one purge per queue per 60 s (the front's
// Config.StrictPurge passes it to PurgeQueue).
const PurgeInterval = 60 * time.Second

// AllowPurge is the rule of a strict purge: a purge of queue name at now is
// refused (ErrPurgeInProgress) within minInterval of its last purge (zero:
// never purged). minInterval <= 0 allows every purge.
func AllowPurge(name string, minInterval time.Duration, last, now time.Time) error {
	if minInterval > 0 && !last.IsZero() && now.Sub(last) < minInterval {
		return model.Errorf(model.ErrPurgeInProgress, "Only one PurgeQueue operation on %s is allowed every 60 seconds.", name)
	}
	return nil
}

// VisibilityOutcome is the outcome a visibility change reports for a
// receipt whose lease outcome is o on a queue with settings c: on an
// at-most-once queue every received message is gone, so a stale receipt is
// answered as a lease that ended (MessageNotInflight), not as a message
// that does not exist.
func VisibilityOutcome(c model.QueueConfig, o model.LeaseOutcome) model.LeaseOutcome {
	if o == model.LeaseStale && c.AtMostOnce() {
		return model.LeaseEnded
	}
	return o
}
