// Package pgstore is the PostgreSQL idempotency store: a table of keys, one
// row per key whose work is done.
//
// For effects that are writes to the same database, InTx is exactly once:
// it records the key in the transaction that makes the writes, so the key
// and the writes commit together or not at all. A redelivered message finds
// its key and is acked without running again; a crash before the commit
// leaves neither, and the redelivery runs it.
//
// For effects outside the database the Store is an idempotency.Store, used
// through idempotency.Do with an explicit mode (at most once or at least
// once).
//
// # Concurrent duplicates
//
// Two deliveries of one key at once (a lease that ended while the first
// worker was still running, or a producer's duplicate send) both insert
// the key. PostgreSQL's unique index makes the second insert wait for the
// first transaction: when it commits, the second finds the key (ran ==
// false, nothing written); when it rolls back, the second inserts the key
// and runs. A transaction holds the key's index entry until it ends, so keep
// InTx's function short.
//
// # Retention
//
// Keys stay until Prune deletes them. Keep them longer than any copy of a
// message can live: the queue's retention period (a message can be
// delivered until it expires), plus the dead-letter queue's if dead
// letters are replayed, plus how long a producer may retry a send. A key
// pruned too early lets a late copy run again.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicemq/sluice/worker/idempotency"
)

// Config configures a Store.
type Config struct {
	// Table is the keys table; New creates it when missing. Default
	// "sluice_idempotency_keys"; letters, digits and underscores, at most 63
	// bytes, not starting with a digit.
	Table string
	// Schema qualifies Table; "" (the default) leaves it unqualified, found
	// through the connections' search_path. Same characters as Table. New
	// does not create the schema.
	Schema string
}

// DefaultTable is Config.Table's default.
const DefaultTable = "sluice_idempotency_keys"

var identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// Validate checks c (Table may be empty: the default).
func (c Config) Validate() error {
	if c.Table != "" && !identRe.MatchString(c.Table) {
		return fmt.Errorf("pgstore: Config.Table %q: use 1..63 letters, digits or underscores, not starting with a digit", c.Table)
	}
	if c.Schema != "" && !identRe.MatchString(c.Schema) {
		return fmt.Errorf("pgstore: Config.Schema %q: use 1..63 letters, digits or underscores, not starting with a digit", c.Schema)
	}
	return nil
}

// Store is the PostgreSQL idempotency store. Safe for concurrent use.
type Store struct {
	pool  *pgxpool.Pool
	table string // the sanitized, possibly qualified table name
}

var _ idempotency.Store = (*Store)(nil)

// New returns a Store on pool, creating its table if missing (key text
// primary key, recorded_at timestamptz, and an index on recorded_at for
// Prune). The pool stays the caller's: the Store never closes it.
func New(ctx context.Context, pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	id := pgx.Identifier{cfg.Table}
	if cfg.Schema != "" {
		id = pgx.Identifier{cfg.Schema, cfg.Table}
	}
	s := &Store{pool: pool, table: id.Sanitize()}
	index := pgx.Identifier{cfg.Table + "_recorded_at"}.Sanitize()
	if len(cfg.Table) > 63-len("_recorded_at") {
		index = pgx.Identifier{cfg.Table[:63-len("_recorded_at")] + "_recorded_at"}.Sanitize()
	}
	// The DDL runs only when the table or its index is missing: even with
	// IF NOT EXISTS, CREATE INDEX takes its SHARE lock on the table before
	// it looks, so a New beside a handler's open transaction that records
	// a key waited for that transaction, and every key recorded after it
	// waited behind New in the lock queue.
	indexID := pgx.Identifier{strings.Trim(index, `"`)}
	if cfg.Schema != "" {
		indexID = pgx.Identifier{cfg.Schema, strings.Trim(index, `"`)}
	}
	var present bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL`,
		s.table, indexID.Sanitize()).Scan(&present); err == nil && present {
		return s, nil
	}
	// Two statements in one implicit transaction (a simple-protocol batch):
	// concurrent News may race on CREATE TABLE IF NOT EXISTS, whose check
	// and create are not atomic; the loser's duplicate error is retried
	// once, when the table exists.
	ddl := `CREATE TABLE IF NOT EXISTS ` + s.table + ` (
			key text COLLATE "C" PRIMARY KEY,
			recorded_at timestamptz NOT NULL DEFAULT now());
		CREATE INDEX IF NOT EXISTS ` + index + ` ON ` + s.table + ` (recorded_at)`
	var err error
	for range 2 {
		if _, err = pool.Exec(ctx, ddl, pgx.QueryExecModeSimpleProtocol); err == nil {
			return s, nil
		}
	}
	return nil, fmt.Errorf("pgstore: create table %s: %w", s.table, err)
}

// ClaimTx records key in tx unless it is recorded, and reports whether this
// call recorded it. The record commits or rolls back with tx: use it to make
// a transaction of your own exactly once (InTx is the common case). A key
// another open transaction is recording makes ClaimTx wait for that
// transaction to end (see the package comment).
func (s *Store) ClaimTx(ctx context.Context, tx pgx.Tx, key string) (bool, error) {
	tag, err := tx.Exec(ctx, `INSERT INTO `+s.table+` (key) VALUES ($1) ON CONFLICT (key) DO NOTHING`, key)
	if err != nil {
		return false, fmt.Errorf("pgstore: record key %q: %w", key, err)
	}
	return tag.RowsAffected() == 1, nil
}

// InTx runs fn exactly once per key for its writes through tx: it begins a
// transaction, records key in it and, when the key was new, calls fn with it
// and commits. ran == false with a nil error means the key was already
// recorded (the work is done: ack the message); nothing is written then.
//
// When fn returns an error (or panics), the transaction rolls back: the key
// is not recorded and a retry runs fn again. fn must write only through tx
// for its writes to be exactly once; effects outside the database are not
// undone by the rollback (use idempotency.Do for those). When the commit
// itself fails, InTx answers ran == true and the error: whether it
// committed is unknown, and a retry finds out (the key is there or not).
func (s *Store) InTx(ctx context.Context, key string, fn func(ctx context.Context, tx pgx.Tx) error) (ran bool, err error) {
	if key == "" {
		return false, errors.New("pgstore: empty key")
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("pgstore: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after a commit it is a no-op
	claimed, err := s.ClaimTx(ctx, tx, key)
	if err != nil || !claimed {
		return false, err
	}
	if err := fn(ctx, tx); err != nil {
		return true, err
	}
	if err := tx.Commit(ctx); err != nil {
		return true, fmt.Errorf("pgstore: commit key %q (it may have committed: a retry finds out): %w", key, err)
	}
	return true, nil
}

// Claim implements idempotency.Store (in its own transaction).
func (s *Store) Claim(ctx context.Context, key string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `INSERT INTO `+s.table+` (key) VALUES ($1) ON CONFLICT (key) DO NOTHING`, key)
	if err != nil {
		return false, fmt.Errorf("pgstore: record key %q: %w", key, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Seen implements idempotency.Store.
func (s *Store) Seen(ctx context.Context, key string) (bool, error) {
	var seen bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+s.table+` WHERE key = $1)`, key).Scan(&seen); err != nil {
		return false, fmt.Errorf("pgstore: look up key %q: %w", key, err)
	}
	return seen, nil
}

// Forget implements idempotency.Store.
func (s *Store) Forget(ctx context.Context, key string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM `+s.table+` WHERE key = $1`, key); err != nil {
		return fmt.Errorf("pgstore: forget key %q: %w", key, err)
	}
	return nil
}

// pruneBatch bounds the keys one Prune statement deletes, so that a large
// backlog is deleted in short transactions.
const pruneBatch = 10000

// Prune deletes the keys recorded more than olderThan ago (on the
// database's clock) and returns how many. Keep keys longer than a message
// and its copies can live (see the package comment); run it periodically
// (daily, say).
func (s *Store) Prune(ctx context.Context, olderThan time.Duration) (int64, error) {
	if olderThan <= 0 {
		return 0, fmt.Errorf("pgstore: Prune(%v): give a positive age (longer than the queue's retention period)", olderThan)
	}
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, `DELETE FROM `+s.table+` WHERE key IN (
			SELECT key FROM `+s.table+` WHERE recorded_at < now() - $1 * interval '1 microsecond' LIMIT $2)`,
			olderThan.Microseconds(), pruneBatch)
		if err != nil {
			return total, fmt.Errorf("pgstore: prune: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < pruneBatch {
			return total, nil
		}
	}
}
