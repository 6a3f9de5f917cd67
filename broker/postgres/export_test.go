package postgres

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5"
)

// SweepOnce runs one sweep of b's sweeper now (retention, expired dedup and
// attempt rows, deleted queues, empty FIFO group rows).
func (b *Backend) SweepOnce(ctx context.Context) error {
	_, _, err := b.sweepOnce(ctx)
	return err
}

// SetAfterFifoCandidates makes f run inside every FIFO claim of b, after the
// claim has locked its candidate groups and before it reads their messages.
// Set it before b serves any call.
func (b *Backend) SetAfterFifoCandidates(f func(groups []string)) {
	b.afterFifoCandidates = f
}

// SetAfterSweepTTL makes f run in every sweep of b after its expiries
// (sweepTTL), before the sweep computes its next wake-up; nil removes it.
func (b *Backend) SetAfterSweepTTL(f func()) {
	if f == nil {
		b.afterSweepTTL.Store(nil)
		return
	}
	b.afterSweepTTL.Store(&f)
}

// MigrateTo creates schema at url and migrates it up to version only (a
// schema as an older broker left it).
func MigrateTo(ctx context.Context, url, schema string, version int) error {
	cc, err := pgx.ParseConfig(url)
	if err != nil {
		return err
	}
	return migrateTo(ctx, cc, schema, slog.New(slog.DiscardHandler), version)
}

// DeletesWaiting is how many deletes wait in b's combiner.
func (b *Backend) DeletesWaiting() int {
	c := &b.deleteCombiner
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, l := range c.lines {
		n += len(l.waiting)
	}
	return n
}

// SetsPoolMaxConns exposes setsPoolMaxConns.
var SetsPoolMaxConns = setsPoolMaxConns

// SetArchiveFault makes f run in b's archive steps between the archive's
// sync and the commit; an error from it fails the step there.
func (b *Backend) SetArchiveFault(f func() error) {
	b.mu.Lock()
	b.archiveFault = f
	b.mu.Unlock()
}

// SchemaVersion is the schema version this broker migrates to.
var SchemaVersion = len(migrations)
