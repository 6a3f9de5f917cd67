// Package postgres is the storage.Backend for several stateless brokers that
// share one PostgreSQL database. Every queue, message, lease and counter
// lives in PostgreSQL; a broker holds only connections, its local waiters
// and its background duties.
//
// # Concurrency model
//
// Every change is one short READ COMMITTED statement or transaction; nothing
// is held across a long poll. Receives claim with SELECT ... FOR UPDATE SKIP
// LOCKED and update the claimed rows in the same statement, so two brokers
// never lease the same message at once. Every lease change (delete, change
// of visibility) names the lease version it expects in its WHERE clause: a
// stale receipt matches no row and never wins. SERIALIZABLE is never used.
//
// # Time
//
// All time arithmetic happens in SQL, on the database clock, so brokers with
// skewed wall clocks agree on every deadline. The instant "now" of a
// statement is coalesce($1, now()): $1 is NULL with the real clock (so the
// database's now() rules) and the test clock's reading with a test clock (a
// model.Clock with an Offset method, such as *clocktest.FakeClock). Passing the
// reading itself is now() plus the clock's offset computed at the database's
// own instant, which keeps boundary tests exact: an offset measured in Go
// and added to a later now() would be off by the round-trip time.
//
// # Counters
//
// The approximate counts are maintained, never scanned: table counts holds
// per queue (per mid: see PurgeQueue) rows of (ready, inflight, delayed) deltas whose sums
// are the number of messages in each stored state. Every statement that
// changes a message's stored state adds its deltas to one shard in the
// same transaction, so the sums are exact at every commit while concurrent
// writers rarely wait on the same counter row: a broker's statement to one of
// countShards picked at random, a transactional send (SendTx), which holds its
// row until the application commits, to one of countShards more that no
// broker statement picks (txShard). Invariant (deadlock freedom):
// a transaction updates counters last, after every message row lock it
// takes, and updates several counter rows in (queue_id, shard) order.
//
// # Purges
//
// A queue's content (messages, counters, FIFO groups, dedup window, receive
// attempts) is keyed by its mid, not its id. PurgeQueue replaces the mid in
// one short transaction, which hides everything sent before it at once; the
// sweeper deletes the old content in bounded batches (queues.go, sweeper.go).
//
// # Goroutines
//
// Open starts five duties, stopped by Close: the listener (one dedicated
// connection LISTENing for other brokers' wake-ups), the notifier (one
// dedicated connection sending coalesced NOTIFYs after commits), the
// sweeper (retention and the reclaiming of deleted queues' and purged
// messages, on the injected clock), the move-task runner (movetask.go) and
// the schedules' runner (schedule.go); the last three are lifecycle.Duty
// loops.
package postgres

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicemq/sluice/broker/internal/archive"
	"github.com/sluicemq/sluice/broker/internal/deadletter"
	"github.com/sluicemq/sluice/broker/internal/lifecycle"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
)

// Config configures the PostgreSQL backend. Start from DefaultConfig.
type Config struct {
	// URL is the PostgreSQL connection string (postgres://user@host:port/db
	// or key=value form). Required.
	URL string
	// Schema holds Sluice's tables; it is created and migrated at Open.
	// Default "sluice"; letters, digits and underscores, at most 63 bytes.
	Schema string
	// Options are the settings every backend shares (clock, logger, and
	// the observer of dead-letter moves).
	storage.Options
	// MaxConns is the connection pool size, besides the two dedicated
	// connections (listener, notifier). Default 16; 1..1000. A
	// pool_max_conns parameter in URL (pgxpool's own) overrides it, so
	// that `sluice serve --store` can size the pool.
	MaxConns int32
	// StatementTimeout is the sessions' statement_timeout. Default 30 s; >= 1 s.
	StatementTimeout time.Duration
	// AnswerTimeout is how long a statement of the pool may go unanswered
	// before the broker gives up on it and its connection (deadline.go): a
	// PostgreSQL behind a partition that keeps the connection open would
	// otherwise hold the request for ever. The request then answers
	// ServiceUnavailable. Default 5 s; 100 ms..10 min; a StatementTimeout
	// shorter than it is the deadline instead. (The
	// server's own statement_timeout cannot help: the server never hears.)
	AnswerTimeout time.Duration
	// IdleInTxTimeout is the sessions' idle_in_transaction_session_timeout:
	// a broker that stalls inside a transaction must not pin the xmin horizon
	// (and so block vacuum) for long. Default 10 s; >= 1 s.
	IdleInTxTimeout time.Duration
	// PollInterval is how often, on the clock, a waiting receive re-checks
	// its queue even without a wake-up: notifications are hints, polling is
	// the source of truth. Default 1 s; 10 ms..20 s.
	PollInterval time.Duration

	// listenCheck replaces listenCheck (notify.go) when set: tests only.
	listenCheck time.Duration
	// NotifyInterval is the least real time between two NOTIFYs of this
	// broker (the coalescing window). Default 5 ms; 0..1 s.
	NotifyInterval time.Duration
	// QueryTracer, when not nil, is told every statement and batch the pool's
	// connections send (pgx's tracer interfaces: a pgx.BatchTracer too is
	// told batches), not the listening and notifying connections'. Tests
	// count a receive's round trips with it. Default nil.
	QueryTracer pgx.QueryTracer
	// Archive is where this broker's sweeper writes the messages of
	// ArchiveExpired queues whose retention it ends (archive.go); a zero
	// Dir: no archive (they are removed, counted as archive failures).
	// Brokers sharing a directory need distinct Archive.IDs.
	Archive archive.Config
}

// DefaultConfig returns a Config with every default set and URL empty.
func DefaultConfig() Config {
	return Config{
		Schema:           "sluice",
		MaxConns:         16,
		StatementTimeout: 30 * time.Second,
		AnswerTimeout:    5 * time.Second,
		IdleInTxTimeout:  10 * time.Second,
		PollInterval:     time.Second,
		NotifyInterval:   5 * time.Millisecond,
	}
}

var schemaRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// withDefaults fills zero fields with DefaultConfig's values.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Schema == "" {
		c.Schema = d.Schema
	}
	if c.MaxConns == 0 {
		c.MaxConns = d.MaxConns
	}
	if c.StatementTimeout == 0 {
		c.StatementTimeout = d.StatementTimeout
	}
	if c.IdleInTxTimeout == 0 {
		c.IdleInTxTimeout = d.IdleInTxTimeout
	}
	if c.AnswerTimeout == 0 {
		c.AnswerTimeout = d.AnswerTimeout
	}
	if c.PollInterval == 0 {
		c.PollInterval = d.PollInterval
	}
	if c.NotifyInterval == 0 {
		c.NotifyInterval = d.NotifyInterval
	}
	c.Options = c.Options.WithDefaults()
	return c
}

// Validate checks a Config whose zero fields were defaulted.
func (c Config) Validate() error {
	switch {
	case c.URL == "":
		return errors.New("postgres: Config.URL is required")
	case !schemaRe.MatchString(c.Schema):
		return fmt.Errorf("postgres: Config.Schema %q: use 1..63 letters, digits or underscores, not starting with a digit", c.Schema)
	case c.MaxConns < 1 || c.MaxConns > 1000:
		return fmt.Errorf("postgres: Config.MaxConns %d: must be 1..1000", c.MaxConns)
	case c.StatementTimeout < time.Second:
		return fmt.Errorf("postgres: Config.StatementTimeout %v: must be at least 1s", c.StatementTimeout)
	case c.AnswerTimeout < 100*time.Millisecond || c.AnswerTimeout > 10*time.Minute:
		return fmt.Errorf("postgres: Config.AnswerTimeout %v: must be 100ms..10m", c.AnswerTimeout)
	case c.IdleInTxTimeout < time.Second:
		return fmt.Errorf("postgres: Config.IdleInTxTimeout %v: must be at least 1s", c.IdleInTxTimeout)
	case c.PollInterval < 10*time.Millisecond || c.PollInterval > model.MaxWaitTime:
		return fmt.Errorf("postgres: Config.PollInterval %v: must be 10ms..20s", c.PollInterval)
	case c.NotifyInterval < 0 || c.NotifyInterval > time.Second:
		return fmt.Errorf("postgres: Config.NotifyInterval %v: must be 0..1s", c.NotifyInterval)
	case c.Archive.Enabled():
		if err := c.Archive.Validate(); err != nil {
			return fmt.Errorf("postgres: Config.%w", err)
		}
	}
	return nil
}

// setsPoolMaxConns reports whether a connection string sets pgxpool's
// pool_max_conns, as pgx itself parses it (URL or keyword/value string,
// service files included).
func setsPoolMaxConns(conn string) bool {
	cc, err := pgconn.ParseConfig(conn)
	if err != nil {
		return false
	}
	_, ok := cc.RuntimeParams["pool_max_conns"]
	return ok
}

// Backend is the PostgreSQL storage.Backend. Create it with Open.
type Backend struct {
	cfg   Config
	clock model.Clock
	log   *slog.Logger
	pool  *pgxpool.Pool
	// archive is this broker's archive (nil: none), archiveID its id,
	// archiveCur the cursor it last stored or read, and archiveUnsure set
	// when an archive step's commit failed after its append (the next step
	// reads the cursor first); the sweeper's (archive.go). archiveFault, a
	// test seam under mu, fails a step between the archive's sync and its
	// commit.
	archive       *archive.Writer
	archiveID     string
	archiveCur    archive.Cursor
	archiveUnsure bool
	// archiveForeignLogged: the last log line of a cursor moved by another
	// broker (archive.go; at most one a minute).
	archiveForeignLogged time.Time
	archiveFault         func() error
	// testClock is set when the clock has an Offset method: statements then
	// take the clock's reading as their "now" (see the package comment).
	testClock bool
	// listenLost counts the listening connection's losses (notify.go).
	listenLost atomic.Int64
	// id tells this broker's NOTIFYs apart from other brokers'.
	id      string
	channel string // the LISTEN/NOTIFY channel of this schema
	// receipts signs and checks receipt handles with the schema's key
	// (receiptkey.go); set by Open, immutable.
	receipts *model.ReceiptCodec

	waiters  waiters
	notifier *notifier
	// sendCache holds the queue rows of this broker's sends (sendOn).
	sendCache queueCache
	// deleteCombiner combines concurrent deletes on one queue (Delete).
	deleteCombiner combiner[model.QueueRef, *deleteJob]
	// dlLog logs the moves to dead-letter queues (rate-limited).
	dlLog *deadletter.Log

	mu sync.Mutex
	// life admits the calls and owns the background work: the listener,
	// the notifier, the sweeper (sweeper.go), the move-task runner
	// (movetask.go) and the schedules' runner (schedule.go); Open starts
	// them, Close stops them.
	life                      *lifecycle.Lifecycle
	sweeper, mover, scheduler lifecycle.Duty
	sweepAt                   time.Time // when the sweeper's timer fires (guarded by mu)
	closeOnce                 sync.Once

	// afterFifoCandidates, when set (tests only, before any call), runs in
	// claimFifo after the candidate groups are locked, before their messages
	// are read.
	afterFifoCandidates func(groups []string)
	// afterSweepTTL, when set (tests only; at any time), runs in every sweep
	// after sweepTTL, before the next wake-up is computed.
	afterSweepTTL atomic.Pointer[func()]
}

var _ storage.Backend = (*Backend)(nil)

// Open connects, creates or migrates the schema (under an advisory lock, so
// that several brokers may start at once) and starts the duties.
func Open(ctx context.Context, cfg Config) (*Backend, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse URL: %w", err)
	}
	if !setsPoolMaxConns(cfg.URL) {
		pcfg.MaxConns = cfg.MaxConns
	} else if pcfg.MaxConns > 1000 {
		return nil, fmt.Errorf("postgres: pool_max_conns %d in the URL: must be 1..1000", pcfg.MaxConns)
	}
	rp := pcfg.ConnConfig.RuntimeParams
	rp["search_path"] = pgx.Identifier{cfg.Schema}.Sanitize()
	rp["statement_timeout"] = strconv.FormatInt(cfg.StatementTimeout.Milliseconds(), 10)
	rp["idle_in_transaction_session_timeout"] = strconv.FormatInt(cfg.IdleInTxTimeout.Milliseconds(), 10)
	if rp["application_name"] == "" {
		rp["application_name"] = "sluice"
	}
	if err := migrate(ctx, pcfg.ConnConfig, cfg.Schema, cfg.Logger); err != nil {
		return nil, err
	}
	if pcfg.PingTimeout == 0 { // not set by the URL (pool_ping_timeout)
		// The pool pings a connection idle for a while before it hands it
		// out; a ping has no tracer, so it gets the answer deadline here
		// (without one, an acquire behind a partition waited for ever).
		pcfg.PingTimeout = min(cfg.AnswerTimeout, cfg.StatementTimeout)
	}
	if pcfg.ConnConfig.ConnectTimeout == 0 {
		// A connection that does not come up within the answer deadline
		// fails (deadline.go), unless the URL sets connect_timeout.
		pcfg.ConnConfig.ConnectTimeout = min(cfg.AnswerTimeout, cfg.StatementTimeout)
	}
	// Keepalives and a user timeout on every connection (dial.go); a URL
	// cannot name a dial function, so this replaces pgconn's default one.
	pcfg.ConnConfig.DialFunc = dialer(min(cfg.AnswerTimeout, cfg.StatementTimeout))
	dedicated := pcfg.ConnConfig.Copy() // the listener's and notifier's: untraced
	pcfg.ConnConfig.Tracer = deadlineTracer{inner: cfg.QueryTracer, d: min(cfg.AnswerTimeout, cfg.StatementTimeout)}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	var syncCommit string
	if err := pool.QueryRow(ctx, "SHOW synchronous_commit").Scan(&syncCommit); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	receipts, err := loadReceipts(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	if syncCommit == "off" {
		cfg.Logger.Warn("synchronous_commit is off: a PostgreSQL crash can lose messages whose send was acknowledged",
			"synchronous_commit", syncCommit)
	}
	var idb [8]byte
	_, _ = rand.Read(idb[:])
	b := &Backend{
		cfg: cfg, clock: cfg.Clock, log: cfg.Logger, pool: pool,
		id: hex.EncodeToString(idb[:]), channel: channelName(cfg.Schema),
		life: lifecycle.New(), receipts: receipts,
		deleteCombiner: combiner[model.QueueRef, *deleteJob]{width: combineWidth, maxJobs: maxCombinedDeletes},
	}
	_, b.testClock = cfg.Clock.(model.OffsetClock)
	b.dlLog = &deadletter.Log{Log: b.log, Clock: b.clock, Observer: cfg.Observer}
	b.waiters.init()
	b.notifier = newNotifier(b, dedicated)
	if cfg.Archive.Enabled() {
		if err := openArchive(ctx, b, pool, cfg.Archive); err != nil {
			pool.Close()
			return nil, err
		}
	}
	b.sweeper = lifecycle.Duty{Name: "sweeper", Clock: b.clock, Logger: b.log, Idle: sweepIdle, Step: b.sweepStep}
	b.mover = lifecycle.Duty{Name: "move tasks", Clock: b.clock, Logger: b.log, Idle: moveIdle,
		Retry: cfg.PollInterval, Step: b.moveTick}
	b.life.Go(func(ctx context.Context) { b.listenLoop(ctx, dedicated) })
	b.life.Go(b.notifier.loop)
	b.scheduler = lifecycle.Duty{Name: "schedules", Clock: b.clock, Logger: b.log, Idle: scheduleIdle,
		Retry: cfg.PollInterval, MaxRetry: 30 * time.Second, Step: b.scheduleTick} // below a run's minute of grace
	b.life.Start(&b.sweeper)
	b.life.Start(&b.mover)
	b.life.Start(&b.scheduler)
	return b, nil
}

// Close ends waiting receives with model.ErrClosed, waits for the calls in
// progress, stops the background work (lifecycle.Lifecycle's order) and closes
// the connections. Idempotent.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		b.life.Close()
		b.deleteCombiner.drain()
		b.pool.Close()
		if b.archive != nil {
			_ = b.archive.Close()
		}
	})
	return nil
}

// channelName is the LISTEN/NOTIFY channel of schema: "sluice_" and the
// schema name, or, when that would pass PostgreSQL's 63-byte identifier limit
// (pg_notify refuses a longer channel name while LISTEN truncates it),
// "sluice_" and a hash of the schema name.
func channelName(schema string) string {
	if c := "sluice_" + schema; len(c) <= 63 {
		return c
	}
	sum := sha256.Sum256([]byte(schema))
	return "sluice_" + hex.EncodeToString(sum[:16])
}

// enter admits a call (b.life.Enter); it fails with ErrClosed once Close
// began or when ctx is done. The caller must call b.life.Done when done.
func (b *Backend) enter(ctx context.Context) error { return b.life.Enter(ctx) }

// tnow is the $1 of every statement: the test clock's reading, or nil (SQL
// NULL) so that the statement uses the database's now(). See nowSQL.
func (b *Backend) tnow() any {
	if b.testClock {
		return b.clock.Now()
	}
	return nil
}

// tnowAt is tnow for a clock reading taken earlier (test clock only; nil,
// the database's now(), with the real clock).
func (b *Backend) tnowAt(at time.Time) any {
	if b.testClock {
		return at
	}
	return nil
}

// nowSQL is the statement's instant. Every statement that computes with time
// takes the instant as $1 (see tnow).
const nowSQL = "coalesce($1::timestamptz, now())"

// micros renders a duration as a bigint of microseconds for SQL, where it is
// turned into an interval by "* interval '1 microsecond'".
func micros(d time.Duration) int64 { return d.Microseconds() }

// dbErr wraps a database failure; context errors pass through unchanged so
// callers can match them.
func dbErr(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("postgres: %s: %w", op, err)
}

// retryable reports whether err is a deadlock or serialization failure, after
// which the whole statement or transaction may be run again.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// retry runs f until it succeeds, fails with a non-retryable error, or has
// failed 5 times (deadlocks are rare: lock orders are fixed, see the package
// comment, but batch statements may lock rows in plan order).
func retry(f func() error) error {
	var err error
	for i := 0; i < 5; i++ {
		if err = f(); !retryable(err) {
			return err
		}
	}
	return err
}

// Ping implements storage.Diagnostics: a round trip on the pool.
func (b *Backend) Ping(ctx context.Context) (err error) {
	defer unavailable(ctx, &err)
	if err := b.enter(ctx); err != nil {
		return err
	}
	defer b.life.Done()
	if err := b.pool.Ping(ctx); err != nil {
		return dbErr("ping", err)
	}
	return nil
}

// PoolStats implements storage.Diagnostics: the pool's figures (the
// listener's and notifier's dedicated connections are not in it).
func (b *Backend) PoolStats() (model.PoolStats, bool) {
	s := b.pool.Stat()
	return model.PoolStats{
		Max: int(s.MaxConns()), Total: int(s.TotalConns()), Acquired: int(s.AcquiredConns()), Idle: int(s.IdleConns()),
		Acquires: s.AcquireCount(), EmptyAcquires: s.EmptyAcquireCount(), AcquireWait: s.AcquireDuration(),
	}, true
}

// answerTimeout is the deadline of a statement of the pool (deadline.go),
// which the dedicated connections' statements get too (notify.go).
func (b *Backend) answerTimeout() time.Duration {
	return min(b.cfg.AnswerTimeout, b.cfg.StatementTimeout)
}

// never is a channel that is never closed: Failed's answer.
var never = make(chan struct{})

// Failed implements storage.Diagnostics: the PostgreSQL backend never
// fail-stops (a database that cannot be reached makes calls fail with
// ErrUnavailable until it can again).
func (b *Backend) Failed() <-chan struct{} { return never }

// Syncs implements storage.Diagnostics: PostgreSQL's log is the server's,
// not the broker's.
func (b *Backend) Syncs() (uint64, bool) { return 0, false }

// Backups implements storage.Diagnostics: the database is backed up with
// PostgreSQL's own tools (docs/postgres.md).
func (b *Backend) Backups() bool { return false }

// Backup implements storage.Diagnostics: never (Backups).
func (b *Backend) Backup(context.Context, string) error { return model.BackupsUnsupportedError() }

// Clock implements storage.Backend.
func (b *Backend) Clock() model.Clock { return b.clock }

// StoreSize implements storage.Sizer: the database's size
// (pg_database_size of the current database, the other schemas' tables
// included). The database server's free disk is not the broker's to see.
func (b *Backend) StoreSize(ctx context.Context) (s model.StoreSize, err error) {
	defer unavailable(ctx, &err)
	if err := b.enter(ctx); err != nil {
		return model.StoreSize{}, err
	}
	defer b.life.Done()
	s.Kind = "postgres"
	if err := b.pool.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&s.SizeBytes); err != nil {
		return model.StoreSize{}, dbErr("reading the database size", err)
	}
	return s, nil
}
