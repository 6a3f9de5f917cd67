package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicemq/sluice/broker/model"
)

// TxConfig names the Sluice a SendTx writes to.
type TxConfig struct {
	// Schema holds Sluice's tables: the brokers' Config.Schema. Default
	// "sluice".
	Schema string
	// Account owns the queue. "" (the default) is the brokers' own account,
	// the one every queue created through the SQS or native API belongs to
	// (model.QueueRef).
	Account string
	// Clock, when it has an Offset method (a clocktest.FakeClock, in tests),
	// gives the send's instant, as it does for brokers opened with it. nil
	// or any other clock: the database's clock (clock_timestamp()).
	Clock model.Clock
}

// Validate checks c; an empty Schema is the default.
func (c TxConfig) Validate() error {
	if c.Schema != "" && !schemaRe.MatchString(c.Schema) {
		return fmt.Errorf("postgres: TxConfig.Schema %q: use 1..63 letters, digits or underscores, not starting with a digit", c.Schema)
	}
	return nil
}

// txSender is the sender field of the NOTIFYs SendTx queues: no broker's
// id (16 hex digits), so every broker, the one in this process included,
// wakes its waiters (notify.go, listenOnce).
const txSender = "tx"

// SendTx stores entries into queue in the caller's transaction tx, so that
// the messages exist if and only if tx commits, and wakes the brokers'
// waiting receives when it does. It applies the rules of a send through a
// broker (model.ValidateSendBatch, then the backend's own send:
// plan.Send's validation, options and MaxDepth, the fair-queue turns,
// deduplication and FIFO sequence numbers), on the same code as
// Backend.Send. The schema must have been created by a broker of this
// version (Open migrates it).
//
// Unlike a broker's send it is all or nothing: an entry that a broker would
// refuse alone (a body too large, a bad attribute) fails the call, with its
// error (prefixed by messages[i], the entry's index, when there are several), and nothing
// is stored. A failed SendTx leaves tx usable: its statements run in a
// savepoint, rolled back on failure. tx is not used concurrently meanwhile
// (pgx.Tx is not safe for that anyway).
//
// # search_path
//
// Sluice's statements name its tables unqualified, resolved by the
// search_path its brokers' connections set to the schema. SendTx sets the
// transaction's search_path to the schema (then pg_temp, so that a
// temporary table of the session cannot shadow a Sluice table) with
// set_config(..., true) for its statements, and sets the previous value
// back before it returns; on a failure the savepoint's rollback restores
// it. This runs exactly the statements the brokers run, resolved exactly as
// theirs are: qualifying every table name in them instead would fork the
// SQL, and a name left unqualified would silently resolve through the
// application's search_path, to one of its own tables when it has one named
// like Sluice's (messages, counts, groups).
//
// # Waking the brokers
//
// SendTx issues pg_notify on the schema's channel, in the brokers'
// payload format, inside tx: PostgreSQL delivers it when tx commits (never
// when it rolls back), and the brokers wake their waiting receives on the
// queue. Messages that are not due yet (a delay) are found by the waiting
// receives' own timers and polls. A message's sent time (and, without a
// delay, its place in the ready order) is the instant SendTx ran, not the
// commit. Retention is enforced by the brokers' sweepers on their regular
// pass.
//
// # Locks held until tx ends
//
// Send last, just before the commit: what SendTx writes stays locked until
// tx ends. It reads the queue's row FOR SHARE (a purge, deletion or
// attribute change of the queue waits for tx, so tx cannot leave messages
// behind in a purged or deleted queue); it adds the messages to a counter
// row of the queue that no broker statement uses (txShard: the brokers'
// sends, receives and deletes never wait for it; the SendTx of another
// session waits only when their process ids are equal modulo 16); on a
// FIFO queue it locks the messages' group rows (the group's next sends
// wait; its receives skip it, and a receive that finds no other group
// receivable waits for it: sequence order within a group is commit order)
// and their deduplication keys (a duplicate sent meanwhile waits, then is
// deduplicated), as it locks the deduplication keys of a standard queue's
// messages that carry one. A NOTIFY also serializes commits that notify,
// cluster-wide, for an instant.
func SendTx(ctx context.Context, tx pgx.Tx, cfg TxConfig, queue string, entries []model.SendEntry) ([]model.SendResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Schema == "" {
		cfg.Schema = DefaultConfig().Schema
	}
	if err := model.ValidateSendBatch(entries); err != nil {
		return nil, err
	}
	// The Sluice options are parsed here, as the front parses them for
	// every other send; the planner checks them against the queue.
	entries = slices.Clone(entries)
	for i := range entries {
		entries[i].Options = model.ParseMessageOptions(entries[i].Attributes)
	}
	sp, err := tx.Begin(ctx) // a savepoint
	if err != nil {
		return nil, dbErr("send: savepoint", err)
	}
	defer sp.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after the release it does nothing
	var oldPath string
	var now time.Time
	err = sp.QueryRow(ctx, `SELECT s.old, set_config('search_path', $1, true), clock_timestamp()
		FROM (SELECT current_setting('search_path') AS old OFFSET 0) s`,
		pgx.Identifier{cfg.Schema}.Sanitize()+", pg_temp").Scan(&oldPath, nil, &now)
	if err != nil {
		return nil, dbErr("send: set search_path", err)
	}
	if _, ok := cfg.Clock.(model.OffsetClock); ok {
		now = cfg.Clock.Now()
	}
	s := sendOn{db: sp, now: now, run: once, share: true, whole: true, txShard: sessionShard(sp)}
	results, q, delay, err := s.send(ctx, model.QueueRef{Account: cfg.Account, Name: queue}, entries)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42P01" { // undefined_table
			return nil, fmt.Errorf("postgres: schema %q holds no Sluice tables: set TxConfig.Schema to the brokers' Config.Schema, or open a broker on it first (Open creates them): %w", cfg.Schema, err)
		}
		return nil, err
	}
	if delay >= 0 {
		_, err = sp.Exec(ctx, `SELECT pg_notify($1, $2), set_config('search_path', $3, true)`,
			channelName(cfg.Schema), fmt.Sprintf("%s %d", txSender, q.id), oldPath)
	} else {
		_, err = sp.Exec(ctx, `SELECT set_config('search_path', $1, true)`, oldPath)
	}
	if err != nil {
		return nil, dbErr("send: notify", err)
	}
	if err := sp.Commit(ctx); err != nil { // releases the savepoint
		return nil, dbErr("send: release savepoint", err)
	}
	return results, nil
}

// sessionShard is the counter row (txShard) of the database session of tx;
// the first of SendTx's rows when tx does not name its connection.
func sessionShard(tx pgx.Tx) int {
	if c := tx.Conn(); c != nil && c.PgConn() != nil {
		return txShard(c.PgConn().PID())
	}
	return countShards
}

// once runs f once: in a caller's transaction a failed statement aborts it,
// so it cannot be retried.
func once(f func() error) error { return f() }
