package embedded

import (
	"errors"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/internal/archive"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
)

// TestArchiveCrashBetweenWriteAndRemoval fails the store at the bad moment:
// the archive holds the batch's lines (synced) and the batch that removes
// the messages and moves the cursor never reaches the store. After the
// restart the messages are still there, the archive is cut back to its
// cursor, and the next sweep archives each message exactly once.
func TestArchiveCrashBetweenWriteAndRemoval(t *testing.T) {
	t.Parallel()
	clock := clocktest.NewFakeClock(t0)
	dir := t.TempDir()
	arch := filepath.Join(dir, "archive")
	var faults atomic.Int32
	open := func(fault func() error) (*Backend, *broker.Broker) {
		t.Helper()
		opts := storage.Options{Clock: clock, Logger: testLogger(t)}
		b, err := Open(Config{Dir: dir, Options: opts, Archive: archive.Config{Dir: arch, ID: "crash", MaxFileBytes: 200}})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		b.mu.Lock()
		b.archiveFault = fault
		b.mu.Unlock()
		t.Cleanup(func() { _ = b.Close() })
		return b, front(t, b, broker.Config{Logger: opts.Logger})
	}
	bodies := func() []string {
		ls, err := archive.ReadDir(arch)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, l := range ls {
			out = append(out, l.Body)
		}
		slices.Sort(out)
		return out
	}
	ctx := t.Context()
	b, f := open(nil)
	if _, err := f.CreateQueue(ctx, "q", map[string]string{model.AttrMessageRetentionPeriod: "60", model.AttrArchiveExpired: "true"}, nil); err != nil {
		t.Fatal(err)
	}
	// Two rounds: the first batch of a file, then one that begins a new
	// file (MaxFileBytes 200: every batch ends its file).
	want := []string{}
	for round, names := range [][]string{{"a", "b", "c"}, {"d", "e"}} {
		var entries []model.SendEntry
		for _, n := range names {
			entries = append(entries, model.SendEntry{ID: n, Body: n})
		}
		if _, err := f.Send(ctx, "q", entries); err != nil {
			t.Fatal(err)
		}
		b.mu.Lock()
		b.archiveFault = func() error { faults.Add(1); return errors.New("injected crash between the archive and the store") }
		b.mu.Unlock()
		clock.Advance(61 * time.Second)
		select {
		case <-b.Failed():
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: the sweep did not reach the injected failure", round)
		}
		// The bad moment: the lines are in the archive, the messages in the store.
		if got := bodies(); !slices.Equal(got, append(slices.Clone(want), names...)) {
			t.Fatalf("round %d: at the failure the archive holds %v, want %v and the batch", round, got, want)
		}
		_ = b.Close()
		b, f = open(nil)
		want = append(want, names...)
		eventually(t, "the sweep after the restart archives and removes them", func() bool {
			s, err := f.GetQueue(ctx, "q")
			return err == nil && s.Stats.Visible == 0 && slices.Equal(bodies(), want)
		})
	}
	if faults.Load() != 2 {
		t.Fatalf("%d injected failures, want 2", faults.Load())
	}
	clock.Advance(time.Hour)
	clock.Settle(10 * time.Second)
	if got := bodies(); !slices.Equal(got, want) {
		t.Fatalf("the archive holds %v, want %v once each", got, want)
	}
}

// TestArchiveSyncFailureKeepsLines fails the sync of the batch that removes
// the archived messages: the batch reached the log all the same (the disk
// reported an error on fsync, the bytes were written), so the restart
// replays it, messages gone and the cursor moved. The archive must still
// hold their lines: a failed store sync is an unknown outcome, not a
// rollback, and the archive is cut only by the next Open, to the cursor
// the store then holds.
func TestArchiveSyncFailureKeepsLines(t *testing.T) {
	t.Parallel()
	clock := clocktest.NewFakeClock(t0)
	dir := t.TempDir()
	arch := filepath.Join(dir, "archive")
	fs := &syncErrFS{FS: vfs.Default}
	open := func(fs vfs.FS) (*Backend, *broker.Broker) {
		t.Helper()
		opts := storage.Options{Clock: clock, Logger: testLogger(t)}
		b, err := Open(Config{Dir: dir, FS: fs, Options: opts, Archive: archive.Config{Dir: arch, ID: "syncfail"}})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b, front(t, b, broker.Config{Logger: opts.Logger})
	}
	ctx := t.Context()
	b, f := open(fs)
	if _, err := f.CreateQueue(ctx, "q", map[string]string{model.AttrMessageRetentionPeriod: "60", model.AttrArchiveExpired: "true"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Send(ctx, "q", []model.SendEntry{{ID: "a", Body: "a"}, {ID: "b", Body: "b"}}); err != nil {
		t.Fatal(err)
	}
	fs.broken.Store(true)
	clock.Advance(61 * time.Second)
	select {
	case <-b.Failed():
	case <-time.After(30 * time.Second):
		t.Fatal("the sweep's sync did not fail")
	}
	_ = b.Close()
	_, f = open(vfs.Default)
	eventually(t, "the messages are archived once, by the replayed batch or the next sweep", func() bool {
		s, err := f.GetQueue(ctx, "q")
		if err != nil || s.Stats.Visible != 0 {
			return false
		}
		ls, err := archive.ReadDir(arch)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range ls {
			got = append(got, l.Body)
		}
		slices.Sort(got)
		return slices.Equal(got, []string{"a", "b"})
	})
}
