package embedded

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// The data directory's format version, a record of its own:
//
//	0x01 "fmt"   format version (uint64)
//
// Version 1 is the format before the record existed (a directory without
// it); version 2 adds damage records (damage.go); version 3 adds version-3
// metadata records, which carry a message's expiry (its time to live): an
// older Sluice would read them as corrupt, or, had it read them, deliver
// expired messages. Version-2 records stay valid (messages without a time
// to live), so the upgrade rewrites nothing. Open upgrades an older
// directory by writing the record (recover rewrites version-1 metadata
// records as it reads them), and refuses a directory of a newer version:
// it was written by a newer Sluice, whose records this one may misread.
// A downgrade is not supported.
const (
	formatImplicit = 1 // a directory with no format record
	formatCurrent  = 3
)

var keyFormat = []byte{pfxCounter, 'f', 'm', 't'}

// ErrNewerFormat: the data directory was written by a newer Sluice.
var ErrNewerFormat = fmt.Errorf("the data directory was written by a newer version of Sluice")

// checkFormat reads the directory's format version, refuses a newer one, and
// writes the current one when it is older or absent. It runs in Open before
// recover.
func (b *Backend) checkFormat() error {
	v, err := b.getU64(keyFormat)
	if err != nil {
		return fmt.Errorf("embedded: read the format version: %w", err)
	}
	if v == 0 {
		v = formatImplicit
	}
	switch {
	case v > formatCurrent:
		return fmt.Errorf("embedded: %s: %w (format %d; this one reads formats up to %d): run that version or a newer one; to go back to this one, restore a backup taken before the upgrade", b.dir, ErrNewerFormat, v, formatCurrent)
	case v < formatCurrent:
		// A directory with no record at all is new, not of format 1.
		fresh, err := b.storeEmpty()
		if err != nil {
			return fmt.Errorf("embedded: read the store: %w", err)
		}
		if err := b.db.Set(keyFormat, u64Bytes(formatCurrent), pebble.Sync); err != nil {
			return fmt.Errorf("embedded: write the format version: %w", err)
		}
		if fresh {
			b.log.Info("data directory created", "dir", b.dir, "format", formatCurrent)
		} else {
			b.log.Info("data directory upgraded", "dir", b.dir, "from_format", v, "to_format", formatCurrent)
		}
	}
	return nil
}

// storeEmpty reports whether the store holds no record at all: a data
// directory opened for the first time.
func (b *Backend) storeEmpty() (bool, error) {
	it, err := b.db.NewIter(nil)
	if err != nil {
		return false, err
	}
	empty := !it.First()
	if err := it.Close(); err != nil {
		return false, err
	}
	return empty, nil
}
