package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
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
	fifo := map[string]string{model.AttrFifoQueue: "true", model.AttrContentBasedDeduplication: "true"}
	if _, err := a.CreateQueue(ctx, "q.fifo", fifo, nil); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		if _, err := a.Send(ctx, "q.fifo", []model.SendEntry{{Body: fmt.Sprint("m", i), GroupID: "g"}}); err != nil {
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
	raw(a).SetAfterFifoCandidates(func(groups []string) {
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
	ds, err := a.Receive(ctx, model.ReceiveRequest{Queue: "q.fifo", MaxMessages: 10})
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

// TestFifoShortPollWaitsForGroupLock: a group row is locked not only by
// receives but, briefly, by a send to the group, the sweeper's dead-letter
// move into it, or its pruneGroups (whose snapshot may predate the group's
// newest message: it then holds the row of a group with a ready message
// until its transaction ends). A short poll of an otherwise idle queue must
// not answer empty because of such a lock (a CI flake of the conformance
// tests FIFO/AttemptExpiresAfterWindow and FIFO/DeadLetterMove): when every
// receivable group is locked, the claim waits for the oldest one's lock.
// Another session holds the group's row lock as those do.
func TestFifoShortPollWaitsForGroupLock(t *testing.T) {
	t.Parallel()
	schema := schemaFor(t)
	a, _, _ := openPair(t, schema, nil)
	ctx := context.Background()
	fifo := map[string]string{model.AttrFifoQueue: "true", model.AttrContentBasedDeduplication: "true"}
	if _, err := a.CreateQueue(ctx, "q.fifo", fifo, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(ctx, "q.fifo", []model.SendEntry{{Body: "m1", GroupID: "g"}}); err != nil {
		t.Fatal(err)
	}
	url := requirePostgres(t)
	other, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	tag, err := tx.Exec(ctx, `SELECT 1 FROM `+pgx.Identifier{schema, "groups"}.Sanitize()+` WHERE group_id = 'g' FOR UPDATE`)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("locking group g's row: %v (%d rows)", err, tag.RowsAffected())
	}
	done := goReceive(ctx, a, model.ReceiveRequest{Queue: "q.fifo", MaxMessages: 10, WaitTime: new(time.Duration)})
	waitBlockedBy(t, ctx, url, other.PgConn().PID(), done, "the short poll, while group g's row was locked,")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || len(r.ds) != 1 || r.ds[0].Body != "m1" {
		t.Fatalf("short poll after the lock was released: %d messages, %v; want m1", len(r.ds), r.err)
	}
}

// TestFifoRedriveSeqAfterGroupLock: a claim that moves a message to a FIFO
// dead-letter queue gives it a new sequence number there, and must take it
// only under the dead-letter group's row lock, as a send does: otherwise a
// send (or another source's redrive) into that group can take a later number,
// commit first and be received first, and the moved message, committed
// after it with an earlier number, is delivered out of order.
//
// Another session holds the dead-letter group's row lock, as a send does
// between locking its group and committing; the claim must wait for it
// before taking its sequence number; the session then takes one (as the
// send would) and commits. The moved message must come after it.
func TestFifoRedriveSeqAfterGroupLock(t *testing.T) {
	schema := schemaFor(t)
	a, _, clock := openPair(t, schema, nil)
	ctx := context.Background()
	fifo := map[string]string{model.AttrFifoQueue: "true", model.AttrContentBasedDeduplication: "true"}
	if _, err := a.CreateQueue(ctx, "dlq.fifo", fifo, nil); err != nil {
		t.Fatal(err)
	}
	redrive := func(n int) string {
		return fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":%d}`, model.ARN("us-east-1", "000000000000", "dlq.fifo"), n)
	}
	src := map[string]string{model.AttrFifoQueue: "true", model.AttrContentBasedDeduplication: "true",
		model.AttrRedrivePolicy: redrive(2)}
	if _, err := a.CreateQueue(ctx, "src.fifo", src, nil); err != nil {
		t.Fatal(err)
	}
	// The group's row in the DLQ, created by a send there.
	for _, s := range []struct{ q, body string }{{"dlq.fifo", "first"}, {"src.fifo", "m"}} {
		if _, err := a.Send(ctx, s.q, []model.SendEntry{{Body: s.body, GroupID: "g"}}); err != nil {
			t.Fatal(err)
		}
	}
	vis := time.Second
	ds, err := a.Receive(ctx, model.ReceiveRequest{Queue: "src.fifo", Visibility: &vis})
	if err != nil || len(ds) != 1 {
		t.Fatal(ds, err)
	}
	// A nack leaves m visible (its first of two attempts); lowering
	// maxReceiveCount to 1 then makes the next receive move it (a failed
	// last attempt is moved by the failure itself: not the claim's path).
	if errs, err := a.ChangeVisibility(ctx, "src.fifo", []model.VisibilityEntry{{ID: "1", Receipt: ds[0].Receipt}}); err != nil || errs[0] != nil {
		t.Fatal(errs, err)
	}
	if err := a.SetQueueAttributes(ctx, "src.fifo", map[string]string{model.AttrRedrivePolicy: redrive(1)}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)

	url := requirePostgres(t)
	other, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	groups := pgx.Identifier{schema, "groups"}.Sanitize()
	queues := pgx.Identifier{schema, "queues"}.Sanitize()
	var dlqID int64
	if err := tx.QueryRow(ctx, `SELECT g.queue_id FROM `+groups+` g JOIN `+queues+` q ON q.id = g.queue_id
		WHERE q.name = 'dlq.fifo' AND g.group_id = 'g' FOR UPDATE`).Scan(&dlqID); err != nil {
		t.Fatal(err)
	}
	done := goReceive(ctx, a, model.ReceiveRequest{Queue: "src.fifo"})
	// Wait until the claim waits for the lock (without the fix it has taken
	// its sequence number by then).
	waitBlockedBy(t, ctx, url, other.PgConn().PID(), done, "the receive past maxReceiveCount, before the DLQ group's lock was released,")
	var sendSeq int64
	if err := tx.QueryRow(ctx, "SELECT nextval('"+schema+".fifo_seq')").Scan(&sendSeq); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || len(r.ds) != 0 {
		t.Fatalf("receive past maxReceiveCount: %d messages, %v; want none (moved)", len(r.ds), r.err)
	}
	var movedSeq int64
	if err := other.QueryRow(ctx, `SELECT seq FROM `+pgx.Identifier{schema, "messages"}.Sanitize()+`
		WHERE queue_id = $1 AND body = 'm'`, dlqID).Scan(&movedSeq); err != nil {
		t.Fatal(err)
	}
	if movedSeq < sendSeq {
		t.Fatalf("the moved message has sequence number %d in the DLQ, before %d taken by a send that held the group's lock and committed first", movedSeq, sendSeq)
	}
}

// TestSweepKeepsRenewedDedupEntry: the sweeper deletes expired dedup rows
// with a DELETE whose subquery sees the rows as of the statement's start. A
// send that renews an expired row (its upsert) while the sweep runs must
// keep it: otherwise a duplicate sent within the new window is stored again.
// Another session locks the row, lets it expire, renews it and holds it
// until a sweep (this one, or a broker's own sweeper) waits for it.
func TestSweepKeepsRenewedDedupEntry(t *testing.T) {
	schema := schemaFor(t)
	a, _, clock := openPair(t, schema, nil)
	ctx := context.Background()
	if _, err := a.CreateQueue(ctx, "q.fifo", map[string]string{model.AttrFifoQueue: "true"}, nil); err != nil {
		t.Fatal(err)
	}
	if rs, err := a.Send(ctx, "q.fifo", []model.SendEntry{{Body: "b", GroupID: "g", DedupID: "d"}}); err != nil || rs[0].Err != nil {
		t.Fatal(err, rs)
	}
	url := requirePostgres(t)
	other, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	dedup := pgx.Identifier{schema, "dedup"}.Sanitize()
	if tag, err := tx.Exec(ctx, `SELECT 1 FROM `+dedup+` FOR UPDATE`); err != nil || tag.RowsAffected() != 1 {
		t.Fatal(err, tag)
	}
	clock.Advance(model.DedupWindow) // the committed entry has expired
	// The renewal a send's upsert makes (a new window from now).
	if _, err := tx.Exec(ctx, `UPDATE `+dedup+` SET expires_at = expires_at + $1 * interval '1 microsecond'`,
		model.DedupWindow.Microseconds()); err != nil {
		t.Fatal(err)
	}
	swept := make(chan error, 1)
	go func() { swept <- raw(a).SweepOnce(ctx) }()
	mon, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close(ctx)
	const sweeping = `SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%DELETE FROM dedup%' AND pid <> pg_backend_pid()`
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting bool
		if err := mon.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid)))`,
			other.PgConn().PID()).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no sweep waited for the renewed dedup row")
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-swept; err != nil {
		t.Fatal(err)
	}
	// Until every sweep that waited has finished.
	for n := 1; n > 0; {
		if err := mon.QueryRow(ctx, sweeping).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("a sweep of the dedup window did not finish")
		}
	}
	var n int
	if err := mon.QueryRow(ctx, `SELECT count(*) FROM `+dedup).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("a sweep deleted a dedup row renewed while it ran (%d rows left)", n)
	}
}

// recvResult is the outcome of a receive run by goReceive.
type recvResult struct {
	ds  []model.Delivery
	err error
}

// goReceive runs a receive in a goroutine; its outcome arrives on the channel.
func goReceive(ctx context.Context, b *broker.Broker, req model.ReceiveRequest) <-chan recvResult {
	done := make(chan recvResult, 1)
	go func() {
		ds, err := b.Receive(ctx, req)
		done <- recvResult{ds, err}
	}()
	return done
}

// waitBlockedBy waits until some session is blocked by the session of pid
// (pg_blocking_pids), polling with a deadline; it fails if the receive
// behind done (what) returns first, without having waited.
func waitBlockedBy(t *testing.T, ctx context.Context, url string, pid uint32, done <-chan recvResult, what string) {
	t.Helper()
	mon, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting bool
		if err := mon.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid)))`,
			pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		select {
		case r := <-done:
			t.Fatalf("%s returned (%d messages, %v) without waiting for the lock", what, len(r.ds), r.err)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never waited for the lock", what)
		}
	}
}
