package embedded

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
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
// each send reserves the space it will take against the data directory's
// free space less the reserve (spaceGuard.admit: one statfs through the
// vfs, lent to the sends of the next few milliseconds) and is refused with
// model.ErrStoreFull when it does not fit. Only sends are refused: receives,
// deletes and visibility changes write little and free space (a body's
// single delete lets a flush or compaction drop it), so they go on. Sends
// resume by themselves as soon as space returns (a refusal asks for a
// compaction of the deleted messages); there is no state to reset. With
// the reserve off, a background ENOSPC still refuses sends until a flush
// succeeds, so that the memtables do not fill and stall every write.

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
//
// Its check is a reservation, so that concurrent sends cannot overshoot the
// reserve between two looks at the disk: a send reserves what it will write
// (its bodies, and as much again for the table its memtable becomes at the
// flush) until its batch is in the log; the free space a send is judged
// against is the file system's less the reservations of the sends under way
// the memtables not yet flushed (they too will be written as tables), and
// level 0's tables (compactions rewrite them, both copies on disk until
// they finish); a refusal says that effective free space.
// A look at the disk (a statfs) then lends the sends after it at most half
// the room left above the reserve, for spaceRecheck; past that loan, or
// after it, the next send looks again. When a send is refused, the guard
// asks the reclaimer to compact the messages' key range (at most every
// fullCompactEvery): deleted messages' space is freed only when a
// compaction drops them, so a drained queue gives its disk back at once.
type spaceGuard struct {
	b       *Backend
	reserve int64 // Config.DiskReserve
	// full is whether the last check found the disk below the reserve: the
	// change either way is logged once.
	full atomic.Bool
	// noSpace is set when the store met ENOSPC in the background (a flush
	// or compaction: Pebble retries them), and cleared by the next flush
	// that succeeds: sends are refused meanwhile, also with the reserve
	// off, so that the memtables do not fill and stall every write.
	noSpace *atomic.Bool
	// stalled is set while Pebble holds writes back (pebbleEvents). With
	// noSpace too, the stall lasts until a flush succeeds, and a write
	// that enters it waits there holding Backend.mu: so every call is
	// refused at once meanwhile (stalledRefusal), rather than queueing
	// behind it until its client gives up.
	stalled *atomic.Bool

	mu          sync.Mutex
	pending     int64 // bytes reserved by sends not yet in the log
	loan        int64 // bytes sends may still reserve without a statfs
	loanUntil   int64 // Unix ns (wall clock) when the loan ends
	compactedAt int64 // Unix ns of the last compaction asked for by a refusal
	flushedAt   int64 // Unix ns of the last flush asked for while noSpace
	// fullDepth is the messages stored when a refusal last looked (-1:
	// none yet): a compaction is asked for only once it fell, that is once
	// messages were deleted (a compaction of a store that was not drained
	// frees nothing and needs room to write its output).
	fullDepth int64
}

// spaceRecheck is how long a look at the disk lends room to the sends after
// it (one statfs per send was 4 % of the broker's CPU under a steady load).
const spaceRecheck = 10 * time.Millisecond

// fullCompactEvery is the least time between two compactions a refused send
// asks for.
const fullCompactEvery = 10 * time.Second

// sendFootprint is what a send of bodies will take on the disk: each body
// twice (the log, then the table of its flushed memtable) and its metadata.
// (A compaction into a deeper level writes it once more, but only after
// level 0 is counted: see admit.)
func sendFootprint(bodies [][]byte) int64 {
	var n int64
	for _, b := range bodies {
		n += 2*int64(len(b)) + 256
	}
	return n
}

// admit reserves need bytes for a send, or returns model.ErrStoreFull
// (StoreFullError) when the reserve would be overrun. release gives the
// reservation back once the send's batch is in the log (or failed); it is
// never nil. A file system that cannot tell its free space (an in-memory
// one) never refuses.
func (g *spaceGuard) admit(need int64) (release func(), err error) {
	nothing := func() {}
	if g.noSpace.Load() {
		return nothing, g.noSpaceRefusal()
	}
	if g.reserve == DiskReserveOff {
		return nothing, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now().UnixNano()
	if now >= g.loanUntil || g.loan < need {
		u, err := g.b.fs.GetDiskUsage(g.b.dir)
		if err != nil {
			return nothing, nil
		}
		reserve := uint64(g.reserve)
		if g.reserve == DiskReserveAuto {
			reserve = autoReserve(u.TotalBytes)
		}
		// What the store will write without a send: the memtables not yet
		// flushed (future tables), and level 0, which compactions rewrite
		// into the next level, holding both copies until they finish.
		m := g.b.db.Metrics()
		debt := int64(m.MemTable.Size) + m.Levels[0].TablesSize
		effective := max(int64(u.AvailBytes)-g.pending-debt, 0)
		room := effective - int64(reserve)
		if room < need {
			g.loan, g.loanUntil = 0, 0
			if !g.full.Swap(true) {
				g.b.log.Error("the store's disk is below its reserve: refusing sends until space returns",
					"dir", g.b.dir, "free_bytes", u.AvailBytes, "reserved_bytes", g.pending, "memtable_bytes", debt, "reserve_bytes", reserve)
			}
			if now-g.compactedAt >= int64(fullCompactEvery) {
				// Deleted messages hold their space until a compaction
				// drops them: once messages were deleted since the disk
				// was found full, ask for one of the messages' range.
				g.compactedAt = now
				depth := g.b.storedMessages()
				if g.fullDepth >= 0 && depth < g.fullDepth {
					g.b.reclaimRange([]byte{pfxData}, []byte{pfxData + 1})
				}
				g.fullDepth = depth
			}
			return nothing, model.StoreFullError(uint64(effective), reserve)
		}
		if g.full.Swap(false) {
			g.b.log.Info("the store's disk has space again: accepting sends",
				"dir", g.b.dir, "free_bytes", u.AvailBytes, "reserve_bytes", reserve)
		}
		g.loan, g.loanUntil = (room-need)/2, now+int64(spaceRecheck)
	} else {
		g.loan -= need
	}
	g.pending += need
	return func() {
		g.mu.Lock()
		g.pending -= need
		g.mu.Unlock()
	}, nil
}

// stalledRefusal is the refusal of every call while the store's writes
// are stalled on a full disk, nil otherwise. (A stall with room on the disk
// is a short wait for a flush under load, which calls sit out.)
func (g *spaceGuard) stalledRefusal() error {
	if g.stalled == nil || !g.stalled.Load() || !g.noSpace.Load() {
		return nil
	}
	return model.Errorf(model.ErrStoreFull, "The store's disk is full and its writes are stalled until a flush succeeds: every request is refused meanwhile. Free space on the data directory's disk; the broker resumes by itself.")
}

// noSpaceRefusal is the refusal while the store meets ENOSPC: it says the
// disk's free space, and asks for a flush at most every fullCompactEvery
// (a flush that succeeds clears noSpace; with sends refused, none may come
// by itself).
func (g *spaceGuard) noSpaceRefusal() error {
	g.mu.Lock()
	now := time.Now().UnixNano()
	ask := now-g.flushedAt >= int64(fullCompactEvery)
	if ask {
		g.flushedAt = now
	}
	g.mu.Unlock()
	if ask {
		go func() { _, _ = g.b.db.AsyncFlush() }()
	}
	var free, reserve uint64
	if u, err := g.b.fs.GetDiskUsage(g.b.dir); err == nil {
		free, reserve = u.AvailBytes, uint64(max(g.reserve, 0))
		if g.reserve == DiskReserveAuto {
			reserve = autoReserve(u.TotalBytes)
		}
	}
	return model.StoreFullError(free, reserve)
}

// check is admit of an empty send, released at once: whether a send would
// be refused now.
func (g *spaceGuard) check() error {
	release, err := g.admit(0)
	release()
	return err
}

// storedMessages is the messages stored in every queue (their depths).
func (b *Backend) storedMessages() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var n int64
	for _, q := range b.queues {
		n += q.depth()
	}
	return n
}

// dirSize is the size of the data directory's files, as du counts them
// (Pebble's own DiskSpaceUsage left out the log as this store writes it:
// a few KiB for a store holding thousands of messages). Files that vanish
// while it looks (a compaction's inputs) are skipped.
func (b *Backend) dirSize() int64 {
	names, err := b.fs.List(b.dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, name := range names {
		if fi, err := b.fs.Stat(b.fs.PathJoin(b.dir, name)); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
	}
	return n
}

// StoreSize implements storage.Sizer: the store's files as Pebble counts
// them (tables, log, manifest), the file system's room left for the
// broker's user, and the reserve it keeps (nil when off).
func (b *Backend) StoreSize(ctx context.Context) (model.StoreSize, error) {
	if err := ctx.Err(); err != nil {
		return model.StoreSize{}, err
	}
	b.mu.Lock()
	err := b.refusal() // a closed or failed store has no figures to give
	b.mu.Unlock()
	if err != nil {
		return model.StoreSize{}, err
	}
	s := model.StoreSize{Kind: "embedded", SizeBytes: b.dirSize()}
	u, err := b.fs.GetDiskUsage(b.dir)
	if err != nil {
		return s, fmt.Errorf("reading the free space of %s: %w", b.dir, err)
	}
	free := int64(u.AvailBytes)
	s.FreeBytes = &free
	if r := b.space.reserve; r != DiskReserveOff {
		reserve := r
		if r == DiskReserveAuto {
			reserve = int64(autoReserve(u.TotalBytes))
		}
		s.ReserveBytes = &reserve
	}
	return s, nil
}
