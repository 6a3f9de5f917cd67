package embedded

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2"
)

// Backup implements storage.Diagnostics: an online, consistent copy of the
// store (a Pebble checkpoint) in the new directory dir, while the broker
// serves. The copy holds every change acknowledged before Backup began (the
// log is synced first) and is a data directory a broker opens as it is;
// its table files are hard links where dir is on the same file system, so
// it takes little space until the store compacts them away.
func (b *Backend) Backup(ctx context.Context, dir string) error {
	if err := b.enter(ctx); err != nil {
		return err
	}
	defer b.life.Done()
	if err := b.fs.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("embedded: backup into %s: %w", dir, err)
	}
	if err := b.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("embedded: backup into %s: %w", dir, err)
	}
	b.log.Info("backup written", "dir", dir)
	return nil
}
