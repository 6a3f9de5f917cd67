package embedded_test

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/sluicemq/sluice/broker/brokertest"
	"github.com/sluicemq/sluice/broker/embedded"
	"github.com/sluicemq/sluice/broker/internal/archive"
	"github.com/sluicemq/sluice/broker/storage"
)

// TestConformance runs the shared backend suite (broker/brokertest) against
// the embedded backend, each subtest on its own data directory.
func TestConformance(t *testing.T) {
	var (
		mu   sync.Mutex
		dirs = map[storage.Backend]string{} // where each open backend keeps its data
	)
	open := func(t *testing.T, dir string, opts storage.Options) storage.Backend {
		t.Helper()
		b, err := embedded.Open(embedded.Config{Dir: dir, Options: opts, Archive: archive.Config{Dir: filepath.Join(dir, "archive"), ID: "conformance"}})
		if err != nil {
			t.Fatalf("embedded.Open(%s): %v", dir, err)
		}
		t.Cleanup(func() {
			if err := b.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			mu.Lock()
			delete(dirs, b)
			mu.Unlock()
		})
		mu.Lock()
		dirs[b] = dir
		mu.Unlock()
		return b
	}
	brokertest.Run(t, brokertest.Harness{
		Open: func(t *testing.T, opts storage.Options) storage.Backend {
			return open(t, t.TempDir(), opts)
		},
		Reopen: func(t *testing.T, b storage.Backend, opts storage.Options) storage.Backend {
			t.Helper()
			mu.Lock()
			dir, ok := dirs[b]
			mu.Unlock()
			if !ok {
				t.Fatal("Reopen of a backend this harness did not open")
			}
			if err := b.Close(); err != nil {
				t.Fatalf("Close before reopening: %v", err)
			}
			return open(t, dir, opts)
		},
		ArchiveDir: func(b storage.Backend) string {
			mu.Lock()
			defer mu.Unlock()
			return filepath.Join(dirs[b], "archive")
		},
	})
}
