package postgres_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/broker/storage"
)

// churnMessages is how many messages BenchmarkReceive/churned sends, receives
// and deletes before it measures: SLUICE_PG_BENCH_MESSAGES, default 100,000
// (the figure is 1,000,000: SLUICE_PG_BENCH_MESSAGES=1000000).
func churnMessages(b *testing.B) int {
	if v := os.Getenv("SLUICE_PG_BENCH_MESSAGES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			b.Fatalf("SLUICE_PG_BENCH_MESSAGES=%q: want a count", v)
		}
		return n
	}
	return 100_000
}

// BenchmarkReceive measures one receive (of a message sent just before, then
// deleted, both outside the timer) on a fresh queue and on a queue through
// which churnMessages messages were sent, received and deleted just before,
// with only the settings the migrations ship (no manual VACUUM). The ratio
// churned/fresh is the dead-tuple cost of the receive path (docs/postgres.md).
func BenchmarkReceive(b *testing.B) {
	url := requirePostgres(b)
	cfg := testConfig(url, "bench_receive")
	cfg.MaxConns = 8
	backend, err := postgres.Open(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	be := front(b, backend, storage.Options{})
	// Closed (the front closes its backend) when the benchmark ends:
	// TestMain's leak check fails the run on the pool's goroutines otherwise.
	b.Cleanup(func() { _ = be.Close() })
	ctx := context.Background()
	run := func(b *testing.B, queue string) {
		if _, err := be.CreateQueue(ctx, queue, nil, nil); err != nil {
			b.Fatal(err)
		}
		wait := time.Duration(0)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			if _, err := be.Send(ctx, queue, []model.SendEntry{{Body: "x"}}); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			ds, err := be.Receive(ctx, model.ReceiveRequest{Queue: queue, WaitTime: &wait})
			b.StopTimer()
			if err != nil || len(ds) != 1 {
				b.Fatalf("receive: %d messages, %v", len(ds), err)
			}
			if _, err := be.Delete(ctx, queue, []model.DeleteEntry{{Receipt: ds[0].Receipt}}); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	b.Run("fresh", func(b *testing.B) { run(b, "fresh-"+stamp) })
	var churnOnce sync.Once // the sub-benchmark runs more than once (b.N probing)
	b.Run("churned", func(b *testing.B) {
		queue := "churned-" + stamp
		churnOnce.Do(func() {
			if _, err := be.CreateQueue(ctx, queue, nil, nil); err != nil {
				b.Fatal(err)
			}
			n := churnMessages(b)
			start := time.Now()
			churn(b, be, queue, n)
			b.Logf("churned %d messages in %v", n, time.Since(start).Round(time.Millisecond))
		})
		run(b, queue)
	})
}

// churn sends, receives and deletes n messages through queue, in batches of
// 10, from 4 goroutines.
func churn(b *testing.B, be *broker.Broker, queue string, n int) {
	ctx := context.Background()
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait := time.Duration(0)
			for sent := w * 10; sent < n; sent += 40 {
				entries := make([]model.SendEntry, 10)
				for i := range entries {
					entries[i] = model.SendEntry{ID: fmt.Sprint("e", i), Body: "churn"}
				}
				if _, err := be.Send(ctx, queue, entries); err != nil {
					errc <- err
					return
				}
				ds, err := be.Receive(ctx, model.ReceiveRequest{Queue: queue, MaxMessages: 10, WaitTime: &wait})
				if err != nil {
					errc <- err
					return
				}
				del := make([]model.DeleteEntry, len(ds))
				for i, d := range ds {
					del[i] = model.DeleteEntry{ID: fmt.Sprint("d", i), Receipt: d.Receipt}
				}
				if len(del) > 0 {
					if _, err := be.Delete(ctx, queue, del); err != nil {
						errc <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
}
