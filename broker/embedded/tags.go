package embedded

import (
	"context"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/broker"
)

// Tags and policy statements: read-modify-writes of the queue record under
// Backend.mu, so that concurrent edits never lose one another's change.

var (
	_ broker.Tagger       = (*Backend)(nil)
	_ broker.PolicyEditor = (*Backend)(nil)
)

// TagQueue implements broker.Tagger.
func (b *Backend) TagQueue(ctx context.Context, name string, tags map[string]string) error {
	return b.editQueue(ctx, name, func(q *queue) error {
		merged := broker.MergeTags(q.Tags, tags, nil)
		if err := broker.ValidateTags(name, merged); err != nil {
			return err
		}
		q.Tags = merged
		return nil
	})
}

// UntagQueue implements broker.Tagger.
func (b *Backend) UntagQueue(ctx context.Context, name string, keys []string) error {
	return b.editQueue(ctx, name, func(q *queue) error {
		q.Tags = broker.MergeTags(q.Tags, nil, keys)
		return nil
	})
}

// AddPermission implements broker.PolicyEditor.
func (b *Backend) AddPermission(ctx context.Context, name string, p broker.Permission) error {
	return b.editQueue(ctx, name, func(q *queue) error {
		policy, err := broker.AddPolicyStatement(q.Config.Policy, p)
		if err != nil {
			return err
		}
		q.Config = withPolicy(q.Config, policy)
		q.ModifiedAt = b.clock.Now()
		return nil
	})
}

// RemovePermission implements broker.PolicyEditor.
func (b *Backend) RemovePermission(ctx context.Context, name, label string) error {
	return b.editQueue(ctx, name, func(q *queue) error {
		policy, err := broker.RemovePolicyStatement(q.Config.Policy, label)
		if err != nil {
			return err
		}
		q.Config = withPolicy(q.Config, policy)
		q.ModifiedAt = b.clock.Now()
		return nil
	})
}

// withPolicy returns a copy of c with Policy set: QueueConfig values handed
// out by info() must never see a change in place.
func withPolicy(c broker.QueueConfig, policy string) broker.QueueConfig {
	c, _ = broker.ApplyAttributes(c, nil) // deep copy
	c.Policy = policy
	return c
}

// editQueue applies edit to the queue's record under b.mu and stores the
// record durably. edit changes nothing when it returns an error.
func (b *Backend) editQueue(ctx context.Context, name string, edit func(q *queue) error) error {
	return b.update(ctx, name, func(q *queue, batch *pebble.Batch) error {
		if err := edit(q); err != nil {
			return err
		}
		_ = batch.Set(queueKey(name), q.queueRecord.encode(), nil)
		return nil
	})
}
