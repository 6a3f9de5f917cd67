// Package embedded is Sluice's default backend: storage.Backend on an embedded
// Pebble store in one data directory, with the schedule of every queue
// (ready order, leases, delays, retention order) indexed in memory.
//
// # Durability and ordering
//
// Every state change is one Pebble batch written with Sync before the method
// returns. The in-memory index is changed and the batch is handed to Pebble's
// commit pipeline (ApplyNoSyncWait) while Backend.mu is held, so the WAL
// order is the order in which the index changed; the WAL sync is then awaited
// without the lock, so concurrent writers share syncs (group commit). Because
// a WAL sync makes every earlier record durable, an answer that depends on an
// earlier, not yet acknowledged change (a receive of a message whose send is
// still syncing) is only given once that change is durable too.
//
// # Goroutines
//
// Backend.mu guards all in-memory state (queues and their indexes, counters,
// the closed flag, the move tasks, the schedules). Besides the callers'
// goroutines, the backend owns four duties started by Open and stopped by
// Close: the retention sweeper, the space reclaimer (compaction of deleted
// queues' ranges), the move-task runner (movetask.go) and the schedules'
// runner (schedule.go).
package embedded

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/broker/internal/archive"
	"github.com/sluicemq/sluice/broker/internal/deadletter"
	"github.com/sluicemq/sluice/broker/internal/lifecycle"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
)

// Config configures the embedded backend. Start from DefaultConfig.
type Config struct {
	// Dir is the data directory, created if missing. Required; one broker
	// per directory (the store locks it).
	Dir string
	// FS is the filesystem; nil means vfs.Default. Tests pass
	// vfs.NewCrashableMem() to simulate power loss.
	FS vfs.FS
	// CacheBytes is the store's block cache, from which bodies are read on
	// receive: the bound on the memory bodies take. Default 64 MiB; 1 MiB..64 GiB.
	CacheBytes int64
	// DiskReserve is the free space, in bytes, below which sends are
	// refused with model.ErrStoreFull (space.go): DiskReserveAuto (0, the
	// default) is max(64 MiB, 2 % of the file system) capped at a quarter
	// of it; DiskReserveOff (-1) never refuses. See ParseDiskReserve.
	DiskReserve int64
	// Archive is where the retention sweeper writes the messages of
	// ArchiveExpired queues before it removes them (archive.go); a zero
	// Dir: no archive (they are removed, counted as archive failures).
	Archive archive.Config
	// Options are the settings every backend shares (clock, logger,
	// observer).
	storage.Options
}

// DefaultConfig returns a Config with every default set and Dir empty.
func DefaultConfig() Config {
	return Config{CacheBytes: 64 << 20}
}

// withDefaults fills zero fields with DefaultConfig's values.
func (c Config) withDefaults() Config {
	if c.CacheBytes == 0 {
		c.CacheBytes = DefaultConfig().CacheBytes
	}
	c.Options = c.Options.WithDefaults()
	return c
}

// Validate checks a Config whose zero fields were defaulted.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("embedded: Config.Dir is required")
	case c.CacheBytes < 1<<20 || c.CacheBytes > 64<<30:
		return fmt.Errorf("embedded: Config.CacheBytes %d: must be 1 MiB..64 GiB", c.CacheBytes)
	case c.DiskReserve < DiskReserveOff:
		return fmt.Errorf("embedded: Config.DiskReserve %d: must be -1 (off), 0 (auto) or a number of bytes", c.DiskReserve)
	case c.Archive.Enabled():
		if err := c.Archive.Validate(); err != nil {
			return fmt.Errorf("embedded: Config.%w", err)
		}
	}
	return nil
}

// keyBlock is how many message keys are reserved by one durable bump of the
// key ceiling.
const keyBlock = 1 << 16

// Backend is the embedded storage.Backend. Create it with Open.
type Backend struct {
	opts  storage.Options
	clock model.Clock
	log   *slog.Logger
	db    *pebble.DB
	fs    *syncCountFS
	dir   string
	// space refuses sends when the disk is below its reserve (space.go).
	space spaceGuard

	mu         sync.Mutex
	queues     map[model.QueueRef]*queue // by account and name: live queues only
	byID       map[uint64]*queue
	nextQID    uint64 // next queue id to hand out (persisted in keyNextQueueID)
	nextKey    uint64 // next message key
	keyCeiling uint64 // persisted: every key handed out is below it
	// sweepAt is the deadline the retention sweeper sleeps until (Unix ns;
	// 0 = none); a send that expires earlier kicks the sweeper.
	sweepAt int64
	// moves is the move-task state (movetask.go), guarded by mu.
	moves *moveTasks
	// schedules are the schedules by account and name (schedule.go),
	// guarded by mu.
	schedules map[model.ScheduleRef]*model.Schedule
	// dlLog logs the moves to dead-letter queues (rate-limited).
	dlLog *deadletter.Log
	// receipts signs and checks receipt handles with the store's key
	// (receiptkey.go); set by Open, immutable.
	receipts *model.ReceiptCodec

	// life admits the calls and owns the background work: the retention
	// sweeper (sweeper.go), the move-task runner (movetask.go) and the
	// reclaimer; Open starts them, Close stops them.
	life                      *lifecycle.Lifecycle
	sweeper, mover, scheduler lifecycle.Duty
	// archive is the archive of ArchiveExpired queues (nil: none) and
	// archiveCur its cursor as the store holds it; the sweeper's (archive.go).
	archive    *archive.Writer
	archiveCur archive.Cursor
	// archiveFault, a test seam, fails a sweep between the archive's sync
	// and its batch (the store fails, as a crash would stop it).
	archiveFault func() error
	reclaim      chan [2][]byte // ranges whose data was deleted, to compact
	closeOnce    sync.Once
	closeErr     error
	// failed holds the first store write or sync error. Once set, the
	// backend is fail-stop: every call is refused until a restart recovers
	// from the log. (After a failed fsync the kernel may have dropped the
	// dirty pages and a later fsync can succeed without them, and the
	// in-memory index already holds changes the disk may not: answering
	// again would acknowledge what is not durable.)
	failed     atomic.Pointer[error]
	failedOnce chan struct{} // closed when failed is set
}

var _ storage.Backend = (*Backend)(nil)

// Open opens (or creates) the store in cfg.Dir, rebuilds the in-memory index
// from the metadata records, and starts the background duties.
func Open(cfg Config) (*Backend, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts := cfg.Options
	fs := cfg.FS
	if fs == nil {
		fs = vfs.Default
	}
	if err := fs.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, openError("create", cfg.Dir, err)
	}
	pl := newPebbleLogger(opts.Logger)
	noSpace := new(atomic.Bool)                           // set by a background ENOSPC (pebbleEvents), read by the space guard
	stalled := new(atomic.Bool)                           // set during a write stall (pebbleEvents), read by the space guard
	if err := createNewest(fs, cfg.Dir, pl); err != nil { // logcheck.go
		return nil, openError("create store in", cfg.Dir, err)
	}
	if err := checkLogs(fs, cfg.Dir); err != nil {
		return nil, err
	}
	cfs := &syncCountFS{FS: fs, observer: opts.Observer}
	cache := pebble.NewCache(cfg.CacheBytes)
	defer cache.Unref()
	db, err := pebble.Open(cfg.Dir, &pebble.Options{
		FS:                 cfs,
		Cache:              cache,
		Logger:             pl,
		EventListener:      pebbleEvents(pl, noSpace, stalled),
		FormatMajorVersion: pebble.FormatNewest,
	})
	if err != nil {
		return nil, openError("open store in", cfg.Dir, err)
	}
	b := &Backend{
		opts: opts, clock: opts.Clock, log: opts.Logger, db: db, fs: cfs, dir: cfg.Dir,
		queues: map[model.QueueRef]*queue{}, byID: map[uint64]*queue{},
		life: lifecycle.New(), failedOnce: make(chan struct{}),
		reclaim: make(chan [2][]byte, 64),
		dlLog:   &deadletter.Log{Log: opts.Logger, Clock: opts.Clock, Observer: opts.Observer},
	}
	b.space = spaceGuard{b: b, reserve: cfg.DiskReserve, noSpace: noSpace, stalled: stalled, fullDepth: -1}
	if err := b.checkFormat(); err != nil {
		_ = db.Close()
		return nil, err
	}
	if b.receipts, err = b.loadReceipts(); err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := b.recover(); err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := b.recoverMoveTasks(); err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := b.recoverSchedules(); err != nil {
		_ = db.Close()
		return nil, err
	}
	if cfg.Archive.Enabled() {
		if err := b.openArchive(cfg.Archive); err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	b.sweeper = lifecycle.Duty{Name: "retention sweeper", Clock: b.clock, Logger: b.log, Idle: sweepIdle, Step: b.sweepStep}
	b.mover = lifecycle.Duty{Name: "move tasks", Clock: b.clock, Logger: b.log, Idle: moveIdle, Step: b.moveTick}
	b.life.Start(&b.sweeper)
	b.scheduler = lifecycle.Duty{Name: "schedules", Clock: b.clock, Logger: b.log, Idle: scheduleIdle, Retry: scheduleRetry,
		MaxRetry: 3 * scheduleRetry, Step: b.scheduleTick} // a failure's wait stays below a run's minute of grace
	b.life.Start(&b.mover)
	b.life.Start(&b.scheduler)
	b.life.Go(b.reclaimLoop)
	return b, nil
}

// Errors of Open, matched with errors.Is, for callers that tell the user what
// to do about them.
var (
	// ErrDirLocked: another broker (or this process) holds the data
	// directory's lock: one broker per directory.
	ErrDirLocked = errors.New("the data directory is in use by another broker")
	// ErrDirNotWritable: the data directory cannot be created or written: no
	// permission, a read-only file system, or a path through a regular file.
	ErrDirNotWritable = errors.New("the data directory is not writable")
)

// openError wraps an error of Open with ErrDirLocked or ErrDirNotWritable
// when it is one of those.
func openError(what, dir string, err error) error {
	switch {
	case dirLocked(err):
		return fmt.Errorf("embedded: %s %s: %w: %w", what, dir, ErrDirLocked, err)
	case dirNotWritable(err):
		return fmt.Errorf("embedded: %s %s: %w: %w", what, dir, ErrDirNotWritable, err)
	}
	return fmt.Errorf("embedded: %s %s: %w", what, dir, err)
}

// dirLocked reports whether err is Pebble's lock on the directory being held:
// fcntl's EAGAIN (or EACCES, which POSIX allows) on the LOCK file, or the lock
// already held in this process. A LOCK file that cannot be created at all
// fails with a *fs.PathError instead: that is dirNotWritable.
func dirLocked(err error) bool {
	var pe *fs.PathError
	switch {
	case strings.Contains(err.Error(), "lock held by current process"):
		return true
	case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EWOULDBLOCK):
		return true
	case errors.Is(err, syscall.EACCES) && !errors.As(err, &pe):
		return true
	}
	return false
}

// dirNotWritable reports whether err says the directory cannot be created or
// written.
func dirNotWritable(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.ENOTDIR)
}

// Close ends waiting receives with model.ErrClosed, waits for the calls in
// progress, stops the background work (lifecycle.Lifecycle's order) and closes
// the store (every change is already synced). It is idempotent.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		b.life.Close()
		if b.failed.Load() != nil {
			// The WAL is broken: Pebble cannot flush or rotate it (it would
			// panic). Close without a flush; the next Open recovers from
			// what reached the disk.
			b.closeErr = closeBroken(b.db)
			return
		}
		if err := b.db.Flush(); err != nil {
			b.log.Error("flush at close", "err", err)
		}
		b.closeErr = b.db.Close()
	})
	if b.archive != nil {
		_ = b.archive.Close()
	}
	return b.closeErr
}

// Syncs implements storage.Diagnostics: the number of WAL syncs done so
// far (the number of operations divided by it is the group-commit figure).
func (b *Backend) Syncs() (uint64, bool) { return b.fs.syncs.Load(), true }

// Ping implements storage.Diagnostics: a read of the store's queue records
// (one at most).
func (b *Backend) Ping(ctx context.Context) error {
	_, err := b.ListQueues(ctx, "", "", "", 1)
	return err
}

// PoolStats implements storage.Diagnostics: the embedded store has no
// connection pool.
func (b *Backend) PoolStats() (model.PoolStats, bool) { return model.PoolStats{}, false }

// Backups implements storage.Diagnostics: the store takes online backups
// (Backup).
func (b *Backend) Backups() bool { return true }

// Clock implements storage.Backend.
func (b *Backend) Clock() model.Clock { return b.clock }

// enter admits a call (b.life.Enter); it fails with ErrClosed once Close
// began or the store failed. The caller must call b.life.Done when it no
// longer touches the store.
func (b *Backend) enter(ctx context.Context) error {
	if err := b.life.Enter(ctx); err != nil {
		return err
	}
	if err := b.failure(); err != nil {
		b.life.Done()
		return err
	}
	if err := b.space.stalledRefusal(); err != nil {
		b.life.Done()
		return err
	}
	return nil
}

// refusal is why no call may go on now: Close began, or the store
// failed (fail-stop); nil otherwise. (b.mu need not be held.)
func (b *Backend) refusal() error {
	if b.life.Closed() {
		return model.ClosedError()
	}
	return b.failure()
}

// failure is the fail-stop refusal after a store failure, nil before one.
func (b *Backend) failure() error {
	if err := b.failed.Load(); err != nil {
		return model.Errorf(model.ErrClosed,
			"The store failed to write or sync (%v): this broker refuses requests until it is restarted, which recovers from its log.", *err)
	}
	return nil
}

// closeBroken closes a store whose WAL failed; Pebble may panic on the
// broken log, which is reported as an error.
func closeBroken(db *pebble.DB) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("embedded: close after a store failure: %v", r)
		}
	}()
	return db.Close()
}

// fail records the first store write or sync error (see Backend.failed).
func (b *Backend) fail(err error) {
	if b.failed.CompareAndSwap(nil, &err) {
		b.log.Error("store failed: refusing every request until restart", "err", err)
		close(b.failedOnce)
	}
}

// Failed is closed when the store has failed (a write or sync error): the
// backend then refuses every call, and the process should restart to
// recover from the log (sluice serve exits with status 1).
func (b *Backend) Failed() <-chan struct{} { return b.failedOnce }

// applyLocked hands batch to Pebble's commit pipeline; b.mu must be held, so
// that the WAL order is the order of the index changes. The caller then calls
// wait (without the lock) before answering.
func (b *Backend) applyLocked(batch *pebble.Batch) error {
	if batch.Empty() {
		return nil
	}
	b.fs.committed()
	if err := b.db.ApplyNoSyncWait(batch, pebble.Sync); err != nil {
		err = fmt.Errorf("embedded: write: %w", err)
		b.fail(err)
		return err
	}
	return nil
}

// update is the shape of every change to one queue: it runs fn on the live
// queue name under b.mu with a fresh batch, hands the batch to the store's
// commit pipeline while still holding the lock (so the WAL order is the
// index order), and waits for the sync without it. fn returning an error
// discards the batch; fn must then have changed nothing.
func (b *Backend) update(ctx context.Context, name model.QueueRef, fn func(q *queue, batch *pebble.Batch) error) error {
	if err := b.enter(ctx); err != nil {
		return err
	}
	defer b.life.Done()
	batch := b.db.NewBatch()
	b.mu.Lock()
	q := b.queues[name]
	if q == nil {
		b.mu.Unlock()
		_ = batch.Close()
		return model.QueueNotFoundError()
	}
	if err := fn(q, batch); err != nil {
		b.mu.Unlock()
		_ = batch.Close()
		return err
	}
	syncEarlierToo(batch)
	err := b.applyLocked(batch)
	b.mu.Unlock()
	return b.wait(batch, err)
}

// syncEarlierToo makes an empty batch a WAL record of its own, so that
// waiting for it waits for the earlier changes too: an answer that writes
// nothing may still report one of them (a delete or a dedup window entry
// made by a call whose sync is under way), and must not be given before it
// is durable. b.mu must be held.
func syncEarlierToo(batch *pebble.Batch) {
	if batch.Empty() {
		_ = batch.LogData(nil, nil)
	}
}

// wait waits for batch's WAL sync (after applyLocked) and releases it.
func (b *Backend) wait(batch *pebble.Batch, applyErr error) error {
	if applyErr != nil || batch.Empty() {
		_ = batch.Close()
		return applyErr
	}
	err := batch.SyncWait()
	_ = batch.Close()
	if err != nil {
		err = fmt.Errorf("embedded: sync: %w", err)
		b.fail(err)
		return err
	}
	return nil
}

// allocKey hands out a message key; when the ceiling is reached, the bump is
// written in batch (which must be applied before any key of it is used).
func (b *Backend) allocKey(batch *pebble.Batch) uint64 {
	if b.nextKey >= b.keyCeiling {
		b.keyCeiling = b.nextKey + keyBlock
		_ = batch.Set(keyKeyCeiling, u64Bytes(b.keyCeiling), nil)
	}
	k := b.nextKey
	b.nextKey++
	return k
}

func (b *Backend) now() int64 { return nanos(b.clock.Now()) }

// pebbleLogger routes Pebble's logs to the injected slog logger. Its
// errors are rate-limited: Pebble retries a failed flush or compaction at
// once and logs each failure (with no file descriptor left, a million lines
// a minute), so each error of one form is logged at most once every
// errorLogEvery, with the count of those left out.
type pebbleLogger struct {
	l   *slog.Logger
	lim *repeatLimiter
}

func newPebbleLogger(l *slog.Logger) pebbleLogger {
	return pebbleLogger{l: l, lim: &repeatLimiter{last: map[string]repeatState{}}}
}

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	left, ok := p.lim.allow(format, time.Now())
	if !ok {
		return
	}
	if left > 0 {
		p.l.Error(fmt.Sprintf(format, args...), "component", "pebble", "repeated", left)
		return
	}
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

// errorLogEvery is how often one form of a Pebble error is logged at most.
const errorLogEvery = 10 * time.Second

// repeatLimiter lets one line of each form through every errorLogEvery.
type repeatLimiter struct {
	mu   sync.Mutex
	last map[string]repeatState
}

type repeatState struct {
	at   time.Time
	left int // lines of the form left out since at
}

// allow reports whether a line of form may be logged at now, and how many
// of its form were left out since the last one logged.
func (r *repeatLimiter) allow(form string, now time.Time) (left int, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st, seen := r.last[form]
	if seen && now.Sub(st.at) < errorLogEvery {
		st.left++
		r.last[form] = st
		return 0, false
	}
	if len(r.last) >= 1024 { // forms are format strings, a bounded set; a guard all the same
		clear(r.last)
	}
	r.last[form] = repeatState{at: now}
	return st.left, true
}

func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg, "component", "pebble", "fatal", true)
	panic(msg)
}
