package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/internal/testutil"
)

// TestMigration14OldQueues: a queue and a message stored before migration
// 14 (time to live) read as a queue without a default time to live and a
// message without an expiry: the message stays receivable past any time to
// live, and the queue takes the settings after the upgrade, for the
// messages sent then. The migration adds the column without a default (no
// row is rewritten) and the partial index messages_expiry.
func TestMigration14OldQueues(t *testing.T) {
	t.Parallel()
	url, schema, conn := schemaAtVersion(t, 13)
	ctx := context.Background()
	at := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	insertOldQueue(t, conn, schema, at, "old") // as a broker of the version before stored it

	cfg := testConfig(url, schema)
	clock := clocktest.NewFakeClock(at.Add(time.Minute))
	cfg.Clock = clock
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
	if q.Config.TimeToLive != 0 || q.Config.ExpiredActionOf() != model.ExpiredDrop {
		t.Fatalf("an old queue's time-to-live settings: %v, %s; want none, drop", q.Config.TimeToLive, q.Config.ExpiredActionOf())
	}
	for name := range q.Config.Attributes() {
		if name == model.AttrMessageTimeToLive || name == model.AttrExpiredMessageAction {
			t.Fatalf("an old queue lists %s", name)
		}
	}
	var indexed bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_indexes WHERE schemaname = $1 AND indexname = 'messages_expiry')`, schema).Scan(&indexed); err != nil || !indexed {
		t.Fatalf("messages_expiry after the upgrade: %v, %v", indexed, err)
	}
	if err := f.SetQueueAttributes(ctx, "q", map[string]string{model.AttrMessageTimeToLive: "60"}); err != nil {
		t.Fatal(err)
	}
	if res, err := f.Send(ctx, "q", []model.SendEntry{{Body: "new"}}); err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	clock.Advance(time.Hour)
	ds, err := f.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].Body != "old" {
		t.Fatalf("received %d messages (%v), want the old one only: the new one expired", len(ds), ds)
	}
}

// TestMigration14IndexBuiltBeforehand: an operator with a large messages
// table may add the column and build messages_expiry beforehand with
// CREATE INDEX CONCURRENTLY, as docs/postgres.md says; migration 14 then
// skips both.
func TestMigration14IndexBuiltBeforehand(t *testing.T) {
	t.Parallel()
	url, schema, conn := schemaAtVersion(t, 13)
	ctx := context.Background()
	messages := pgx.Identifier{schema, "messages"}.Sanitize()
	for _, stmt := range []string{
		`ALTER TABLE ` + messages + ` ADD COLUMN expires_at timestamptz`,
		`CREATE INDEX CONCURRENTLY messages_expiry ON ` + messages + ` (queue_id, expires_at) WHERE expires_at IS NOT NULL`,
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	if err := postgres.MigrateTo(ctx, url, schema, 14); err != nil {
		t.Fatalf("migration 14 after its column and index were made beforehand: %v", err)
	}
}

// TestSweeperCountsExpiriesPassedDuringItsSweep: an expiry that passes
// while a sweep runs, after the sweep expired what was due, still wakes the
// sweeper at once. The sweep used to compute its next wake-up from the
// expiries still to come at that instant, and slept for sweepIdle (a
// minute) past one that had just passed: a test whose clock moved during a
// sweep saw the message stay. The hook moves the fake clock at that point
// of one sweep; the message must then go with no further move, and the
// test reads the table, not through the broker, whose reads expire too.
func TestSweeperCountsExpiriesPassedDuringItsSweep(t *testing.T) {
	t.Parallel()
	url := requirePostgres(t)
	schema := schemaFor(t)
	ctx := context.Background()
	be, f, clock := openOnClock(t, url, schema, time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC))
	if _, err := f.CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	conn := func() *pgx.Conn {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return c
	}
	table := pgx.Identifier{schema, "messages"}.Sanitize()
	count := func(c *pgx.Conn) int {
		var n int
		if err := c.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil {
			t.Error(err)
			return -1
		}
		return n
	}
	// The first sweep that finds the message, not yet expired, moves the
	// clock to its expiry after expiring what was due: no further send,
	// kick or clock move comes to wake the sweeper for it.
	hookConn, moved := conn(), false
	be.SetAfterSweepTTL(func() {
		if !moved && count(hookConn) == 1 {
			moved = true
			clock.Advance(10 * time.Second)
		}
	})
	res, err := f.Send(ctx, "q", []model.SendEntry{{Body: "a",
		Attributes: map[string]model.MessageAttribute{model.MsgAttrTimeToLive: {DataType: "Number", StringValue: "10"}}}})
	if err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	c := conn()
	testutil.Eventually(t, 20*time.Second, "the expired message deleted by the sweeper", func() bool { return count(c) == 0 })
}
