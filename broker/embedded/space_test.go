package embedded

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/internal/testutil"
)

// freeSpaceFS is an in-memory file system whose free space the test sets.
type freeSpaceFS struct {
	vfs.FS
	free, total atomic.Uint64
}

func (f *freeSpaceFS) GetDiskUsage(string) (vfs.DiskUsage, error) {
	free, total := f.free.Load(), f.total.Load()
	return vfs.DiskUsage{AvailBytes: free, TotalBytes: total, UsedBytes: total - free}, nil
}

// TestDiskReserve: below the reserve a send is refused with ErrStoreFull
// (nothing stored), while receives, visibility changes and deletes go on;
// sends resume by themselves when space returns.
func TestDiskReserve(t *testing.T) {
	fs := &freeSpaceFS{FS: vfs.NewMem()}
	fs.total.Store(10 << 30)
	fs.free.Store(5 << 30)
	e := &env{t: t, clock: clocktest.NewFakeClock(t0), dir: "/data", fs: fs}
	e.open() // DiskReserveAuto: 2 % of 10 GiB = 204.8 MiB
	t.Cleanup(func() { _ = e.be.Close() })
	ctx := context.Background()
	e.createQueue("q", nil)
	e.send("q", "a", "b", "c")

	// The free space drops at once (a real disk cannot lose gigabytes in
	// the guard's recheck interval): the roomy answer is forgotten.
	fs.free.Store(200 << 20)
	e.be.space.forgetLoan()
	_, err := e.b.Send(ctx, "q", []model.SendEntry{{ID: "x", Body: "refused"}})
	if !errors.Is(err, model.ErrStoreFull) {
		t.Fatalf("send below the reserve: err %v, want ErrStoreFull", err)
	}
	t.Logf("refusal: %v", err)
	e.wantStats("q", model.QueueStats{Visible: 3})

	ds := e.receive("q", 3, time.Minute)
	if len(ds) != 3 {
		t.Fatalf("receive on a full disk: %d messages, want 3", len(ds))
	}
	if _, err := e.b.ChangeVisibility(ctx, "q", []model.VisibilityEntry{{ID: "v", Receipt: ds[0].Receipt, Timeout: 0}}); err != nil {
		t.Fatalf("change visibility on a full disk: %v", err)
	}
	errs, err := e.b.Delete(ctx, "q", []model.DeleteEntry{{ID: "d1", Receipt: ds[1].Receipt}, {ID: "d2", Receipt: ds[2].Receipt}})
	if err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("delete on a full disk: %v %v", err, errs)
	}

	fs.free.Store(300 << 20)
	e.send("q", "d")
	e.wantStats("q", model.QueueStats{Visible: 2})
}

// forgetLoan ends the room the guard's last look at the disk lent (a test
// that changes the free space at once, which a real disk cannot in
// spaceRecheck, makes the next send look again).
func (g *spaceGuard) forgetLoan() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.loan, g.loanUntil = 0, 0
}

// TestDiskReserveLoan: a look at the disk lends the sends after it half the
// room above the reserve (less what sends under way reserved); a send that
// needs more than what is left of the loan looks again, so sends cannot
// together overrun the reserve between two looks.
func TestDiskReserveLoan(t *testing.T) {
	fs := &freeSpaceFS{FS: vfs.NewMem()}
	fs.total.Store(10 << 30)
	fs.free.Store(5 << 30)
	e := &env{t: t, clock: clocktest.NewFakeClock(t0), dir: "/data", fs: fs}
	e.open() // DiskReserveAuto: 2 % of 10 GiB = 204.8 MiB
	t.Cleanup(func() { _ = e.be.Close() })
	e.createQueue("q", nil)
	g := &e.be.space
	g.forgetLoan()
	release, err := g.admit(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	loan, pending := g.loan, g.pending
	g.mu.Unlock()
	if pending != 1<<20 || loan <= 0 || loan > (5<<30-int64(autoReserve(10<<30)))/2 {
		t.Fatalf("after a look with 5 GiB free: loan %d, pending %d; want at most half the room, 1 MiB pending", loan, pending)
	}
	release()
	// The disk fills at once (as no disk can in spaceRecheck): a send within
	// the loan is still admitted, one past it looks and is refused.
	fs.free.Store(200 << 20)
	if rel, err := g.admit(loan / 2); err != nil {
		t.Fatalf("a send within the loan: %v", err)
	} else {
		rel()
	}
	if _, err := g.admit(loan); !errors.Is(err, model.ErrStoreFull) {
		t.Fatalf("a send past the loan: %v, want ErrStoreFull after a new look", err)
	}
	// Reservations of sends under way count against the room: with 300 MiB
	// free (95.2 MiB above the reserve), two sends of 60 MiB cannot both go.
	fs.free.Store(300 << 20)
	g.forgetLoan()
	r1, err := g.admit(60 << 20)
	if err != nil {
		t.Fatalf("the first 60 MiB: %v", err)
	}
	g.forgetLoan() // the second send looks at the disk too
	if _, err := g.admit(60 << 20); !errors.Is(err, model.ErrStoreFull) {
		t.Fatalf("a second 60 MiB while the first is under way: %v, want ErrStoreFull", err)
	}
	r1()
	g.forgetLoan()
	if r2, err := g.admit(60 << 20); err != nil {
		t.Fatalf("60 MiB once the first was written: %v", err)
	} else {
		r2()
	}
}

// TestDiskReserveValues: explicit and special reserves, and the flag's syntax.
func TestDiskReserveValues(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"auto", DiskReserveAuto}, {"", DiskReserveAuto}, {"off", DiskReserveOff}, {"0", DiskReserveOff},
		{"64MiB", 64 << 20}, {"1.5GiB", 3 << 29}, {"100mb", 100e6}, {"4096", 4096}, {"8m", 8 << 20},
	} {
		got, err := ParseDiskReserve(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseDiskReserve(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"lots", "-5MiB", "12XB"} {
		if _, err := ParseDiskReserve(bad); err == nil {
			t.Errorf("ParseDiskReserve(%q): no error", bad)
		}
	}
	if got := autoReserve(48 << 20); got != 12<<20 {
		t.Errorf("auto reserve of 48 MiB = %d, want a quarter", got)
	}
	if got := autoReserve(1 << 40); got != (1<<40)/50 {
		t.Errorf("auto reserve of 1 TiB = %d, want 2 %%", got)
	}

	fs := &freeSpaceFS{FS: vfs.NewMem()}
	fs.total.Store(1 << 30)
	fs.free.Store(900 << 20)
	opts := storage.Options{Clock: clocktest.NewFakeClock(t0), Logger: testLogger(t)}
	for _, c := range []struct {
		reserve int64
		refused bool
	}{{DiskReserveOff, false}, {800 << 20, false}, {901 << 20, true}} {
		b, err := Open(Config{Dir: "/r", FS: fs, DiskReserve: c.reserve, Options: opts})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.space.check(); (err != nil) != c.refused {
			t.Errorf("reserve %d with 900 MiB free: refused = %v, want %v", c.reserve, err != nil, c.refused)
		}
		_ = b.Close()
	}
	if _, err := Open(Config{Dir: "/r", FS: fs, DiskReserve: -2, Options: opts}); err == nil {
		t.Error("DiskReserve -2: no error")
	}
}

// TestNoSpaceClearedByFlushOrCompaction: a background ENOSPC refuses sends
// (also with the reserve off) until a flush or a compaction succeeds; one
// that fails keeps them refused.
func TestNoSpaceClearedByFlushOrCompaction(t *testing.T) {
	for _, end := range []string{"flush", "compaction"} {
		noSpace := new(atomic.Bool)
		el := pebbleEvents(newPebbleLogger(testLogger(t)), noSpace, new(atomic.Bool))
		el.BackgroundError(fmt.Errorf("flush: write 000012.sst: %w", syscall.ENOSPC))
		if !noSpace.Load() {
			t.Fatal("a background ENOSPC did not refuse sends")
		}
		failed := errors.New("still no room")
		succeed := func(err error) {
			if end == "flush" {
				el.FlushEnd(pebble.FlushInfo{Err: err})
			} else {
				el.CompactionEnd(pebble.CompactionInfo{Err: err})
			}
		}
		succeed(failed)
		if !noSpace.Load() {
			t.Fatalf("a failed %s accepted sends again", end)
		}
		succeed(nil)
		if noSpace.Load() {
			t.Fatalf("a successful %s left sends refused", end)
		}
	}
}

// TestStalledOnFullDiskRefusesAtOnce: while Pebble stalls writes on a full
// disk (a background ENOSPC, then a write stall: the memtables cannot be
// flushed), a write would wait inside Pebble holding the backend's lock and
// every request would queue behind it until its client gave up. So every
// call is refused at once with ErrStoreFull meanwhile, and served again
// when the stall ends. A stall with room on the disk (a flush lagging under
// load) refuses nothing. The flags are driven through the store's own
// event listener, as Pebble drives them.
func TestStalledOnFullDiskRefusesAtOnce(t *testing.T) {
	e := &env{t: t, clock: clocktest.NewFakeClock(t0), dir: "/data", fs: vfs.NewMem()}
	e.open()
	t.Cleanup(func() { _ = e.be.Close() })
	ctx := context.Background()
	e.createQueue("q", nil)
	e.send("q", "a")
	el := pebbleEvents(newPebbleLogger(testLogger(t)), e.be.space.noSpace, e.be.space.stalled)

	el.WriteStallBegin(pebble.WriteStallBeginInfo{Reason: "memtable count limit reached"})
	e.send("q", "b") // room on the disk: a stall is a wait, not a refusal
	el.BackgroundError(fmt.Errorf("flush: write 000012.sst: %w", syscall.ENOSPC))
	wait := time.Duration(0)
	calls := map[string]func() error{
		"send": func() error {
			_, err := e.b.Send(ctx, "q", []model.SendEntry{{ID: "x", Body: "c"}})
			return err
		},
		"receive": func() error {
			_, err := e.b.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 1, WaitTime: &wait})
			return err
		},
		"stats": func() error {
			_, _, err := e.b.Stats(ctx, "q")
			return err
		},
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, model.ErrStoreFull) {
			t.Fatalf("%s while writes are stalled on a full disk: %v, want ErrStoreFull", name, err)
		} else if name == "receive" {
			t.Logf("refusal: %v", err)
		}
	}
	el.WriteStallEnd()
	if err := calls["receive"](); err != nil {
		t.Fatalf("receive after the stall ended: %v", err)
	}
	el.FlushEnd(pebble.FlushInfo{})
	e.send("q", "d")
	e.wantStats("q", model.QueueStats{Visible: 2, InFlight: 1})
}

// TestStoreSizeCountsTheLog: the overview's store size counts what the
// data directory holds, the log included: 200 messages of 1,000 bytes
// weigh at least 200,000 bytes before any flush (Pebble's DiskSpaceUsage
// said a few KiB for such a store).
func TestStoreSizeCountsTheLog(t *testing.T) {
	fs := &freeSpaceFS{FS: vfs.NewMem()}
	fs.total.Store(10 << 30)
	fs.free.Store(5 << 30)
	e := &env{t: t, clock: clocktest.NewFakeClock(t0), dir: "/data", fs: fs}
	e.open()
	t.Cleanup(func() { _ = e.be.Close() })
	e.createQueue("q", nil)
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/"
	b := make([]byte, 1000)
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	body := string(b) // random: a compressed table keeps its size
	for i := range 200 {
		if _, err := e.b.Send(context.Background(), "q", []model.SendEntry{{ID: "m", Body: body + itoa(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	sz, err := e.be.StoreSize(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sz.SizeBytes < 200_000 {
		t.Fatalf("store size %d bytes for 200 messages of 1,000 bytes, want at least 200,000", sz.SizeBytes)
	}
	t.Logf("store size %d bytes (Pebble's DiskSpaceUsage: %d)", sz.SizeBytes, e.be.db.Metrics().DiskSpaceUsage())
}

// TestStalledOnFullDiskLeavesNoCallBehindTheLock: while a write is stalled
// inside Pebble on a full disk it holds the backend's lock (the test holds
// it in its place). The reads that take the lock without entering
// (schedules, move tasks) are refused at once too, and a receive that was
// already waiting when the stall began answers when its wait ends, refused,
// rather than queueing behind the stalled write until the disk has room.
func TestStalledOnFullDiskLeavesNoCallBehindTheLock(t *testing.T) {
	e := &env{t: t, clock: clocktest.NewFakeClock(t0), dir: "/data", fs: vfs.NewMem()}
	e.open()
	t.Cleanup(func() { _ = e.be.Close() })
	ctx := context.Background()
	e.createQueue("q", nil)
	wait := 10 * time.Second
	received := make(chan error, 1)
	go func() {
		_, err := e.b.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 1, WaitTime: &wait})
		received <- err
	}()
	testutil.Eventually(t, 10*time.Second, "the receive waiting", func() bool {
		e.be.mu.Lock()
		defer e.be.mu.Unlock()
		return e.be.queues[model.QueueRef{Name: "q"}].waiters > 0
	})
	el := pebbleEvents(newPebbleLogger(testLogger(t)), e.be.space.noSpace, e.be.space.stalled)
	e.be.mu.Lock() // the stalled write's
	el.BackgroundError(fmt.Errorf("flush: write 000012.sst: %w", syscall.ENOSPC))
	el.WriteStallBegin(pebble.WriteStallBeginInfo{Reason: "memtable count limit reached"})
	refused := func(name string, errc <-chan error) {
		t.Helper()
		select {
		case err := <-errc:
			if !errors.Is(err, model.ErrStoreFull) {
				t.Errorf("%s while writes are stalled on a full disk: %v, want ErrStoreFull", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s waited behind the stalled write", name)
		}
	}
	calls := map[string]func() error{
		"get schedule": func() error {
			_, err := e.be.GetSchedule(ctx, model.ScheduleRef{Name: "s"})
			return err
		},
		"list schedules": func() error {
			_, err := e.be.ListSchedules(ctx, "", "", "", 10)
			return err
		},
		"list move tasks": func() error {
			_, err := e.be.ListMoveTasks(ctx, model.QueueRef{Name: "q"}, 10)
			return err
		},
	}
	for name, call := range calls {
		errc := make(chan error, 1)
		go func() { errc <- call() }()
		refused(name, errc)
	}
	e.clock.Advance(wait) // the waiting receive's wait ends
	refused("a receive waiting since before the stall", received)
	el.WriteStallEnd()
	el.FlushEnd(pebble.FlushInfo{})
	e.be.mu.Unlock()
	e.send("q", "a")
	e.wantStats("q", model.QueueStats{Visible: 1})
}
