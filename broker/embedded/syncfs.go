package embedded

import (
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/broker/model"
)

// walCategory is the DiskWriteCategory Pebble passes when it creates or
// recycles a write-ahead log file.
const walCategory vfs.DiskWriteCategory = "pebble-wal"

// syncCountFS wraps a vfs.FS and counts the syncs of the WAL files it hands
// out (Sync and SyncData, which is what Pebble's WAL writer calls; SyncTo only
// when it reports a full sync). The count is what Backend.Syncs reports: the
// group-commit figure is operations / syncs.
type syncCountFS struct {
	vfs.FS
	syncs atomic.Uint64
	// commits counts the synced writes handed to the log since the last
	// sync began (committed), for observer.
	commits atomic.Uint64
	// observer, when not nil, is told each sync's duration and commits.
	observer model.Observer
}

// committed counts one synced write handed to Pebble's commit pipeline.
func (fs *syncCountFS) committed() { fs.commits.Add(1) }

func (fs *syncCountFS) wrap(f vfs.File, err error, category vfs.DiskWriteCategory) (vfs.File, error) {
	if err != nil || category != walCategory {
		return f, err
	}
	return &syncCountFile{File: f, fs: fs}, nil
}

// Create implements vfs.FS.
func (fs *syncCountFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	return fs.wrap(f, err, category)
}

// ReuseForWrite implements vfs.FS (Pebble recycles old WAL files with it).
func (fs *syncCountFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	return fs.wrap(f, err, category)
}

// OpenReadWrite implements vfs.FS.
func (fs *syncCountFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, category, opts...)
	return fs.wrap(f, err, category)
}

// syncCountFile counts (and times, for the observer) the durable syncs of
// one WAL file.
type syncCountFile struct {
	vfs.File
	fs *syncCountFS
}

// synced counts one sync that began at start.
func (f *syncCountFile) synced(start time.Time) {
	f.fs.syncs.Add(1)
	commits := f.fs.commits.Swap(0)
	if o := f.fs.observer; o != nil {
		o.Synced(time.Since(start), int(commits))
	}
}

func (f *syncCountFile) Sync() error {
	start := time.Now()
	err := f.File.Sync()
	f.synced(start)
	return err
}

func (f *syncCountFile) SyncData() error {
	start := time.Now()
	err := f.File.SyncData()
	f.synced(start)
	return err
}

func (f *syncCountFile) SyncTo(length int64) (bool, error) {
	start := time.Now()
	full, err := f.File.SyncTo(length)
	if full {
		f.synced(start)
	}
	return full, err
}
