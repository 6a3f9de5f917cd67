package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
)

// TestDedupAcrossBrokers: two brokers on one schema share the dedup window
// and the settled ids of a standard queue (they live in PostgreSQL): a send
// through one broker is a duplicate of a send through the other, and
// concurrent sends of one id through both store exactly one message,
// whose id every send is answered with.
func TestDedupAcrossBrokers(t *testing.T) {
	a, b, clock := openPair(t, schemaFor(t), nil)
	ctx := context.Background()
	if _, err := a.CreateQueue(ctx, "q", map[string]string{
		model.AttrDeduplicationUntil: "settled", model.AttrDeduplicationWindowSeconds: "60",
	}, nil); err != nil {
		t.Fatal(err)
	}
	send := func(f *broker.Broker, id, body string) string {
		t.Helper()
		res, err := f.Send(ctx, "q", []model.SendEntry{{Body: body, DedupID: id}})
		if err != nil || res[0].Err != nil {
			t.Fatal(err, res)
		}
		return res[0].MessageID
	}
	orig := send(a, "charge-1", "x")
	if got := send(b, "charge-1", "y"); got != orig {
		t.Fatalf("a duplicate through the other broker answered %s, want %s", got, orig)
	}
	clock.Advance(2 * time.Minute) // past the window: the queued message holds the id
	if got := send(b, "charge-1", "y"); got != orig {
		t.Fatalf("a settled duplicate through the other broker answered %s, want %s", got, orig)
	}
	ds, err := b.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 10})
	if err != nil || len(ds) != 1 || ds[0].ID != orig {
		t.Fatalf("received %v, %v; want the one message %s", ds, err, orig)
	}
	if got := send(a, "charge-1", "z"); got != orig {
		t.Fatalf("in flight on the other broker: answered %s, want %s", got, orig)
	}
	if errs, err := a.Delete(ctx, "q", []model.DeleteEntry{{ID: "1", Receipt: ds[0].Receipt}}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}

	// Concurrent sends of fresh ids through both brokers, each id sent by
	// several goroutines per broker at once.
	const ids, senders = 20, 4
	var mu sync.Mutex
	answers := map[string]map[string]bool{}
	var wg sync.WaitGroup
	for _, f := range []*broker.Broker{a, b} {
		for range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range ids {
					id := fmt.Sprint("job-", i)
					res, err := f.Send(ctx, "q", []model.SendEntry{{Body: id, DedupID: id}})
					if err != nil || res[0].Err != nil {
						t.Error(err, res)
						return
					}
					mu.Lock()
					if answers[id] == nil {
						answers[id] = map[string]bool{}
					}
					answers[id][res[0].MessageID] = true
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	for id, got := range answers {
		if len(got) != 1 {
			t.Errorf("%s was answered with %d message ids, want one: %v", id, len(got), got)
		}
	}
	q, err := a.GetQueue(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if q.Stats.Visible != ids {
		t.Fatalf("%d messages stored for %d ids sent %d times each", q.Stats.Visible, ids, 2*senders)
	}
}
