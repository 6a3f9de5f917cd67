package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/postgres"
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

// TestMigration11OldQueues: a queue created before migration 11 reads the
// dedup settings' defaults (they are absent from its stored config), and its
// messages carry no dedup id; after the upgrade it takes the settings and
// deduplicates, the old messages untouched.
func TestMigration11OldQueues(t *testing.T) {
	t.Parallel()
	url, schema, conn := schemaAtVersion(t, 10)
	ctx := context.Background()
	at := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	insertOldQueue(t, conn, schema, at, "old") // as a broker of the version before stored it

	cfg := testConfig(url, schema)
	cfg.Clock = clocktest.NewFakeClock(at.Add(time.Minute))
	be, err := postgres.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	f := front(t, be, cfg.Options)
	q, err := f.GetQueue(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if q.Config.DedupWindowOf() != model.DefaultDedupWindow || q.Config.DedupUntilSettled() {
		t.Fatalf("an old queue's dedup settings: window %v, settled %v; want the defaults", q.Config.DedupWindowOf(), q.Config.DedupUntilSettled())
	}
	for name := range q.Config.Attributes() {
		if name == model.AttrDeduplicationWindowSeconds || name == model.AttrDeduplicationUntil {
			t.Fatalf("an old queue lists %s", name)
		}
	}
	var indexed bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_indexes WHERE schemaname = $1 AND indexname = 'messages_dedup')`, schema).Scan(&indexed); err != nil || !indexed {
		t.Fatalf("messages_dedup after the upgrade: %v, %v", indexed, err)
	}
	if err := f.SetQueueAttributes(ctx, "q", map[string]string{model.AttrDeduplicationUntil: "settled"}); err != nil {
		t.Fatal(err)
	}
	send := func(body string) string {
		t.Helper()
		res, err := f.Send(ctx, "q", []model.SendEntry{{Body: body, DedupID: "d"}})
		if err != nil || res[0].Err != nil {
			t.Fatal(err, res)
		}
		return res[0].MessageID
	}
	first := send("new")
	if again := send("new again"); again != first {
		t.Fatalf("after the upgrade a repeated id answered %s, want %s", again, first)
	}
	q, err = f.GetQueue(ctx, "q")
	if err != nil || q.Stats.Visible != 2 {
		t.Fatalf("%d messages (%v), want the old one and the new one", q.Stats.Visible, err)
	}
}

// TestMigrationIndexesBuiltBeforehand: the indexes that migrations 11
// (messages_dedup) and 12 (messages_ready_age) build may be built
// beforehand with CREATE INDEX CONCURRENTLY, as docs/postgres.md tells an
// operator with a large table to do; the migrations then skip them.
func TestMigrationIndexesBuiltBeforehand(t *testing.T) {
	t.Parallel()
	url, schema, conn := schemaAtVersion(t, 10)
	ctx := context.Background()
	messages := pgx.Identifier{schema, "messages"}.Sanitize()
	for _, stmt := range []string{
		`CREATE INDEX CONCURRENTLY messages_dedup ON ` + messages + ` (queue_id, dedup_id) WHERE dedup_id IS NOT NULL AND seq IS NULL`,
		`CREATE INDEX CONCURRENTLY messages_ready_age ON ` + messages + ` (queue_id, visible_at) WHERE state = 'r'`,
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	if err := postgres.MigrateTo(ctx, url, schema, 12); err != nil {
		t.Fatalf("the migrations after the indexes were built beforehand: %v", err)
	}
}
