package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
)

// Dead-letter webhook events (broker/internal/plan/webhook.go). A move to a dead-letter
// queue of a message whose source queue has a DeadLetterWebhook inserts, in
// the move's own statement or transaction, one event message into the
// outbox queue (plan.WebhookOutbox()) when it exists: claimSQL's hook CTE
// for the moves of a claim, insertWebhookEvents for the moves planned in Go
// (leaseApply). Both build the body with webhookEventJSON, the one SQL
// spelling of plan.WebhookEvent's body (the conformance suite compares
// the two backends' events).

// webhookEventJSON is the SQL expression of an event's body, from the SQL
// expressions of its fields (at is a timestamptz, written in
// model.EventTimeFormat).
func webhookEventJSON(source, dlq, messageID, reason, attempts, receiveCount, at string) string {
	return `json_build_object('queue', ` + source + `, 'deadLetterQueue', ` + dlq + `, 'messageId', ` + messageID + `,
		'reason', ` + reason + `, 'attempts', ` + attempts + `, 'receiveCount', ` + receiveCount + `,
		'at', to_char((` + at + `) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))::text`
}

// hookTarget sets to.hook to the outbox when queue q has a DeadLetterWebhook
// and the outbox exists (read on db: the pool, or a transaction).
func (b *Backend) hookTarget(ctx context.Context, db querier, q queueRow, to *claimTo) error {
	if q.cfg.DeadLetterWebhook == "" {
		return nil
	}
	h, err := b.getQueue(ctx, db, plan.WebhookOutbox())
	switch {
	case errors.Is(err, model.ErrQueueDoesNotExist):
		return nil
	case err != nil:
		return err
	}
	to.hook = &h
	return nil
}

// insertWebhookEventsSQL writes the events of the dead letters $3 (row ids,
// already moved: their reason and counts are the moved ones) into the
// outbox $1 at $2, and counts them.
var insertWebhookEventsSQL = `WITH ev AS (
	INSERT INTO messages (queue_id, state, visible_at, sent_at, message_id, body)
	SELECT $1, 'r', $2, $2, gen_random_uuid(), ` + webhookEventJSON("$4::text", "$5::text", "m.message_id::text",
	"coalesce(m.reason, '')", "coalesce(m.attempts, m.receive_count)", "m.receive_count", "$2::timestamptz") + `
	FROM messages m WHERE m.id = ANY($3::bigint[]) ORDER BY m.id
	RETURNING 1)
SELECT count(*) FROM ev`

// insertWebhookEvents writes, in tx, the events of dead (moved by
// moveToDLQ from src to to.dlq at now) into the outbox to.hook, and returns
// how many it wrote (the caller adds them to the outbox's ready count).
func (b *Backend) insertWebhookEvents(ctx context.Context, tx pgx.Tx, src queueRow, to claimTo, dead []deadLetter, now time.Time) (int64, error) {
	if to.hook == nil || to.dlq == nil || len(dead) == 0 {
		return 0, nil
	}
	ids := make([]int64, len(dead))
	for i, d := range dead {
		ids[i] = d.id
	}
	var n int64
	err := tx.QueryRow(ctx, insertWebhookEventsSQL, to.hook.mid, now, ids, src.name, to.dlq.name).Scan(&n)
	return n, err
}

// webhookWake wakes the outbox's receives (the dispatcher, on every broker)
// after a commit that moved messages of queue q, which has a webhook.
func (b *Backend) webhookWake(ctx context.Context, q queueRow) {
	if q.cfg.DeadLetterWebhook == "" {
		return
	}
	if h, err := b.getQueue(ctx, b.pool, plan.WebhookOutbox()); err == nil {
		b.changed(h.id, time.Time{}, false)
	}
}
