package embedded

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
)

// TestBackupWhileSending: a backup taken while producers send opens as a
// data directory and holds every message acknowledged before it began.
func TestBackupWhileSending(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("q", nil)
	ctx := context.Background()
	var mu sync.Mutex
	acked := map[string]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var n atomic.Int64
	for p := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := "p" + itoa(p) + "-" + itoa(i)
				if _, err := e.b.Send(ctx, "q", []model.SendEntry{{ID: "a", Body: body}}); err != nil {
					t.Errorf("send: %v", err)
					return
				}
				mu.Lock()
				acked[body] = true
				mu.Unlock()
				n.Add(1)
			}
		}()
	}
	eventually(t, "some sends", func() bool { return n.Load() >= 200 })
	mu.Lock()
	before := make(map[string]bool, len(acked))
	for b := range acked {
		before[b] = true
	}
	mu.Unlock()
	dir := filepath.Join(t.TempDir(), "backups", "b1")
	if err := e.be.Backup(ctx, dir); err != nil {
		t.Fatal(err)
	}
	eventually(t, "sends after the backup", func() bool { return n.Load() >= int64(len(before))+100 })
	close(stop)
	wg.Wait()
	if err := e.be.Backup(ctx, dir); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("a second backup into %s: %v, want ErrExist", dir, err)
	}

	got := drain(t, dir)
	for b := range before {
		if !got[b] {
			t.Fatalf("message %q acknowledged before the backup is not in it (%d of %d)", b, len(got), len(before))
		}
	}
	t.Logf("backup holds %d messages; %d were acknowledged before it began, %d in all", len(got), len(before), n.Load())
}

// TestBackupNeedsBackupDir: without broker.Config.BackupDir the front refuses a
// backup (ErrUnsupportedOperation), and checks the name when it is set.
func TestBackupNeedsBackupDir(t *testing.T) {
	t.Parallel()
	e := setup(t)
	if _, err := e.b.Backup(context.Background(), "x"); !errors.Is(err, model.ErrUnsupportedOperation) {
		t.Fatalf("backup without BackupDir: %v, want ErrUnsupportedOperation", err)
	}
	f := front(t, e.be, broker.Config{Logger: testLogger(t), BackupDir: t.TempDir()})
	for _, bad := range []string{"", "../up", "a/b", ".hidden", strings.Repeat("x", 81)} {
		if _, err := f.Backup(context.Background(), bad); !errors.Is(err, model.ErrInvalidParameterValue) {
			t.Errorf("backup named %q: %v, want ErrInvalidParameterValue", bad, err)
		}
	}
	path, err := f.Backup(context.Background(), "ok-1")
	if err != nil || filepath.Base(path) != "ok-1" {
		t.Fatalf("backup: %q, %v", path, err)
	}
	if _, err := f.Backup(context.Background(), "ok-1"); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("a second backup of the same name: %v, want ErrConflict", err)
	}
}
