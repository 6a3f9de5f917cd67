package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/embedded"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/internal/testutil"
)

// TestCLIStoreVerifyDamagedLog: a byte flipped in the middle of the newest
// write-ahead log of a crash image (every send synced) makes sluice store
// verify name the log and exit 1; salvage copies the messages before the
// damage, and exits 1 (those after it are lost).
func TestCLIStoreVerifyDamagedLog(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	ctx := context.Background()
	opts := storage.Options{Logger: testutil.Logger(t)}
	b, err := embedded.Open(embedded.Config{Dir: dir, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	f, err := broker.New(b, broker.Config{Logger: opts.Logger, Observer: opts.Observer})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.CreateQueue(ctx, "jobs", nil, nil); err != nil {
		t.Fatal(err)
	}
	for range 200 {
		if _, err := f.Send(ctx, "jobs", []model.SendEntry{{ID: "a", Body: "hello"}}); err != nil {
			t.Fatal(err)
		}
	}
	// A copy while the broker runs: what a power cut would leave.
	img := filepath.Join(t.TempDir(), "img")
	if out, err := exec.Command("cp", "-a", dir, img).CombinedOutput(); err != nil {
		t.Fatalf("copy: %v %s", err, out)
	}
	_ = os.Remove(filepath.Join(img, "LOCK"))
	logs, _ := filepath.Glob(filepath.Join(img, "*.log"))
	if len(logs) == 0 {
		t.Fatal("no log")
	}
	wal := logs[len(logs)-1]
	raw, _ := os.ReadFile(wal)
	end := len(raw)
	for end > 0 && raw[end-1] == 0 {
		end--
	}
	raw[end/2] ^= 0xff
	if err := os.WriteFile(wal, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	r := runOffline(t, "store", "verify", "--data", img)
	t.Logf("verify:\n%s%s", r.stdout, r.stderr)
	if r.code != 1 || !strings.Contains(r.stdout, filepath.Base(wal)) || !strings.Contains(r.stdout, "invalid chunk at offset") {
		t.Fatalf("verify of a damaged log: %+v", r)
	}
	r = runOffline(t, "store", "salvage", "--data", img, "--to", filepath.Join(t.TempDir(), "salvaged"))
	t.Logf("salvage:\n%s%s", r.stdout, r.stderr)
	if r.code != 1 || !strings.Contains(r.stdout, "copied 1 queue ") || !strings.Contains(r.stdout, "the records after the damage are lost") {
		t.Fatalf("salvage: %+v, want exit 1 (the records after the damage are lost)", r)
	}
}
