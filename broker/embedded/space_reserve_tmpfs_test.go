package embedded

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/internal/testutil"
)

// TestSerialDiskReserveTmpfs is the full disk for real: a 48 MiB tmpfs,
// a reserve of 12 MiB, 16 senders of batches of 10 x 100 KB until every
// send is refused. The free space never falls below half the reserve (the
// reservation: concurrent sends cannot overrun it), Pebble never meets
// ENOSPC, and once every message was received and deleted, sends resume by
// themselves within 60 s (a refused send asks for a compaction of the
// deleted messages). It needs root to mount the tmpfs (SLUICE_REQUIRE=tmpfs
// makes its absence a failure); serial tier: timings matter to the fill.
func TestSerialDiskReserveTmpfs(t *testing.T) {
	if os.Getenv("SLUICE_SERIAL") != "1" {
		t.Skip("timing-sensitive: runs in the serial tier (SLUICE_SERIAL=1)")
	}
	dir := tmpfs(t, "48m")
	var logs testutil.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	b, err := Open(Config{Dir: dir, DiskReserve: 12 << 20, Options: storage.Options{Logger: log}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	f := front(t, b, broker.Config{Logger: log})
	ctx := context.Background()
	if _, err := f.CreateQueue(ctx, "big", nil, nil); err != nil {
		t.Fatal(err)
	}
	free := func() int64 {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		return int64(st.Bavail) * st.Bsize
	}
	// The lowest free space seen, sampled while the senders run.
	var low atomic.Int64
	low.Store(free())
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if fr := free(); fr < low.Load() {
				low.Store(fr)
			}
			time.Sleep(time.Millisecond) // the sampling rate, not a wait for a condition
		}
	}()
	// Bodies that do not compress (the store compresses its tables).
	randomBody := func() string {
		raw := make([]byte, 75_000)
		_, _ = rand.Read(raw)
		return base64.StdEncoding.EncodeToString(raw) // 100,000 characters
	}
	var stored, refused atomic.Int64
	var senders sync.WaitGroup
	for w := range 16 {
		senders.Add(1)
		go func() {
			defer senders.Done()
			for refusedInARow := 0; refusedInARow < 20; {
				entries := make([]model.SendEntry, 10)
				for i := range entries {
					entries[i] = model.SendEntry{ID: "e" + itoa(i), Body: randomBody()}
				}
				_, err := f.Send(ctx, "big", entries)
				switch {
				case errors.Is(err, model.ErrStoreFull):
					refused.Add(1)
					refusedInARow++
				case err != nil:
					t.Errorf("sender %d: %v", w, err)
					return
				default:
					stored.Add(10)
					refusedInARow = 0
				}
			}
		}()
	}
	senders.Wait()
	close(stop)
	sampler.Wait()
	t.Logf("stored %d messages of 100 KB, %d sends refused; lowest free space %.1f MiB (reserve 12 MiB)",
		stored.Load(), refused.Load(), float64(low.Load())/(1<<20))
	if low.Load() < 6<<20 {
		t.Errorf("free space fell to %.1f MiB, below half the 12 MiB reserve", float64(low.Load())/(1<<20))
	}
	if n := strings.Count(logs.String(), "no space left on device"); n > 0 {
		t.Errorf("Pebble met ENOSPC %d times", n)
	}
	// Drain: every message received and deleted.
	vis, zero := time.Minute, time.Duration(0)
	for left := stored.Load(); left > 0; {
		ds, err := f.Receive(ctx, model.ReceiveRequest{Queue: "big", MaxMessages: 10, Visibility: &vis, WaitTime: &zero})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			t.Fatalf("%d messages left but none received", left)
		}
		del := make([]model.DeleteEntry, len(ds))
		for i, d := range ds {
			del[i] = model.DeleteEntry{ID: "d" + itoa(i), Receipt: d.Receipt}
		}
		if _, err := f.Delete(ctx, "big", del); err != nil {
			t.Fatal(err)
		}
		left -= int64(len(ds))
	}
	drained := time.Now()
	testutil.Eventually(t, 60*time.Second, "sends accepted again after the drain", func() bool {
		_, err := f.Send(ctx, "big", []model.SendEntry{{ID: "a", Body: randomBody()}})
		return err == nil
	})
	t.Logf("sends resumed %v after the drain; free space %.1f MiB", time.Since(drained).Round(time.Millisecond), float64(free())/(1<<20))
}
