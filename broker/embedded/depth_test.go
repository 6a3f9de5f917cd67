package embedded

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/internal/testutil"
)

// depthMessages is how many messages TestDepth queues: SLUICE_DEPTH_MESSAGES,
// else 100,000 under SLUICE_SCALE=full, else 50,000 (10,000 under the race
// detector, halved again under -short: testutil.Scale); scripts/depth.sh runs
// 10 million.
func depthMessages(t testing.TB) int {
	ci := 50_000
	if raceEnabled {
		ci = 10_000
	}
	return testutil.Scale(t, "SLUICE_DEPTH_MESSAGES", ci, 100_000, 1000)
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// heapInUse is the live Go heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// fillDeep sends n messages of a 64-byte body to queue from 8 goroutines in
// batches of 10.
func (e *env) fillDeep(queue string, n int) {
	e.t.Helper()
	const workers, batch = 8, 10
	body := fmt.Sprintf("%064d", 0)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			entries := make([]model.SendEntry, batch)
			for i := range entries {
				entries[i] = model.SendEntry{ID: "e" + itoa(i), Body: body}
			}
			for i := w * batch; i < n; i += workers * batch {
				k := min(batch, n-i)
				if _, err := e.b.Send(context.Background(), queue, entries[:k]); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		e.t.Fatal(err)
	}
}

// receiveLatency is the median of rounds single-message receives (each
// followed by its delete, untimed) on queue.
func (e *env) receiveLatency(queue string, rounds int) time.Duration {
	e.t.Helper()
	ctx := context.Background()
	vis, wait := time.Minute, time.Duration(0)
	req := model.ReceiveRequest{Queue: queue, MaxMessages: 1, Visibility: &vis, WaitTime: &wait}
	lat := make([]time.Duration, 0, rounds)
	for range rounds {
		start := time.Now()
		ds, err := e.b.Receive(ctx, req)
		lat = append(lat, time.Since(start))
		if err != nil || len(ds) != 1 {
			e.t.Fatalf("receive: %d messages, %v", len(ds), err)
		}
		if _, err := e.b.Delete(ctx, queue, []model.DeleteEntry{{Receipt: ds[0].Receipt}}); err != nil {
			e.t.Fatal(err)
		}
	}
	slices.Sort(lat)
	return lat[len(lat)/2]
}

// TestDepth queues SLUICE_DEPTH_MESSAGES messages (depthMessages: 50,000 by default) and
// reports what depth costs: the Go heap per queued message (the in-memory
// index; bodies stay in the store), receive latency deep against a queue
// holding only the messages being received, and the time from a restart to
// the first receive. It asserts the memory bound (150 bytes per message,
// issue 11's target); the timings are logged, not asserted (they are
// noisy here: docs/performance.md has the measured figures).
func TestDepth(t *testing.T) {
	n := depthMessages(t)
	e := setup(t)
	e.createQueue("deep", nil)
	e.createQueue("shallow", nil)

	heap0 := heapInUse()
	start := time.Now()
	e.fillDeep("deep", n)
	fillTime := time.Since(start)
	heap1 := heapInUse()
	perMsg := float64(int64(heap1)-int64(heap0)) / float64(n)

	const rounds = 200
	e.fillDeep("shallow", rounds)
	shallow := e.receiveLatency("shallow", rounds)
	deep := e.receiveLatency("deep", rounds)

	if err := e.be.Close(); err != nil {
		t.Fatal(err)
	}
	e.be, e.b = nil, nil // drop the closed backend's index before measuring
	heapClosed := heapInUse()
	start, cpu0 := time.Now(), processCPU()
	e.open()
	ds := e.receive("deep", 1, time.Minute)
	firstReceive, restartCPU := time.Since(start), processCPU()-cpu0
	if len(ds) != 1 {
		t.Fatalf("first receive after restart: %d messages", len(ds))
	}
	heapOpen := heapInUse()
	perMsgRestart := float64(int64(heapOpen)-int64(heapClosed)) / float64(n)
	e.wantStats("deep", model.QueueStats{Visible: int64(n - rounds - 1), InFlight: 1})

	t.Logf("depth %d: sent in %v (%.0f msgs/s); heap %.1f B/msg after sending, %.1f B/msg after restart",
		n, fillTime.Round(time.Millisecond), float64(n)/fillTime.Seconds(), perMsg, perMsgRestart)
	t.Logf("receive p50: %v with %d queued, %v on a shallow queue (%.2fx)",
		deep, n, shallow, float64(deep)/float64(shallow))
	t.Logf("restart to first receive: %v (%v of CPU)", firstReceive.Round(time.Millisecond), restartCPU.Round(time.Millisecond))
	if perMsgRestart > 150 && !raceEnabled { // at 10,000 the map's growth steps weigh more
		t.Errorf("in-memory index after restart: %.1f bytes per queued message, want <= 150", perMsgRestart)
	}
}

// TestIndexEntrySize keeps the index entry within its size class: a field
// added to msg belongs in msgExtra unless most messages set it.
func TestIndexEntrySize(t *testing.T) {
	if s := unsafe.Sizeof(msg{}); s > 96 {
		t.Fatalf("msg is %d bytes, want <= 96 (docs/performance.md)", s)
	}
}

// BenchmarkRestart measures the restart alone: a queue of
// SLUICE_DEPTH_MESSAGES messages (depthMessages: 50,000 by default) is filled once, then each
// op closes the backend, opens it again (which rebuilds the index) and
// receives one message. It reports the process CPU per restart (cpu-ms/op).
func BenchmarkRestart(b *testing.B) {
	n := depthMessages(b)
	e := setup(b)
	e.createQueue("deep", nil)
	e.fillDeep("deep", n)
	var cpu time.Duration
	for b.Loop() {
		if err := e.be.Close(); err != nil {
			b.Fatal(err)
		}
		cpu0 := processCPU()
		e.open()
		if ds := e.receive("deep", 1, time.Hour); len(ds) != 1 {
			b.Fatalf("first receive after restart: %d messages", len(ds))
		}
		cpu += processCPU() - cpu0
	}
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
}
