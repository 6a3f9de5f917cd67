package embedded

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/broker/storage"
)

// lockFailFS fails Pebble's directory lock with err.
type lockFailFS struct {
	vfs.FS
	err func(name string) error
}

func (f lockFailFS) Lock(name string) (io.Closer, error) { return nil, f.err(name) }

// TestOpenSaysWhyTheDirectoryFails: Open tells a directory it cannot write
// (ErrDirNotWritable) from one another broker holds (ErrDirLocked). Tests
// run as root here, and root ignores permission bits, so an unwritable
// directory is made in ways that hold for root too: a path through a regular
// file (ENOTDIR), and a file system whose LOCK file cannot be created
// (EACCES from open(2), as a directory without write permission gives a
// non-root user).
func TestOpenSaysWhyTheDirectoryFails(t *testing.T) {
	t.Parallel()
	opts := storage.Options{Logger: testLogger(t)}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		what string
		cfg  Config
		want error
	}{
		{"a path under a regular file", Config{Dir: filepath.Join(file, "data")}, ErrDirNotWritable},
		{"a regular file", Config{Dir: file}, ErrDirNotWritable},
		{"a LOCK file that cannot be created", Config{Dir: t.TempDir(), FS: lockFailFS{vfs.Default, func(name string) error {
			return &fs.PathError{Op: "open", Path: name, Err: syscall.EACCES}
		}}}, ErrDirNotWritable},
		{"a read-only file system", Config{Dir: t.TempDir(), FS: lockFailFS{vfs.Default, func(name string) error {
			return &fs.PathError{Op: "open", Path: name, Err: syscall.EROFS}
		}}}, ErrDirNotWritable},
		{"a lock held by another process", Config{Dir: t.TempDir(), FS: lockFailFS{vfs.Default, func(string) error { return syscall.EAGAIN }}}, ErrDirLocked},
	}
	for _, c := range cases {
		c.cfg.Options = opts
		b, err := Open(c.cfg)
		if err == nil {
			_ = b.Close()
			t.Errorf("%s: Open succeeded", c.what)
			continue
		}
		other := ErrDirLocked
		if c.want == ErrDirLocked {
			other = ErrDirNotWritable
		}
		if !errors.Is(err, c.want) || errors.Is(err, other) {
			t.Errorf("%s: %v, want %v", c.what, err, c.want)
		}
	}

	// The lock really held: a second Open of a directory in use.
	dir := t.TempDir()
	b, err := Open(Config{Dir: dir, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	}()
	if b2, err := Open(Config{Dir: dir, Options: opts}); !errors.Is(err, ErrDirLocked) || errors.Is(err, ErrDirNotWritable) {
		if err == nil {
			_ = b2.Close()
		}
		t.Fatalf("second Open of a directory in use: %v", err)
	}
}
