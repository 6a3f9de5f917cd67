package embedded

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
)

// syncErrFS fails every WAL sync while broken is set: a disk that reports an
// I/O error on fsync.
type syncErrFS struct {
	vfs.FS
	broken atomic.Bool
}

var errInjected = errors.New("injected EIO")

func (fs *syncErrFS) wrap(f vfs.File, err error, category vfs.DiskWriteCategory) (vfs.File, error) {
	if err != nil || category != walCategory {
		return f, err
	}
	return &syncErrFile{File: f, fs: fs}, nil
}

func (fs *syncErrFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	return fs.wrap(f, err, category)
}

func (fs *syncErrFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	return fs.wrap(f, err, category)
}

type syncErrFile struct {
	vfs.File
	fs *syncErrFS
}

func (f *syncErrFile) Sync() error {
	if f.fs.broken.Load() {
		return errInjected
	}
	return f.File.Sync()
}

func (f *syncErrFile) SyncData() error {
	if f.fs.broken.Load() {
		return errInjected
	}
	return f.File.SyncData()
}

func (f *syncErrFile) SyncTo(length int64) (bool, error) {
	if f.fs.broken.Load() {
		return false, errInjected
	}
	return f.File.SyncTo(length)
}

// TestFailStopAfterSyncError: after one failed WAL sync the backend refuses
// every request, even once the disk works again, so nothing is acknowledged
// that may not be durable; a restart recovers from the log, with every send
// acknowledged before the failure.
func TestFailStopAfterSyncError(t *testing.T) {
	t.Parallel()
	fs := &syncErrFS{FS: vfs.Default}
	e := &env{t: t, clock: clocktest.NewFakeClock(t0), dir: t.TempDir(), fs: fs}
	e.open()
	t.Cleanup(func() { _ = e.b.Close() })
	e.createQueue("q", nil)
	e.send("q", "before")

	fs.broken.Store(true)
	ctx := context.Background()
	if _, err := e.b.Send(ctx, "q", []model.SendEntry{{Body: "during"}}); err == nil {
		t.Fatal("a send whose sync failed was acknowledged")
	}
	select {
	case <-e.be.Failed():
	default:
		t.Fatal("Failed() not closed after a failed sync")
	}
	fs.broken.Store(false)
	if _, err := e.b.Send(ctx, "q", []model.SendEntry{{Body: "after"}}); !errors.Is(err, model.ErrClosed) {
		t.Fatalf("send after a failed sync = %v, want ErrClosed (fail-stop until restart)", err)
	}
	if _, err := e.b.GetQueue(ctx, "q"); !errors.Is(err, model.ErrClosed) {
		t.Fatalf("GetQueue after a failed sync = %v, want ErrClosed", err)
	}

	_ = e.b.Close()
	e.fs = vfs.Default
	e.open()
	got := map[string]bool{}
	for _, d := range e.receive("q", 10, 30e9) {
		got[d.Body] = true
	}
	if !got["before"] || got["after"] {
		t.Fatalf("after restart: %v; want the acknowledged send and not the refused one", got)
	}
}
