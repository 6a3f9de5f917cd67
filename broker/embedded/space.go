package embedded

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// Full disk.
//
// Pebble cannot recover from a disk that filled up under it: a flush that
// meets ENOSPC is retried forever, the memtables fill, and every write then
// waits in the commit pipeline, while the writer holds Backend.mu, so every
// request hangs, receives included. So the backend never lets the disk fill:
// each send first asks the file system for the data directory's free space
// (one statfs through the vfs) and is refused with model.ErrStoreFull when
// it is below the reserve. Only sends are refused: receives, deletes and
// visibility changes write little and free space (a body's single delete lets a
// flush or compaction drop it), so they go on. Sends resume by themselves as
// soon as space returns; there is no state to reset.

// Special values of Config.DiskReserve.
const (
	// DiskReserveAuto (the zero value): max(64 MiB, 2 % of the file system),
	// but at most a quarter of it, so that a small file system is usable.
	DiskReserveAuto int64 = 0
	// DiskReserveOff: never refuse a send for want of space.
	DiskReserveOff int64 = -1
)

// ParseDiskReserve reads a reserve as the --disk-reserve flag takes it:
// "auto", "off" (or "0"), a number of bytes, or a number with a unit
// (KiB, MiB, GiB, TiB; KB, MB, GB, TB; k, m, g, t as powers of 1024).
func ParseDiskReserve(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToLower(s))
	switch t {
	case "", "auto":
		return DiskReserveAuto, nil
	case "off", "0":
		return DiskReserveOff, nil
	}
	units := []struct {
		suffix string
		mult   int64
	}{
		{"tib", 1 << 40}, {"gib", 1 << 30}, {"mib", 1 << 20}, {"kib", 1 << 10},
		{"tb", 1e12}, {"gb", 1e9}, {"mb", 1e6}, {"kb", 1e3},
		{"t", 1 << 40}, {"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}, {"b", 1},
	}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || n < 0 || n*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("disk reserve %q: want auto, off, or a size such as 64MiB or 2GiB", s)
	}
	if v := int64(n * float64(mult)); v > 0 {
		return v, nil
	}
	return DiskReserveOff, nil
}

// autoReserve is DiskReserveAuto's reserve on a file system of total bytes.
func autoReserve(total uint64) uint64 {
	r := max(uint64(64<<20), total/50)
	return min(r, total/4)
}

// spaceGuard refuses sends when the data directory's file system has less
// free space than the reserve. Safe for concurrent use.
type spaceGuard struct {
	b       *Backend
	reserve int64 // Config.DiskReserve
	// full is whether the last check found the disk below the reserve: the
	// change either way is logged once.
	full atomic.Bool
	// roomyUntil (Unix nanoseconds, wall clock) is when the latest check's
	// answer expires, when it found at least twice the reserve free: until
	// then sends skip the statfs (one per send was 4 % of the broker's CPU
	// under a steady load). Writing the reserve's worth (64 MiB at the
	// least) in spaceRecheck is out of reach, and near the reserve every
	// send checks.
	roomyUntil atomic.Int64
}

// spaceRecheck is how long a check that found plenty of room holds.
const spaceRecheck = 10 * time.Millisecond

// check returns model.ErrStoreFull (StoreFullError) when a send must be
// refused for want of space, nil otherwise. A file system that cannot tell
// its free space (an in-memory one) never refuses.
func (g *spaceGuard) check() error {
	if g.reserve == DiskReserveOff {
		return nil
	}
	now := time.Now().UnixNano()
	if now < g.roomyUntil.Load() {
		return nil
	}
	u, err := g.b.fs.GetDiskUsage(g.b.dir)
	if err != nil {
		return nil
	}
	reserve := uint64(g.reserve)
	if g.reserve == DiskReserveAuto {
		reserve = autoReserve(u.TotalBytes)
	}
	if u.AvailBytes < reserve {
		if !g.full.Swap(true) {
			g.b.log.Error("the store's disk is below its reserve: refusing sends until space returns",
				"dir", g.b.dir, "free_bytes", u.AvailBytes, "reserve_bytes", reserve)
		}
		return model.StoreFullError(u.AvailBytes, reserve)
	}
	if g.full.Swap(false) {
		g.b.log.Info("the store's disk has space again: accepting sends",
			"dir", g.b.dir, "free_bytes", u.AvailBytes, "reserve_bytes", reserve)
	}
	if u.AvailBytes/2 >= reserve {
		g.roomyUntil.Store(now + int64(spaceRecheck))
	}
	return nil
}
