package embedded

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
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
	e.be.space.roomyUntil.Store(0)
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

// TestDiskReserveRecheck: a check that found plenty of room holds for
// spaceRecheck; near the reserve every send checks.
func TestDiskReserveRecheck(t *testing.T) {
	fs := &freeSpaceFS{FS: vfs.NewMem()}
	fs.total.Store(10 << 30)
	fs.free.Store(5 << 30)
	e := &env{t: t, clock: clocktest.NewFakeClock(t0), dir: "/data", fs: fs}
	e.open() // DiskReserveAuto: 204.8 MiB
	t.Cleanup(func() { _ = e.be.Close() })
	e.createQueue("q", nil)
	e.send("q", "a")
	if e.be.space.roomyUntil.Load() == 0 {
		t.Fatal("a send with 5 GiB free left no roomy answer")
	}
	// 300 MiB free: above the reserve, below twice it: no roomy answer, so
	// the next drop is seen by the very next send.
	fs.free.Store(300 << 20)
	e.be.space.roomyUntil.Store(0)
	e.send("q", "b")
	if e.be.space.roomyUntil.Load() != 0 {
		t.Fatal("a send with 300 MiB free (reserve 204.8 MiB) left a roomy answer")
	}
	fs.free.Store(200 << 20)
	if _, err := e.b.Send(context.Background(), "q", []model.SendEntry{{ID: "x", Body: "refused"}}); !errors.Is(err, model.ErrStoreFull) {
		t.Fatalf("send below the reserve: err %v, want ErrStoreFull", err)
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
