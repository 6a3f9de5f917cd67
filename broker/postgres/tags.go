package postgres

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker"
)

// Tags and policy statements: read-modify-writes of the queue row in one
// transaction that holds the row lock (SELECT ... FOR UPDATE), with the pure
// broker rules (MergeTags, ValidateTags, AddPolicyStatement,
// RemovePolicyStatement) applied in Go in between. Concurrent edits, from
// this broker or another, queue up on the row lock and never lose one
// another's change.

var (
	_ broker.Tagger       = (*Backend)(nil)
	_ broker.PolicyEditor = (*Backend)(nil)
)

// TagQueue implements broker.Tagger. Tags are not attributes: the queue's
// LastModifiedTimestamp stays.
func (b *Backend) TagQueue(ctx context.Context, name string, tags map[string]string) error {
	return b.editQueue(ctx, name, false, func(q *queueRow) error {
		merged := broker.MergeTags(q.tags, tags, nil)
		if err := broker.ValidateTags(name, merged); err != nil {
			return err
		}
		q.tags = merged
		return nil
	})
}

// UntagQueue implements broker.Tagger.
func (b *Backend) UntagQueue(ctx context.Context, name string, keys []string) error {
	return b.editQueue(ctx, name, false, func(q *queueRow) error {
		q.tags = broker.MergeTags(q.tags, nil, keys)
		return nil
	})
}

// AddPermission implements broker.PolicyEditor. The Policy is an attribute:
// LastModifiedTimestamp moves.
func (b *Backend) AddPermission(ctx context.Context, name string, p broker.Permission) error {
	return b.editQueue(ctx, name, true, func(q *queueRow) error {
		policy, err := broker.AddPolicyStatement(q.cfg.Policy, p)
		q.cfg.Policy = policy
		return err
	})
}

// RemovePermission implements broker.PolicyEditor.
func (b *Backend) RemovePermission(ctx context.Context, name, label string) error {
	return b.editQueue(ctx, name, true, func(q *queueRow) error {
		policy, err := broker.RemovePolicyStatement(q.cfg.Policy, label)
		q.cfg.Policy = policy
		return err
	})
}

// editQueue locks the live queue row, applies edit to it and writes its
// config and tags back (and modified_at = now when modified), in one
// transaction. When edit returns an error nothing is written.
func (b *Backend) editQueue(ctx context.Context, name string, modified bool, edit func(q *queueRow) error) error {
	if err := b.enter(); err != nil {
		return err
	}
	defer b.ops.Done()
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		q, err := scanQueue(tx.QueryRow(ctx, "SELECT "+queueCols+" FROM queues WHERE name = $1 AND NOT deleted FOR UPDATE", name))
		if errors.Is(err, pgx.ErrNoRows) {
			return errNoQueue()
		}
		if err != nil {
			return err
		}
		if err := edit(&q); err != nil {
			return err
		}
		if q.tags == nil {
			q.tags = map[string]string{}
		}
		cj, _ := json.Marshal(q.cfg)
		tj, _ := json.Marshal(q.tags)
		_, err = tx.Exec(ctx, `UPDATE queues SET config = $2, tags = $3,
			modified_at = CASE WHEN $4 THEN `+nowSQL+` ELSE modified_at END WHERE id = $5`,
			b.tnow(), cj, tj, modified, q.id)
		return err
	})
	return txErr("edit queue", err)
}
