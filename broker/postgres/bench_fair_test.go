package postgres_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/broker/storage"
)

// BenchmarkFairQuietTenant measures a quiet tenant's wait with and without a
// noisy tenant's backlog of 10,000 messages: an op sends one message of the
// quiet tenant, then receives (10 at a time) and deletes until it has it,
// and tops the backlog up again (untimed). served-before/op is how many
// messages were received before the quiet one; ns/op the time from its send
// to its receive. Before fair queues, the whole backlog was served first.
func BenchmarkFairQuietTenant(b *testing.B) {
	url := requirePostgres(b)
	cfg := testConfig(url, schemaFor(b))
	cfg.MaxConns = 8
	pb, err := postgres.Open(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pb.Close() })
	be := front(b, pb, storage.Options{})
	ctx := context.Background()
	fill := func(queue string, n int) {
		for n > 0 {
			batch := make([]model.SendEntry, min(n, 10))
			for i := range batch {
				batch[i] = model.SendEntry{ID: strconv.Itoa(i), Body: "noise", GroupID: "noisy"}
			}
			if _, err := be.Send(ctx, queue, batch); err != nil {
				b.Fatal(err)
			}
			n -= len(batch)
		}
	}
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, backlog := range []int{0, 10_000} {
		b.Run(fmt.Sprintf("backlog=%d", backlog), func(b *testing.B) {
			queue := fmt.Sprintf("quiet-%d-%s-%d", backlog, stamp, b.N)
			if _, err := be.CreateQueue(ctx, queue, nil, nil); err != nil {
				b.Fatal(err)
			}
			fill(queue, backlog)
			vis, wait := time.Hour, time.Duration(0)
			req := model.ReceiveRequest{Queue: queue, MaxMessages: 10, Visibility: &vis, WaitTime: &wait}
			served := 0
			b.ResetTimer()
			for range b.N {
				if _, err := be.Send(ctx, queue, []model.SendEntry{{Body: "quiet", GroupID: "quiet"}}); err != nil {
					b.Fatal(err)
				}
				consumed, found := 0, false
				for !found {
					ds, err := be.Receive(ctx, req)
					if err != nil || len(ds) == 0 {
						b.Fatalf("receive: %d messages, %v", len(ds), err)
					}
					entries := make([]model.DeleteEntry, len(ds))
					for i, d := range ds {
						entries[i] = model.DeleteEntry{ID: strconv.Itoa(i), Receipt: d.Receipt}
						if d.GroupID == "quiet" {
							found = true
							continue
						}
						if !found {
							served++
						}
						consumed++
					}
					if _, err := be.Delete(ctx, queue, entries); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				fill(queue, consumed)
				b.StartTimer()
			}
			b.ReportMetric(float64(served)/float64(b.N), "served-before/op")
		})
	}
}
