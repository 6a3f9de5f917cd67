package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/postgres"
)

// TestMigration16OldRows: a message stored before migration 16 is found by
// its id after it (the index covers the old rows), and its queue, whose
// stored config has no CompletedRetention, keeps no record until set.
func TestMigration16OldRows(t *testing.T) {
	t.Parallel()
	url, schema, conn := schemaAtVersion(t, 15)
	ctx := context.Background()
	at := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	insertOldQueue(t, conn, schema, at, "old")
	const old = "00000000-0000-4000-8000-000000000001" // insertOldQueue's first id
	_, f, _ := openOnClock(t, url, schema, at.Add(time.Minute))
	st, found, err := f.MessageStatus(ctx, "q", old)
	if err != nil || !found || st.State != model.JobReady {
		t.Fatalf("the old message's status: %+v, %v, %v; want ready", st, found, err)
	}
	q, err := f.GetQueue(ctx, "q")
	if err != nil || q.Config.CompletedRetention != 0 {
		t.Fatalf("an old queue's CompletedRetention: %v, %v; want 0", q.Config.CompletedRetention, err)
	}
	ds, err := f.Receive(ctx, model.ReceiveRequest{Queue: "q"})
	if err != nil || len(ds) != 1 {
		t.Fatal(err, ds)
	}
	if errs, err := f.Delete(ctx, "q", []model.DeleteEntry{{Receipt: ds[0].Receipt}}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	if _, found, err := f.MessageStatus(ctx, "q", old); err != nil || found {
		t.Fatalf("a deleted message of a queue without CompletedRetention: found %v, %v", found, err)
	}
}

// TestMigration16IndexBuiltBeforehand: an operator may build
// messages_message_id beforehand with CREATE INDEX CONCURRENTLY; migration
// 16 then skips it.
func TestMigration16IndexBuiltBeforehand(t *testing.T) {
	t.Parallel()
	url, schema, conn := schemaAtVersion(t, 15)
	ctx := context.Background()
	messages := pgx.Identifier{schema, "messages"}.Sanitize()
	if _, err := conn.Exec(ctx, `CREATE INDEX CONCURRENTLY messages_message_id ON `+messages+` (queue_id, message_id)`); err != nil {
		t.Fatal(err)
	}
	if err := postgres.MigrateTo(ctx, url, schema, 16); err != nil {
		t.Fatalf("migration 16 after its index was built beforehand: %v", err)
	}
}

// TestMigration18OldRows: a message stored before migration 18 has no
// failure history after it (its failures column is NULL), keeps its last
// reason, and starts a history with its next failure.
func TestMigration18OldRows(t *testing.T) {
	t.Parallel()
	url, schema, conn := schemaAtVersion(t, 17)
	ctx := context.Background()
	at := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	insertOldQueue(t, conn, schema, at, "old")
	const old = "00000000-0000-4000-8000-000000000001" // insertOldQueue's first id
	if _, err := conn.Exec(ctx, `UPDATE `+pgx.Identifier{schema, "messages"}.Sanitize()+`
		SET receive_count = 1, attempts = 1, reason = 'old reason' WHERE message_id = $1`, old); err != nil {
		t.Fatal(err)
	}
	_, f, clock := openOnClock(t, url, schema, at.Add(time.Minute))
	st, found, err := f.MessageStatus(ctx, "q", old)
	if err != nil || !found || st.Reason != "old reason" || st.Failures != nil || st.FailureCount != 0 {
		t.Fatalf("the old message's status: %+v, %v, %v; want its reason and no history", st, found, err)
	}
	ds, err := f.Receive(ctx, model.ReceiveRequest{Queue: "q"})
	if err != nil || len(ds) != 1 {
		t.Fatal(err, ds)
	}
	clock.Advance(time.Second)
	if errs, err := f.ChangeLeases(ctx, "q", []model.LeaseEntry{{Receipt: ds[0].Receipt, Kind: model.Nack, Reason: "new"}}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	st, _, err = f.MessageStatus(ctx, "q", old)
	if err != nil || st.Reason != "new" || st.FailureCount != 1 || len(st.Failures) != 1 || st.Failures[0].Reason != "new" ||
		!st.Failures[0].At.Equal(at.Add(time.Minute+time.Second)) {
		t.Fatalf("after a nack: %+v, %v; want a history of that nack", st, err)
	}
}
