package embedded

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// sendTenants sends n messages for each of tenants to queue at priority p
// (no Sluice.Priority attribute when p is 0).
func (e *env) sendTenants(queue string, p, n int, tenants ...string) {
	e.t.Helper()
	for _, tenant := range tenants {
		for i := 0; i < n; i++ {
			entry := model.SendEntry{Body: fmt.Sprint(tenant, i), GroupID: tenant}
			if p != 0 {
				entry.Attributes = map[string]model.MessageAttribute{model.MsgAttrPriority: {DataType: "Number", StringValue: fmt.Sprint(p)}}
			}
			res, err := e.b.Send(context.Background(), queue, []model.SendEntry{entry})
			if err != nil || res[0].Err != nil {
				e.t.Fatalf("send: %v %v", err, res)
			}
		}
	}
}

// fairEntries counts queue's fair state: levels and (level, tenant) entries.
func (e *env) fairEntries(queue string) (levels, tenants int) {
	e.be.mu.Lock()
	defer e.be.mu.Unlock()
	q := e.be.queues[model.QueueRef{Name: queue}]
	for _, lvl := range q.fair {
		levels++
		tenants += len(lvl.tenants)
	}
	return levels, tenants
}

func (e *env) wantFairEntries(queue string, levels, tenants int) {
	e.t.Helper()
	if l, n := e.fairEntries(queue); l != levels || n != tenants {
		e.t.Fatalf("fair state of %s: %d levels, %d tenant entries; want %d, %d", queue, l, n, levels, tenants)
	}
}

// TestFairStateBounded: the per-tenant state holds one entry per (level,
// tenant) with messages in the queue, whatever way they leave it (delete,
// at-most-once receive, retention, dead-lettering, purge).
func TestFairStateBounded(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("q", map[string]string{
		model.AttrMessageRetentionPeriod: "60",
		model.AttrRedrivePolicy:          `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":1}`,
	})
	tenants := []string{"a", "b", "c", ""}
	e.sendTenants("q", 0, 3, tenants...)
	e.sendTenants("q", 7, 1, "a", "b")
	e.wantFairEntries("q", 2, 6)

	// Delete: the entries go with their tenant's last message.
	ds := e.receive("q", 10, time.Minute)
	ctx := context.Background()
	for _, d := range ds {
		if _, err := e.b.Delete(ctx, "q", []model.DeleteEntry{{ID: "d", Receipt: d.Receipt}}); err != nil {
			t.Fatal(err)
		}
	}
	// 14 messages: the 2 of level 7 and two turns of level 0 are gone,
	// one message of each tenant is left.
	e.wantFairEntries("q", 1, 4)

	// Dead-lettering: the rest leave q (their leases end on their last
	// attempt) and take turns in dlq.
	e.receive("q", 10, time.Second)
	e.clock.Advance(time.Second)
	eventually(t, "dead letters moved", func() bool { return e.stats("dlq").Visible == 4 })
	e.wantFairEntries("q", 0, 0)
	e.wantFairEntries("dlq", 1, 4)

	// Retention: q's messages expire after 60 s and are swept.
	e.sendTenants("q", 0, 2, "x")
	e.clock.Advance(time.Minute)
	eventually(t, "expired messages swept", func() bool { _, n := e.fairEntries("q"); return n == 0 })
	e.wantFairEntries("q", 0, 0)

	// Purge.
	if err := e.b.PurgeQueue(ctx, "dlq"); err != nil {
		t.Fatal(err)
	}
	e.wantFairEntries("dlq", 0, 0)

	// At-most-once: a receive removes the message.
	e.createQueue("amo", map[string]string{model.AttrDeliveryMode: model.DeliveryAtMostOnce})
	e.sendTenants("amo", 0, 2, "a", "b")
	e.receive("amo", 10, time.Minute)
	e.wantFairEntries("amo", 0, 0)

	// FIFO queues keep none.
	e.createQueue("f.fifo", map[string]string{model.AttrFifoQueue: "true", model.AttrContentBasedDeduplication: "true"})
	e.sendTenants("f.fifo", 0, 2, "a", "b")
	e.wantFairEntries("f.fifo", 0, 0)
}

// TestFairTurnsAfterRestart: recover gives turns again in send order per
// tenant, from 1, with fresh cursors.
func TestFairTurnsAfterRestart(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("q", nil)
	e.sendTenants("q", 0, 5, "noisy")
	e.receive("q", 2, time.Minute) // cursor 2; both stay in flight
	e.sendTenants("q", 0, 1, "quiet")
	turns := func() map[string][]uint64 {
		e.be.mu.Lock()
		defer e.be.mu.Unlock()
		q := e.be.queues[model.QueueRef{Name: "q"}]
		out := map[string][]uint64{}
		for k := uint64(0); k < e.be.nextKey; k++ {
			if m := q.msgs[k]; m != nil {
				out[m.groupID()] = append(out[m.groupID()], m.turn)
			}
		}
		return out
	}
	if got := fmt.Sprint(turns()); got != "map[noisy:[1 2 3 4 5] quiet:[3]]" {
		t.Fatalf("turns before the restart: %s", got)
	}
	e.restart()
	if got := fmt.Sprint(turns()); got != "map[noisy:[1 2 3 4 5] quiet:[1]]" {
		t.Fatalf("turns after the restart: %s", got)
	}
}
