package embedded

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
)

// The fair-queue benchmarks run on an in-memory filesystem: without the
// WAL's fsync, what is left is the broker's own work, of which the ready
// order is a part, so its cost shows at its largest.

// setupMem is setup on vfs.NewMem (nothing survives the benchmark).
func setupMem(b *testing.B) *env {
	b.Helper()
	e := &env{t: b, clock: clocktest.NewFakeClock(t0), dir: "/bench", fs: vfs.NewMem()}
	e.open()
	b.Cleanup(func() { _ = e.be.Close() })
	return e
}

// fill sends n messages of tenant (MessageGroupId) to queue, ten per call.
func (e *env) fill(queue, tenant string, n int) {
	e.t.Helper()
	batch := make([]model.SendEntry, 0, 10)
	for i := 0; i < n; i++ {
		batch = append(batch, model.SendEntry{ID: fmt.Sprint("e", len(batch)), Body: "noise", GroupID: tenant})
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := e.b.Send(context.Background(), queue, batch); err != nil {
				e.t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

// BenchmarkFairQuietTenant measures a quiet tenant's wait with and without a
// noisy tenant's backlog of 100,000 messages: an op sends one message of the
// quiet tenant, then receives (10 at a time) and deletes until it has it,
// and tops the backlog up again (untimed). served-before/op is how many
// messages were received before the quiet one; ns/op the time from its send
// to its receive. Before fair queues, the backlog's whole length was served
// first.
func BenchmarkFairQuietTenant(b *testing.B) {
	for _, backlog := range []int{0, 100_000} {
		b.Run(fmt.Sprintf("backlog=%d", backlog), func(b *testing.B) {
			e := setupMem(b)
			e.createQueue("q", nil)
			e.fill("q", "noisy", backlog)
			ctx := context.Background()
			vis, wait := time.Hour, time.Duration(0)
			req := model.ReceiveRequest{Queue: "q", MaxMessages: 10, Visibility: &vis, WaitTime: &wait}
			served := 0
			b.ResetTimer()
			for range b.N {
				if _, err := e.b.Send(ctx, "q", []model.SendEntry{{Body: "quiet", GroupID: "quiet"}}); err != nil {
					b.Fatal(err)
				}
				consumed, found := 0, false
				for !found {
					ds, err := e.b.Receive(ctx, req)
					if err != nil || len(ds) == 0 {
						b.Fatalf("receive: %d messages, %v", len(ds), err)
					}
					entries := make([]model.DeleteEntry, len(ds))
					for i, d := range ds {
						entries[i] = model.DeleteEntry{ID: fmt.Sprint("d", i), Receipt: d.Receipt}
						if d.GroupID == "quiet" {
							found = true
							continue
						}
						if !found {
							served++
						}
						consumed++
					}
					if _, err := e.b.Delete(ctx, "q", entries); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				e.fill("q", "noisy", consumed)
				b.StartTimer()
			}
			b.ReportMetric(float64(served)/float64(b.N), "served-before/op")
		})
	}
}

// BenchmarkFairSendReceive measures the whole path of 10 messages (a batch
// send, a receive of 10, a batch delete) on a queue that holds a standing
// backlog of 10,000 messages spread over tenants (1: one tenant, as a queue
// without MessageGroupId; 100: the messages of a batch from 10 tenants,
// cycling over 100). Compare it with the code before fair queues: the
// ordering is the only difference.
func BenchmarkFairSendReceive(b *testing.B) {
	for _, tenants := range []int{1, 100} {
		b.Run(fmt.Sprintf("tenants=%d", tenants), func(b *testing.B) {
			e := setupMem(b)
			e.createQueue("q", nil)
			ctx := context.Background()
			batch := make([]model.SendEntry, 10)
			k := 0
			send := func() {
				for i := range batch {
					batch[i] = model.SendEntry{ID: fmt.Sprint("e", i), Body: "body", GroupID: fmt.Sprint("t", k%tenants)}
					k++
				}
				if _, err := e.b.Send(ctx, "q", batch); err != nil {
					b.Fatal(err)
				}
			}
			for range 1000 {
				send()
			}
			vis, wait := time.Hour, time.Duration(0)
			req := model.ReceiveRequest{Queue: "q", MaxMessages: 10, Visibility: &vis, WaitTime: &wait}
			b.ResetTimer()
			for range b.N {
				send()
				ds, err := e.b.Receive(ctx, req)
				if err != nil || len(ds) != 10 {
					b.Fatalf("receive: %d messages, %v", len(ds), err)
				}
				entries := make([]model.DeleteEntry, len(ds))
				for i, d := range ds {
					entries[i] = model.DeleteEntry{ID: fmt.Sprint("d", i), Receipt: d.Receipt}
				}
				if _, err := e.b.Delete(ctx, "q", entries); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(10*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkFairIndex measures the ready order alone, in memory: a queue
// index holding 10,000 ready messages over tenants takes one new message
// (q.add) and gives up the first in order (a claim: unplace, cursor,
// forget) per op. No store, no lock, no clock.
func BenchmarkFairIndex(b *testing.B) {
	for _, tenants := range []int{1, 100} {
		b.Run(fmt.Sprintf("tenants=%d", tenants), func(b *testing.B) {
			q := newQueue(queueRecord{ID: 1, Name: "q", Config: model.DefaultQueueConfig(false)})
			groups := make([]string, tenants)
			for i := range groups {
				groups[i] = fmt.Sprint("t", i)
			}
			key := uint64(0)
			add := func() {
				key++
				m := &msg{key: key, state: stateReady, pos: -1, agePos: -1}
				m.setGroupID(groups[int(key)%tenants])
				q.add(m, 0)
			}
			for range 10_000 {
				add()
			}
			b.ResetTimer()
			for range b.N {
				add()
				m := q.ready[0]
				q.unplace(m)
				q.fairClaimed(m)
				q.forget(m)
			}
		})
	}
}
