package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker"
)

// TestFifoClaimRechecksGroupUnderLock: the statement that picks and locks a
// FIFO claim's candidate groups sees the data as of its start; another
// broker's claim of the same group can commit after that and before the row
// lock is taken (it then holds no lock any more, and the group row itself is
// unchanged, so PostgreSQL does not re-check it). If the consumer of that
// batch then frees only its first message (a visibility change to 0), that
// message is ready again at the group's head while the rest of the batch is
// in flight. The claim must re-read the group under its lock and skip it:
// never two receive batches of one group in flight at once.
//
// The race is inside one statement, so the test stands in for it: a hook
// runs after the candidate groups are locked and commits, on another
// session, the state that the other broker's claim and the consumer's
// visibility change leave (message 1 ready, messages 2 and 3 leased).
func TestFifoClaimRechecksGroupUnderLock(t *testing.T) {
	schema := schemaFor(t)
	a, _, _ := openPair(t, schema, nil)
	ctx := context.Background()
	fifo := map[string]string{broker.AttrFifoQueue: "true", broker.AttrContentBasedDeduplication: "true"}
	if _, err := a.CreateQueue(ctx, "q.fifo", fifo, nil); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		if _, err := a.Send(ctx, "q.fifo", []broker.SendEntry{{Body: fmt.Sprint("m", i), GroupID: "g"}}); err != nil {
			t.Fatal(err)
		}
	}
	other, err := pgx.Connect(ctx, requirePostgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	msgs := pgx.Identifier{schema, "messages"}.Sanitize()
	counts := pgx.Identifier{schema, "counts"}.Sanitize()
	fired := false
	a.SetAfterFifoCandidates(func(groups []string) {
		if fired || len(groups) != 1 || groups[0] != "g" {
			return
		}
		fired = true
		// The other broker's committed claim of messages 1..3, after which
		// message 1 was made visible again: 2 and 3 stay leased.
		tx, err := other.Begin(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		defer tx.Rollback(ctx) //nolint:errcheck
		tag, err := tx.Exec(ctx, `UPDATE `+msgs+` SET state = 'i', lease = lease + 1, receive_count = receive_count + 1,
			visible_at = visible_at + interval '1 hour'
			WHERE group_id = 'g' AND seq > (SELECT min(seq) FROM `+msgs+` WHERE group_id = 'g')`)
		if err != nil || tag.RowsAffected() != 2 {
			t.Errorf("leasing messages 2 and 3: %v (%d rows)", err, tag.RowsAffected())
			return
		}
		if _, err := tx.Exec(ctx, `UPDATE `+counts+` SET ready = ready - 2, inflight = inflight + 2
			WHERE (queue_id, shard) = (SELECT queue_id, shard FROM `+counts+` LIMIT 1)`); err != nil {
			t.Error(err)
			return
		}
		if err := tx.Commit(ctx); err != nil {
			t.Error(err)
		}
	})
	ds, err := a.Receive(ctx, broker.ReceiveRequest{Queue: "q.fifo", MaxMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !fired {
		t.Fatal("the claim never locked group g as its only candidate")
	}
	if len(ds) > 0 {
		t.Fatalf("received %q of group g while messages 2 and 3 of the group were in flight (two batches of one group in flight)", ds[0].Body)
	}
}
