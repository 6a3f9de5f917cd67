package embedded

import (
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
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
}

func (fs *syncCountFS) wrap(f vfs.File, err error, category vfs.DiskWriteCategory) (vfs.File, error) {
	if err != nil || category != walCategory {
		return f, err
	}
	return &syncCountFile{File: f, n: &fs.syncs}, nil
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

// syncCountFile counts the durable syncs of one WAL file.
type syncCountFile struct {
	vfs.File
	n *atomic.Uint64
}

func (f *syncCountFile) Sync() error {
	f.n.Add(1)
	return f.File.Sync()
}

func (f *syncCountFile) SyncData() error {
	f.n.Add(1)
	return f.File.SyncData()
}

func (f *syncCountFile) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	if full {
		f.n.Add(1)
	}
	return full, err
}
