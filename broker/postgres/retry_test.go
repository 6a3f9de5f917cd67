package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/internal/testutil"
)

// TestMigration6OldRows: messages stored before migration 6 have no
// attempts column value; the migration rewrites no row (attempts stays
// NULL) and they read as attempts = receive_count, in browsing, in the
// dead-letter rule of the receive, and in deliveries.
func TestMigration6OldRows(t *testing.T) {
	t.Parallel()
	url, schema, conn := schemaAtVersion(t, 5)
	ctx := context.Background()
	tbl := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	at := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	insertQueue := func(name string, cfg model.QueueConfig) int64 {
		t.Helper()
		cj, _ := json.Marshal(cfg)
		var mid int64
		if err := conn.QueryRow(ctx, `INSERT INTO `+tbl("queues")+` (name, config, created_at, modified_at)
			VALUES ($1, $2, $3, $3) RETURNING mid`, name, cj, at).Scan(&mid); err != nil {
			t.Fatal(err)
		}
		return mid
	}
	insertQueue("dlq", model.DefaultQueueConfig(false))
	src := model.DefaultQueueConfig(false)
	src.Redrive = &model.RedrivePolicy{DeadLetterTargetARN: model.ARN("us-east-1", "000000000000", "dlq"),
		DeadLetterQueue: "dlq", MaxReceiveCount: 3}
	mid := insertQueue("src", src)
	for i, m := range []struct {
		id, body string
		count    int
	}{
		{"00000000-0000-4000-8000-000000000002", "old2", 2},
		{"00000000-0000-4000-8000-000000000003", "old3", 3},
	} {
		if _, err := conn.Exec(ctx, `INSERT INTO `+tbl("messages")+` (queue_id, state, visible_at, sent_at,
			receive_count, first_receive_at, message_id, body) VALUES ($1, 'r', $2, $2, $3, $2, $4, $5)`,
			mid, at.Add(time.Duration(i)*time.Second), m.count, m.id, m.body); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, `INSERT INTO `+tbl("counts")+` (queue_id, shard, ready) VALUES ($1, 0, 2)`, mid); err != nil {
		t.Fatal(err)
	}

	clock := clocktest.NewFakeClock(at.Add(time.Minute))
	cfg := testConfig(url, schema)
	cfg.Clock = clock
	cfg.Logger = testutil.Logger(t)
	be, err := postgres.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	f := front(t, be, cfg.Options)

	var nulls int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+tbl("messages")+` WHERE attempts IS NULL`).Scan(&nulls); err != nil || nulls != 2 {
		t.Fatalf("rows with attempts NULL after migration 6: %d, %v; want 2 (no row rewritten)", nulls, err)
	}
	page, err := f.Browse(ctx, "src", model.BrowseRequest{})
	if err != nil || len(page.Messages) != 2 {
		t.Fatalf("Browse(src) = %+v, %v", page, err)
	}
	for i, want := range []int{2, 3} {
		if m := page.Messages[i]; m.Attempts != want || m.ReceiveCount != want || m.MaxAttempts != 0 || m.FailureReason != "" {
			t.Errorf("browsed %s: attempts %d receive count %d max %d reason %q; want attempts = receive count = %d",
				m.Body, m.Attempts, m.ReceiveCount, m.MaxAttempts, m.FailureReason, want)
		}
	}
	// old3 used its 3 attempts: the receive moves it; old2 starts its third.
	ds, err := f.Receive(ctx, model.ReceiveRequest{Queue: "src", MaxMessages: 10})
	if err != nil || len(ds) != 1 {
		t.Fatalf("Receive(src) = %d messages, %v; want 1", len(ds), err)
	}
	if d := ds[0]; d.Body != "old2" || d.ReceiveCount != 3 || d.Attempts != 3 || !d.LastReceiveAt.Equal(clock.Now()) {
		t.Fatalf("delivery %s: receive count %d attempts %d last receive %v; want old2, 3, 3, %v",
			d.Body, d.ReceiveCount, d.Attempts, d.LastReceiveAt, clock.Now())
	}
	page, err = f.Browse(ctx, "dlq", model.BrowseRequest{})
	if err != nil || len(page.Messages) != 1 {
		t.Fatalf("Browse(dlq) = %+v, %v", page, err)
	}
	if m := page.Messages[0]; m.Body != "old3" || m.Attempts != 3 || m.DeadLetterSource != "src" || m.FailureReason != model.ReasonMaxAttempts {
		t.Fatalf("dead letter %s: attempts %d source %q reason %q; want old3, 3, src, %q",
			m.Body, m.Attempts, m.DeadLetterSource, m.FailureReason, model.ReasonMaxAttempts)
	}
}

// TestResumeWakesOtherBroker: a receive waiting on a paused queue on one
// broker returns the queue's message as soon as another broker resumes the
// queue (through LISTEN/NOTIFY: the fake clock never moves, so no poll can
// find it).
func TestResumeWakesOtherBroker(t *testing.T) {
	t.Parallel()
	a, b, clock := openPair(t, schemaFor(t), nil)
	ctx := context.Background()
	if _, err := a.CreateQueue(ctx, "q", map[string]string{model.AttrPaused: "true"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(ctx, "q", []model.SendEntry{{Body: "x"}}); err != nil {
		t.Fatal(err)
	}
	idle := clock.Timers()
	wait := 20 * time.Second
	type result struct {
		ds  []model.Delivery
		err error
	}
	done := make(chan result, 1)
	go func() {
		ds, err := b.Receive(ctx, model.ReceiveRequest{Queue: "q", WaitTime: &wait})
		done <- result{ds, err}
	}()
	testutil.Eventually(t, 10*time.Second, "the receive on b to wait", func() bool { return clock.Timers() > idle })
	select {
	case r := <-done:
		t.Fatalf("receive on a paused queue returned %d messages, %v; want it to wait", len(r.ds), r.err)
	default:
	}
	if err := a.SetPaused(ctx, "q", false); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || len(r.ds) != 1 {
			t.Fatalf("receive after the resume: %d messages, %v; want 1", len(r.ds), r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a receive waiting on broker b did not wake within 10 s of the resume through broker a")
	}
}

// TestDepthCountsBackoff: a message backing off after a failure counts in
// the depth that MaxDepth limits (as delayed), and a send past it is
// refused whole.
func TestDepthCountsBackoff(t *testing.T) {
	t.Parallel()
	a, _, _ := openPair(t, schemaFor(t), nil)
	ctx := context.Background()
	if _, err := a.CreateQueue(ctx, "q", map[string]string{model.AttrMaxDepth: "2",
		model.AttrRetryPolicy: `{"baseSeconds":60,"maxSeconds":60,"jitter":"none"}`}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(ctx, "q", []model.SendEntry{{ID: "1", Body: "a"}, {ID: "2", Body: "b"}}); err != nil {
		t.Fatal(err)
	}
	ds, err := a.Receive(ctx, model.ReceiveRequest{Queue: "q"})
	if err != nil || len(ds) != 1 {
		t.Fatal(ds, err)
	}
	if errs, err := a.ChangeVisibility(ctx, "q", []model.VisibilityEntry{{ID: "1", Receipt: ds[0].Receipt}}); err != nil || errs[0] != nil {
		t.Fatal(errs, err)
	}
	info, err := a.GetQueue(ctx, "q")
	if err != nil || info.Stats.Visible != 1 || info.Stats.Delayed != 1 || info.Stats.InFlight != 0 {
		t.Fatalf("after a nack under a 60 s backoff: %+v, %v; want 1 visible, 1 delayed", info.Stats, err)
	}
	_, err = a.Send(ctx, "q", []model.SendEntry{{Body: "c"}})
	var de *model.DepthError
	if !errors.As(err, &de) || de.Depth != 2 || de.Limit != 2 {
		t.Fatalf("send into a queue of depth 2 (MaxDepth 2): %v; want a DepthError of depth 2", err)
	}
}

// TestSweeperDeadLettersExpiredLease: when the last attempt's lease ends,
// the sweeper moves the message to the dead-letter queue without a receive
// or GetQueue of its queue (only the DLQ is read).
func TestSweeperDeadLettersExpiredLease(t *testing.T) {
	t.Parallel()
	a, _, clock := openPair(t, schemaFor(t), nil)
	ctx := context.Background()
	if _, err := a.CreateQueue(ctx, "dlq", nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateQueue(ctx, "src", map[string]string{model.AttrVisibilityTimeout: "10",
		model.AttrRedrivePolicy: fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":1}`,
			model.ARN("us-east-1", "000000000000", "dlq"))}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(ctx, "src", []model.SendEntry{{Body: "x"}}); err != nil {
		t.Fatal(err)
	}
	if ds, err := a.Receive(ctx, model.ReceiveRequest{Queue: "src"}); err != nil || len(ds) != 1 {
		t.Fatal(ds, err)
	}
	clock.Advance(10 * time.Second)
	testutil.Eventually(t, 10*time.Second, "the dead letter in dlq", func() bool {
		info, err := a.GetQueue(ctx, "dlq")
		return err == nil && info.Stats.Visible == 1
	})
	page, err := a.Browse(ctx, "dlq", model.BrowseRequest{})
	if err != nil || len(page.Messages) != 1 || page.Messages[0].FailureReason != model.ReasonLeaseExpired {
		t.Fatalf("Browse(dlq) = %+v, %v; want the message with reason %q", page, err, model.ReasonLeaseExpired)
	}
}
