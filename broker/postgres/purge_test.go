package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/postgres"
)

// TestPurgeIsShort: a purge of a queue of many messages, one of them locked
// by another session (standing for a long batch change), with the smallest
// statement_timeout the backend allows, is one short transaction that
// touches no message row: it returns at once, and right after it the queue
// is empty (receives, counts, the purged receipts) while a message sent
// after it is kept and delivered. The sweeper then deletes the purged rows
// in bounded batches, skipping the locked one until it is released.
func TestPurgeIsShort(t *testing.T) {
	const bulk = 100_000
	schema := schemaFor(t)
	a, _, clock := openPair(t, schema, func(c *postgres.Config) { c.StatementTimeout = time.Second })
	ctx := context.Background()
	if _, err := a.CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"leased", "ready"} {
		if _, err := a.Send(ctx, "q", []model.SendEntry{{Body: body}}); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := a.Receive(ctx, model.ReceiveRequest{Queue: "q"})
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive before the purge: %v, %v", ds, err)
	}
	leased := ds[0].Receipt

	conn, err := pgx.Connect(ctx, requirePostgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	ident := func(table string) string { return pgx.Identifier{schema, table}.Sanitize() }
	var oldMid int64
	if err := conn.QueryRow(ctx, "SELECT mid FROM "+ident("queues")+" WHERE name = 'q'").Scan(&oldMid); err != nil {
		t.Fatal(err)
	}
	// Many more messages, inserted directly (and counted) to keep the test fast.
	start := time.Now()
	if _, err := conn.Exec(ctx, `INSERT INTO `+ident("messages")+` (queue_id, state, visible_at, sent_at, message_id, body)
		SELECT $1, 'r', $2::timestamptz, $2::timestamptz, gen_random_uuid(), 'bulk ' || i FROM generate_series(1, $3) i`,
		oldMid, clock.Now(), bulk); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO `+ident("counts")+` AS c (queue_id, shard, ready) VALUES ($1, 0, $2)
		ON CONFLICT (queue_id, shard) DO UPDATE SET ready = c.ready + excluded.ready`, oldMid, bulk); err != nil {
		t.Fatal(err)
	}
	t.Logf("inserted %d messages in %v", bulk, time.Since(start))
	info, err := a.GetQueue(ctx, "q")
	if err != nil || info.Stats.Visible != bulk+1 || info.Stats.InFlight != 1 {
		t.Fatalf("before the purge: %+v, %v", info.Stats, err)
	}

	// Another session holds a message row: a purge that deleted the rows
	// would wait for it until its statement_timeout.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+ident("messages")+" WHERE queue_id = $1 AND body = 'ready' FOR UPDATE", oldMid); err != nil {
		t.Fatal(err)
	}

	start = time.Now()
	if err := a.PurgeQueue(ctx, "q"); err != nil {
		t.Fatalf("PurgeQueue: %v", err)
	}
	t.Logf("purge of %d messages took %v", bulk+2, time.Since(start))

	info, err = a.GetQueue(ctx, "q")
	if err != nil || info.Stats != (model.QueueStats{}) {
		t.Fatalf("right after the purge: %+v, %v; want all 0", info.Stats, err)
	}
	if ds, err := a.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 10}); err != nil || len(ds) != 0 {
		t.Fatalf("receive right after the purge: %d messages, %v; want none", len(ds), err)
	}
	// The purged lease: a delete succeeds as for a deleted message, a
	// visibility change fails as for one.
	if errs, err := a.Delete(ctx, "q", []model.DeleteEntry{{ID: "1", Receipt: leased}}); err != nil || errs[0] != nil {
		t.Fatalf("delete of a purged message's receipt: %v, %v; want success", errs, err)
	}
	if errs, err := a.ChangeVisibility(ctx, "q", []model.VisibilityEntry{{ID: "1", Receipt: leased, Timeout: time.Minute}}); err != nil || errs[0] == nil {
		t.Fatalf("visibility change of a purged message: %v, %v; want an error", errs, err)
	}

	// A message sent right after the purge is kept and delivered.
	if _, err := a.Send(ctx, "q", []model.SendEntry{{Body: "after"}}); err != nil {
		t.Fatal(err)
	}
	ds, err = a.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 10})
	if err != nil || len(ds) != 1 || ds[0].Body != "after" {
		t.Fatalf("receive after the purge: %v, %v; want the message sent after it", ds, err)
	}
	info, err = a.GetQueue(ctx, "q")
	if err != nil || info.Stats.Visible != 0 || info.Stats.InFlight != 1 || info.Stats.Delayed != 0 {
		t.Fatalf("after a send and receive following the purge: %+v, %v", info.Stats, err)
	}

	// The sweeper deletes the purged rows in batches, skipping the locked
	// one; once it is released, that one too.
	count := func(mid int64) int64 {
		t.Helper()
		var n int64
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+ident("messages")+" WHERE queue_id = $1", mid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	sweepUntil := func(what string, done func() bool) {
		t.Helper()
		for i := 0; !done(); i++ {
			if i == 1000 {
				t.Fatalf("the sweeper never got %s", what)
			}
			if err := raw(a).SweepOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	start = time.Now()
	sweepUntil("down to the locked row", func() bool { return count(oldMid) <= 1 })
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	sweepUntil("the purged rows deleted", func() bool { return count(oldMid) == 0 })
	t.Logf("the sweep of the purged rows took %v", time.Since(start))
	var newMid int64
	if err := conn.QueryRow(ctx, "SELECT mid FROM "+ident("queues")+" WHERE name = 'q'").Scan(&newMid); err != nil {
		t.Fatal(err)
	}
	if newMid == oldMid || count(newMid) != 1 {
		t.Fatalf("after the sweep: mid %d (was %d), %d messages; want the one sent after the purge", newMid, oldMid, count(newMid))
	}
	// A minute later the purged message space's counters and record go too.
	clock.Advance(2 * time.Minute)
	left := func() int64 {
		var n int64
		if err := conn.QueryRow(ctx, "SELECT (SELECT count(*) FROM "+ident("purged")+") + (SELECT count(*) FROM "+
			ident("counts")+" WHERE queue_id = $1)", oldMid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	sweepUntil("the purge record reclaimed", func() bool { return left() == 0 })
}
