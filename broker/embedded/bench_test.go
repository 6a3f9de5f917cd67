package embedded

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// BenchmarkSendParallel measures durable single-message sends from 32
// concurrent producers (2 cores x parallelism 16): every send waits for its
// WAL sync, so the throughput is group commit's. It reports sends/sync.
func BenchmarkSendParallel(b *testing.B) {
	e := setup(b)
	e.createQueue("q", nil)
	body := fmt.Sprintf("%0256d", 0)
	b.SetParallelism(max(1, 32/max(1, testingProcs())))
	before := e.be.fs.syncs.Load()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		entries := []model.SendEntry{{Body: body}}
		for pb.Next() {
			if _, err := e.b.Send(context.Background(), "q", entries); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	syncs := e.be.fs.syncs.Load() - before
	b.ReportMetric(float64(b.N)/float64(max(syncs, 1)), "sends/sync")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sends/s")
}

// BenchmarkReceiveDelete measures the consume path: receive up to 10
// messages, then delete them in one batch (two synced writes per 10 messages).
func BenchmarkReceiveDelete(b *testing.B) {
	e := setup(b)
	e.createQueue("q", nil)
	body := fmt.Sprintf("%0256d", 0)
	batch := make([]model.SendEntry, 10)
	for i := range batch {
		batch[i] = model.SendEntry{ID: fmt.Sprint("e", i), Body: body}
	}
	for n := 0; n < b.N; n += 10 {
		if _, err := e.b.Send(context.Background(), "q", batch); err != nil {
			b.Fatal(err)
		}
	}
	vis, wait := time.Minute, time.Duration(0)
	req := model.ReceiveRequest{Queue: "q", MaxMessages: 10, Visibility: &vis, WaitTime: &wait}
	b.ResetTimer()
	got := 0
	for got < b.N {
		ds, err := e.b.Receive(context.Background(), req)
		if err != nil || len(ds) == 0 {
			b.Fatalf("receive: %d messages, %v", len(ds), err)
		}
		entries := make([]model.DeleteEntry, len(ds))
		for i, d := range ds {
			entries[i] = model.DeleteEntry{ID: fmt.Sprint("d", i), Receipt: d.Receipt}
		}
		if _, err := e.b.Delete(context.Background(), "q", entries); err != nil {
			b.Fatal(err)
		}
		got += len(ds)
	}
	b.StopTimer()
	b.ReportMetric(float64(got)/b.Elapsed().Seconds(), "msgs/s")
}
