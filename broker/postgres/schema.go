package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
)

// rowState is the state column of a messages row (PostgreSQL's one-byte
// "char"), as Go code compares and writes it; the SQL statements spell the
// same letters as literals ('r', 'i', 'd').
type rowState string

// The row states (see the table design of migrations, below).
const (
	rowReady    rowState = "r" // visible: in the ready index, in receive order
	rowInFlight rowState = "i" // leased until visible_at
	rowDelayed  rowState = "d" // a delay, a backoff after a failure, or a snooze, until visible_at
)

// migrations are applied in order, each once, in its own transaction, and
// recorded in the migrations table; a new schema gets them all in one
// transaction. Never edit a shipped migration: append.
//
// Table design (see docs/postgres.md for the reasoning):
//
//   - messages: one row per message, body included (TOASTed when large).
//     state is 'r' ready, 'd' delayed (a delay, a backoff after a failure, a
//     snooze) or 'i' in flight; visible_at is, for a ready message, the
//     instant it became visible (the ready order) and, otherwise, when the
//     delay or lease ends. A delayed or in-flight message whose visible_at
//     has passed is promoted to ready by the next receive or GetQueue of its
//     queue; on a queue with a RetryPolicy or RedrivePolicy an ended lease
//     is planned instead (plan.LeaseExpiry, see expireLeases in leases.go).
//   - messages_ready_fair (messages_ready before migration 7) is partial
//     (state = 'r') and in receive order (priority, fair-queue turn, ready
//     order), so a receive reads the first live entries of one index range;
//     leased and delayed messages are not in it. messages_timed (state <> 'r') serves
//     promotion and "when is the next deadline"; messages_age serves
//     retention.
//   - The queue tables get aggressive per-table autovacuum settings, so dead
//     index entries left by deletes and lease changes are reclaimed within
//     seconds instead of after 20% of the table has churned, and a fillfactor
//     that leaves room for in-page updates.
//   - counts: the sharded per-queue counters (see the package comment); tiny,
//     updated in place (HOT: no indexed column changes), low fillfactor.
//     cursors, the fair queues' cursors (fair.go), are built the same way.
var migrations = []string{
	// 1: queues, messages, counters.
	`
CREATE TABLE queues (
	id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	name        text COLLATE "C" NOT NULL,
	config      jsonb NOT NULL,
	tags        jsonb NOT NULL DEFAULT '{}',
	created_at  timestamptz NOT NULL,
	modified_at timestamptz NOT NULL,
	last_purge  timestamptz,
	deleted     boolean NOT NULL DEFAULT false,
	deleted_at  timestamptz,
	-- reclaimed: a deleted queue whose messages and counters are all gone
	-- (a minute after its deletion, so that a send that read the queue just
	-- before the deletion cannot leave a message behind unseen).
	reclaimed   boolean NOT NULL DEFAULT false
);
CREATE UNIQUE INDEX queues_live_name ON queues (name) WHERE NOT deleted;

CREATE TABLE messages (
	id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	queue_id         bigint NOT NULL,
	state            "char" NOT NULL,
	visible_at       timestamptz NOT NULL,
	lease            bigint NOT NULL DEFAULT 0,
	receive_count    integer NOT NULL DEFAULT 0,
	first_receive_at timestamptz,
	sent_at          timestamptz NOT NULL,
	priority         smallint NOT NULL DEFAULT 0,
	seq              bigint,
	message_id       uuid NOT NULL,
	group_id         text,
	dedup_id         text,
	dl_source        text,
	sender_id        text NOT NULL DEFAULT '',
	attrs            bytea,
	body             text NOT NULL
) WITH (
	fillfactor = 80,
	autovacuum_vacuum_scale_factor = 0.0,
	autovacuum_vacuum_threshold = 5000,
	autovacuum_vacuum_insert_scale_factor = 0.0,
	autovacuum_vacuum_insert_threshold = 20000,
	autovacuum_analyze_scale_factor = 0.02,
	autovacuum_vacuum_cost_delay = 0
);
CREATE INDEX messages_ready ON messages (queue_id, priority DESC, visible_at, id) WHERE state = 'r';
CREATE INDEX messages_timed ON messages (queue_id, visible_at) WHERE state <> 'r';
CREATE INDEX messages_age ON messages (queue_id, sent_at);

CREATE TABLE counts (
	queue_id bigint NOT NULL,
	shard    integer NOT NULL,
	ready    bigint NOT NULL DEFAULT 0,
	inflight bigint NOT NULL DEFAULT 0,
	delayed  bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (queue_id, shard)
) WITH (
	fillfactor = 30,
	autovacuum_vacuum_scale_factor = 0.0,
	autovacuum_vacuum_threshold = 1000,
	autovacuum_vacuum_cost_delay = 0
);
`,
	// 2: FIFO queues. seq is a message's FIFO sequence number (NULL on
	// standard queues), from one sequence: monotonic across queues, restarts
	// and brokers. groups rows are the lock objects of FIFO groups: a send
	// locks its groups' rows (so within a group, sequence order is commit
	// order), a receive locks the rows of the groups it serves (SKIP LOCKED).
	// dedup is the dedup window; attempts the receive-attempt cache, and
	// messages.attempt the attempt that returned a message under its lease.
	`
ALTER TABLE messages ADD COLUMN attempt text;
CREATE INDEX messages_group ON messages (queue_id, group_id, seq) WHERE seq IS NOT NULL;
CREATE SEQUENCE fifo_seq;
CREATE TABLE groups (
	queue_id bigint NOT NULL,
	group_id text COLLATE "C" NOT NULL,
	PRIMARY KEY (queue_id, group_id)
);
CREATE TABLE dedup (
	queue_id   bigint NOT NULL,
	key        bytea NOT NULL, -- plan.DedupKey (may hold a NUL)
	message_id uuid NOT NULL,
	seq        bigint NOT NULL,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (queue_id, key)
);
CREATE INDEX dedup_expiry ON dedup (expires_at);
CREATE TABLE attempts (
	queue_id   bigint NOT NULL,
	attempt_id text COLLATE "C" NOT NULL,
	expires_at timestamptz NOT NULL,
	invalid    boolean NOT NULL DEFAULT false,
	items      jsonb NOT NULL,
	PRIMARY KEY (queue_id, attempt_id)
);
CREATE INDEX attempts_expiry ON attempts (expires_at);
`,
	// 3: message move tasks (movetask.go). A task is one move_tasks row; at
	// most one active (RUNNING or CANCELLING) task per source queue id, which
	// the partial unique index enforces. move_task_items is the task's
	// remaining work: the ids of the messages its source held when it
	// started, in move order (sent_at, id); a step deletes the items it
	// handled in the transaction that moves their messages. due_at is when
	// any broker's runner may take the next step (the pacing, shared by all
	// brokers).
	`
CREATE TABLE move_tasks (
	seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id          text COLLATE "C" NOT NULL,
	source_id   bigint NOT NULL,
	source      text COLLATE "C" NOT NULL,
	dest_id     bigint,
	destination text COLLATE "C" NOT NULL DEFAULT '',
	rate        integer NOT NULL DEFAULT 0,
	status      text NOT NULL,
	moved       bigint NOT NULL DEFAULT 0,
	to_move     bigint NOT NULL DEFAULT 0,
	failure     text NOT NULL DEFAULT '',
	started_at  timestamptz NOT NULL,
	due_at      timestamptz NOT NULL
);
CREATE UNIQUE INDEX move_tasks_active ON move_tasks (source_id) WHERE status IN ('RUNNING', 'CANCELLING');
CREATE INDEX move_tasks_due ON move_tasks (due_at) WHERE status IN ('RUNNING', 'CANCELLING');
CREATE INDEX move_tasks_by_source ON move_tasks (source_id, seq);
CREATE INDEX move_tasks_by_name ON move_tasks (source);
CREATE TABLE move_task_items (
	task    bigint NOT NULL REFERENCES move_tasks (seq) ON DELETE CASCADE,
	sent_at timestamptz NOT NULL,
	msg     bigint NOT NULL,
	PRIMARY KEY (task, sent_at, msg)
);
`,
	// 4: purge generations. A queue's messages, counters, FIFO groups, dedup
	// window and receive attempts are keyed by its mid (message space id),
	// not its id: a purge gives the queue a new mid (from the queues id
	// sequence, so mids never collide with queue ids or each other) and
	// records the old one in purged, whose content the sweeper deletes in
	// bounded batches. A new queue's mid is its id (trigger); receipts,
	// tags, notifications and move tasks keep naming the queue id.
	`
ALTER TABLE queues ADD COLUMN mid bigint;
UPDATE queues SET mid = id;
ALTER TABLE queues ALTER COLUMN mid SET NOT NULL;
CREATE FUNCTION queues_default_mid() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.mid := coalesce(NEW.mid, NEW.id);
	RETURN NEW;
END $$;
CREATE TRIGGER queues_default_mid BEFORE INSERT ON queues FOR EACH ROW EXECUTE FUNCTION queues_default_mid();
CREATE TABLE purged (
	mid       bigint PRIMARY KEY,
	queue_id  bigint NOT NULL,
	purged_at timestamptz NOT NULL
);
`,
	// 5: accounts. A queue is named by (account, name); '' is the broker's
	// own account, which every queue created before belongs to (see
	// model.QueueRef). A move task names its source the same way.
	`
ALTER TABLE queues ADD COLUMN account text COLLATE "C" NOT NULL DEFAULT '';
DROP INDEX queues_live_name;
CREATE UNIQUE INDEX queues_live_name ON queues (account, name) WHERE NOT deleted;
ALTER TABLE move_tasks ADD COLUMN account text COLLATE "C" NOT NULL DEFAULT '';
DROP INDEX move_tasks_by_name;
CREATE INDEX move_tasks_by_name ON move_tasks (account, source);
`,
	// 6: attempts and failures (issue 8, broker/internal/plan/retry.go). attempts is
	// Sluice's attempts count (a receive adds one, a snooze takes it back);
	// NULL, as on every row stored before this migration, reads as
	// receive_count (the two are equal without snoozes), so no row is
	// rewritten: readers say coalesce(attempts, receive_count), writers store
	// it. max_attempts is the message's own Sluice.MaxAttempts (0: its
	// queue's maxReceiveCount); last_receive_at the time of its latest
	// receive; reason the reason of its latest failure. ADD COLUMN with a
	// constant default (or none) changes only the catalog: no table rewrite.
	`
ALTER TABLE messages ADD COLUMN attempts integer;
ALTER TABLE messages ADD COLUMN max_attempts integer NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN last_receive_at timestamptz;
ALTER TABLE messages ADD COLUMN reason text;
`,
	// 7: fair queues (issue 8, broker/internal/plan/fair.go). turn is a standard-queue
	// message's fair-queue turn within its priority level (0 on FIFO
	// queues, and on every row stored before this migration: a constant
	// default changes only the catalog, no row is rewritten). The ready
	// index becomes (priority, turn, ready order): messages_ready_fair
	// replaces messages_ready (FIFO claims pick their rows under group
	// locks and do not use it for order). messages_tenant finds a tenant's
	// latest turn at a level (the end of its index range; the tenant "" is
	// group_id NULL, keyed as '' so that the lookup is an equality), on
	// standard queues only (seq IS NULL: FIFO messages, dead letters of
	// FIFO queues included, have a seq), without the messages in flight: a
	// leased message's turn is at most its level's cursor (its claim raised
	// the cursor to it), where it cannot change NextTurn's answer, and a
	// claim, which is not a HOT update, then adds no entry to this index.
	// cursors holds each level's cursor, sharded like the counters: a claim raises its shard's
	// row of each level it leased to the highest turn it leased there, and
	// a level's cursor is the max over its shards (no new hot row). IF NOT
	// EXISTS: an operator may build the two indexes beforehand with CREATE
	// INDEX CONCURRENTLY (docs/postgres.md).
	`
ALTER TABLE messages ADD COLUMN turn bigint NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS messages_ready_fair ON messages (queue_id, priority DESC, turn, visible_at, id) WHERE state = 'r';
DROP INDEX IF EXISTS messages_ready;
CREATE INDEX IF NOT EXISTS messages_tenant ON messages (queue_id, coalesce(group_id, ''), priority, turn) WHERE seq IS NULL AND state <> 'i';
CREATE TABLE cursors (
	queue_id bigint NOT NULL,
	priority smallint NOT NULL,
	shard    integer NOT NULL,
	cursor   bigint NOT NULL,
	PRIMARY KEY (queue_id, priority, shard)
) WITH (
	fillfactor = 30,
	autovacuum_vacuum_scale_factor = 0.0,
	autovacuum_vacuum_threshold = 1000,
	autovacuum_vacuum_cost_delay = 0
);
`,
	// 8: replays of chosen dead letters, optionally edited (issue 8,
	// model.MoveTaskRequest.MessageIDs and Edit). A replay of chosen dead
	// letters needs no column: its move_task_items are those messages only.
	// edit is an edit-and-replay's model.MessageEdit as JSON (NULL: none);
	// skipped counts the edited messages that did not fit their destination
	// (model.MoveTask.Skipped).
	`
ALTER TABLE move_tasks ADD COLUMN edit jsonb;
ALTER TABLE move_tasks ADD COLUMN skipped bigint NOT NULL DEFAULT 0;
`,
	// 9: the receipt key (issue 12, model.ReceiptCodec): one row, inserted
	// by the first broker that opens the schema (receiptkey.go).
	`
CREATE TABLE receipt_keys (
	id  integer PRIMARY KEY CHECK (id = 1),
	key bytea NOT NULL CHECK (length(key) = 32)
);
`,
	// 10: the consumer streams of every broker (issue 24, consumers.go):
	// each broker replaces its rows at every heartbeat; a row past
	// expires_at is a killed broker's, forgotten by the next heartbeat of
	// any broker. info is the stream's model.ConsumerInfo as JSON.
	`
CREATE TABLE consumers (
	broker     text NOT NULL,
	id         text NOT NULL,
	account    text COLLATE "C" NOT NULL,
	queue      text COLLATE "C" NOT NULL,
	info       jsonb NOT NULL,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (broker, id)
);
CREATE INDEX consumers_queue ON consumers (account, queue);
`,
	// 11: idempotent sends and unique jobs on standard queues (dedup.go): a
	// standard send with a MessageDeduplicationId stores it in dedup_id and
	// its window in dedup (seq 0); DeduplicationUntil=settled looks for the
	// queue's rows that carry an id and no FIFO sequence number
	// (plan.LiveCarrier), through this partial index. No row had such a
	// dedup_id before, so it starts empty (its build still reads the table
	// once, blocking writes to messages meanwhile). IF NOT EXISTS: an
	// operator may build it beforehand with CREATE INDEX CONCURRENTLY
	// (docs/postgres.md). The queue settings are in queues.config (JSON):
	// an existing queue reads them as unset, the defaults.
	`
CREATE INDEX IF NOT EXISTS messages_dedup ON messages (queue_id, dedup_id) WHERE dedup_id IS NOT NULL AND seq IS NULL;
`,
	// 12: the oldest visible message (issue 25, model.QueueStats.OldestVisibleSince):
	// the ready messages of a queue by visible_at, which for a ready message
	// is when it became visible, so that the least of them is the first
	// entry of one index range, however deep the queue (messages_ready_fair
	// is in receive order, where the least visible_at can be anywhere). It
	// gets an entry only when a row becomes ready (a send, a promotion, a
	// nack). IF NOT EXISTS: an operator may build it beforehand with CREATE
	// INDEX CONCURRENTLY (docs/postgres.md).
	`
CREATE INDEX IF NOT EXISTS messages_ready_age ON messages (queue_id, visible_at) WHERE state = 'r';
`,
	// 13: rate limits (issue 25, limits.go): the claims of a queue with a
	// MaxInFlight or MaxReceivesPerSecond lock its queue_limits row (keyed
	// by the queue id, so a purge keeps it), made by the first such claim;
	// rate_at is the rate's instant (plan.RateTaken; NULL: none yet). A
	// table of its own, not a column of queues: a transactional send holds
	// its queue row FOR SHARE until the application commits, which a claim
	// locking or updating that row would wait for (nor does a claim wait
	// for the send's other rows while it holds this one: see txShard and
	// claimFifo). The settings are in
	// queues.config (JSON): an existing queue reads them as unset, the
	// defaults, and has no row here.
	`
CREATE TABLE queue_limits (
	queue_id bigint PRIMARY KEY,
	rate_at  timestamptz
) WITH (
	fillfactor = 30,
	autovacuum_vacuum_scale_factor = 0.0,
	autovacuum_vacuum_threshold = 1000,
	autovacuum_vacuum_cost_delay = 0
);
`,
	// 14: time to live (issue 25, model/config_ttl.go, ttl.go). expires_at
	// is when a message's time to live passes (NULL: it has none, as every
	// row stored before this migration: a column without a default changes
	// only the catalog, no row is rewritten). messages_expiry holds only the
	// rows that have one (partial), so a send without a time to live adds
	// nothing to it and one with a time to live adds one entry (as does
	// every later change of such a row that is not a HOT update: a claim, a
	// lease change). It serves the expiry pass of a receive and of the
	// sweeper (expireDueSQL): a queue's rows by expiry. IF NOT EXISTS: an
	// operator may build it beforehand with CREATE INDEX CONCURRENTLY
	// (docs/postgres.md). The queue settings (MessageTimeToLive,
	// ExpiredMessageAction) are in queues.config (JSON): an existing queue
	// reads them as unset, the defaults.
	`
ALTER TABLE messages ADD COLUMN IF NOT EXISTS expires_at timestamptz;
CREATE INDEX IF NOT EXISTS messages_expiry ON messages (queue_id, expires_at) WHERE expires_at IS NOT NULL;
`,
	// 15: schedules (schedule.go, issue 26): one row per schedule of an
	// account, with its message. next_run is NULL when the spec has no run
	// left; schedules_due finds the earliest run of the schedules that are
	// not paused. A runner's step locks the row (FOR UPDATE SKIP LOCKED),
	// moves next_run and stores the run's message in one transaction.
	`
CREATE TABLE schedules (
	id              text COLLATE "C" PRIMARY KEY,
	account         text COLLATE "C" NOT NULL,
	name            text COLLATE "C" NOT NULL,
	queue           text COLLATE "C" NOT NULL,
	spec            text NOT NULL,
	time_zone       text NOT NULL,
	missed          text NOT NULL,
	body            text NOT NULL,
	attrs           bytea,
	group_id        text NOT NULL DEFAULT '',
	sender_id       text NOT NULL DEFAULT '',
	paused          boolean NOT NULL DEFAULT false,
	created_at      timestamptz NOT NULL,
	next_run        timestamptz,
	last_run        timestamptz,
	last_message_id text NOT NULL DEFAULT '',
	last_error      text NOT NULL DEFAULT '',
	last_error_at   timestamptz,
	sent            bigint NOT NULL DEFAULT 0,
	missed_runs     bigint NOT NULL DEFAULT 0,
	UNIQUE (account, name)
);
CREATE INDEX schedules_due ON schedules (next_run) WHERE NOT paused;
`,
	// 16: job status by id (status.go, issue 26). messages_message_id finds
	// a message of a queue by its id (LookupMessage; DeleteMessages and the
	// replays of chosen dead letters use it too): one more entry per send,
	// never changed (message_id is never updated, so a claim stays a HOT
	// update). message_records holds what a queue with a
	// CompletedRetention keeps of a message that left it
	// (model.MessageRecord: state 'c' completed, 'e' expired, 'p'
	// replayed), until due, when the sweeper deletes it (records_due). IF
	// NOT EXISTS: an operator may build the index beforehand with CREATE
	// INDEX CONCURRENTLY (docs/postgres.md).
	`
CREATE INDEX IF NOT EXISTS messages_message_id ON messages (queue_id, message_id);
CREATE TABLE message_records (
	queue_id    bigint NOT NULL,
	message_id  uuid NOT NULL,
	state       "char" NOT NULL,
	at          timestamptz NOT NULL,
	due         timestamptz NOT NULL,
	attempts    integer NOT NULL DEFAULT 0,
	result      text,
	replayed_as text,
	reason      text,
	PRIMARY KEY (queue_id, message_id)
);
CREATE INDEX records_due ON message_records (due);
`,
	// 17: the archive (archive.go, issue 26): one row per broker archive
	// id, its cursor (archive.Cursor.String: the open file and its size),
	// set in the transaction that deletes the archived rows. The queue
	// setting ArchiveExpired is in queues.config (JSON).
	`
CREATE TABLE archive_cursors (
	archive_id text COLLATE "C" PRIMARY KEY,
	cursor     text NOT NULL
);
`,
	// 18: failure histories (status.go, issue 26). failures is a message's
	// last model.MaxFailures failures and the count of all of them, as
	// {"count": n, "list": [{"reason": r, "at": t}, …]} (pushFailureSQL),
	// written in the statement that sets reason; NULL, as on every row
	// stored before this migration, is no history. ADD COLUMN without a
	// default changes only the catalog: no table rewrite. A record's source
	// is the queue a replayed dead letter came from (MessageRecord.Source),
	// so that its old id asked there answers replayed.
	`
ALTER TABLE messages ADD COLUMN failures jsonb;
ALTER TABLE message_records ADD COLUMN source text;
`,
}

// ErrNewerSchema: the schema was migrated by a newer Sluice, whose tables
// and rows this one may misread; Open refuses it and changes nothing.
var ErrNewerSchema = errors.New("it was migrated by a newer version of Sluice")

// migrate creates the schema and applies the pending migrations. It holds a
// session-level advisory lock (keyed by the schema name) on a dedicated
// connection for the whole run, so brokers starting at once migrate one after
// the other and the later ones find nothing to do.
func migrate(ctx context.Context, cc *pgx.ConnConfig, schema string, log *slog.Logger) error {
	return migrateTo(ctx, cc, schema, log, len(migrations))
}

// migrateTo is migrate up to version (tests build schemas of earlier
// versions with it). A schema newer than version is refused.
func migrateTo(ctx context.Context, cc *pgx.ConnConfig, schema string, log *slog.Logger, version int) error {
	conn, err := pgx.ConnectConfig(ctx, cc.Copy())
	if err != nil {
		return fmt.Errorf("postgres: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	lockKey := "sluice.migrate." + schema
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtext($1))", lockKey); err != nil {
		return fmt.Errorf("postgres: migration lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(hashtext($1))", lockKey) //nolint:errcheck // the session ends anyway
	ident := pgx.Identifier{schema}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+ident); err != nil {
		return fmt.Errorf("postgres: create schema %s: %w", schema, err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+ident+`.migrations (
		version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("postgres: create migrations table: %w", err)
	}
	var have int
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+ident+".migrations").Scan(&have); err != nil {
		return fmt.Errorf("postgres: read schema version: %w", err)
	}
	if have > version {
		return fmt.Errorf("postgres: schema %s is at version %d: %w (this one knows versions up to %d): run that version or a newer one; to go back to this one, restore a backup of the database taken before the upgrade", schema, have, ErrNewerSchema, version)
	}
	if have == 0 && version > 1 {
		// A new schema: every migration in one transaction, one round trip
		// and one commit instead of one per migration (a test suite makes
		// hundreds of schemas). The migrations are the same statements, in
		// the same order, each recorded as applied.
		var script strings.Builder
		script.WriteString("SET LOCAL search_path TO " + ident + ";\n")
		for v := 1; v <= version; v++ {
			script.WriteString(migrations[v-1])
			fmt.Fprintf(&script, ";\nINSERT INTO migrations (version) VALUES (%d);\n", v)
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, script.String(), pgx.QueryExecModeSimpleProtocol)
			return err
		})
		if err != nil {
			return fmt.Errorf("postgres: migrations 1..%d of a new schema: %w", version, err)
		}
		log.Info("schema created", "schema", schema, "version", version)
		return nil
	}
	for v := have + 1; v <= version; v++ {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+ident); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, migrations[v-1]); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO migrations (version) VALUES ($1)", v)
			return err
		})
		if err != nil {
			return fmt.Errorf("postgres: migration %d: %w", v, err)
		}
		log.Info("schema migrated", "schema", schema, "version", v)
	}
	return nil
}
