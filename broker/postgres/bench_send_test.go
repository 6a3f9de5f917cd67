package postgres_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/broker/storage"
)

// BenchmarkSend measures one Send to a standard queue that keeps what it is
// sent (a growing backlog, as a queue without consumers): one message
// without a MessageGroupId ("one"), a batch of 10 of them ("batch10"), a
// batch of 10 messages of 10 tenants out of 100 ("tenants", fair queues:
// MessageGroupId names the tenant); and one message to a churned queue
// that its consumer keeps empty ("churned"). docs/postgres.md compares the
// fair queues' cost with these figures.
func BenchmarkSend(b *testing.B) {
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
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	run := func(b *testing.B, name string, entries func(i int) []model.SendEntry) {
		queue := name + "-" + stamp + "-" + strconv.Itoa(b.N)
		if _, err := be.CreateQueue(ctx, queue, nil, nil); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := be.Send(ctx, queue, entries(i)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("one", func(b *testing.B) {
		run(b, "one", func(int) []model.SendEntry { return []model.SendEntry{{Body: "x"}} })
	})
	b.Run("batch10", func(b *testing.B) {
		run(b, "batch10", func(int) []model.SendEntry {
			es := make([]model.SendEntry, 10)
			for j := range es {
				es[j] = model.SendEntry{ID: strconv.Itoa(j), Body: "x"}
			}
			return es
		})
	})
	// churned: one message to a queue through which SLUICE_PG_BENCH_MESSAGES
	// messages were just sent, received and deleted (BenchmarkReceive's
	// churn), received and deleted after each send (untimed): the send's
	// reads of the queue's indexes cross their dead entries.
	var churnOnce sync.Once
	churned := "churned-" + stamp
	b.Run("churned", func(b *testing.B) {
		churnOnce.Do(func() {
			if _, err := be.CreateQueue(ctx, churned, nil, nil); err != nil {
				b.Fatal(err)
			}
			churn(b, be, churned, churnMessages(b))
		})
		wait := time.Duration(0)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := be.Send(ctx, churned, []model.SendEntry{{Body: "x"}}); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			ds, err := be.Receive(ctx, model.ReceiveRequest{Queue: churned, WaitTime: &wait})
			if err != nil || len(ds) != 1 {
				b.Fatalf("receive: %d messages, %v", len(ds), err)
			}
			if _, err := be.Delete(ctx, churned, []model.DeleteEntry{{Receipt: ds[0].Receipt}}); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	b.Run("tenants", func(b *testing.B) {
		run(b, "tenants", func(i int) []model.SendEntry {
			es := make([]model.SendEntry, 10)
			for j := range es {
				es[j] = model.SendEntry{ID: strconv.Itoa(j), Body: "x", GroupID: fmt.Sprint("t", (i*10+j)%100)}
			}
			return es
		})
	})
}
