package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/postgres"
)

// TestMoveTaskAcrossBrokers runs one move task with two brokers on one
// schema and one fake clock: whichever broker takes a step, the task keeps
// its rate (the pacing is due_at, in the database), every message is moved
// exactly once, and when the broker that started it closes mid-task the
// other one finishes it without a restart.
func TestMoveTaskAcrossBrokers(t *testing.T) {
	url := requirePostgres(t)
	schema := schemaFor(t)
	clock := clocktest.NewFakeClock(time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC))
	open := func() *broker.Broker {
		cfg := testConfig(url, schema)
		cfg.Clock = clock
		b, err := postgres.Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return front(t, b, cfg.Options)
	}
	a, b := open(), open()
	ctx := context.Background()
	for _, q := range []string{"dlq", "dest"} {
		if _, err := a.CreateQueue(ctx, q, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.CreateQueue(ctx, "src", map[string]string{
		model.AttrRedrivePolicy: `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":1}`,
	}, nil); err != nil {
		t.Fatal(err)
	}
	const n, rate = 40, 10 // chunk 1: one message per 100 ms of clock
	for i := range n {
		if _, err := a.Send(ctx, "dlq", []model.SendEntry{{Body: fmt.Sprintf("m%02d", i)}}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Millisecond)
	}
	task, err := a.StartMoveTask(ctx, model.MoveTaskRequest{Source: "dlq", Destination: "dest", MaxPerSecond: rate})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.StartMoveTask(ctx, model.MoveTaskRequest{Source: "dlq", Destination: "dest"}); err == nil {
		t.Fatal("a second broker started a second task on the same source")
	}
	moved := func() int64 {
		ts, err := b.ListMoveTasks(ctx, "dlq", 1)
		if err != nil || len(ts) != 1 || ts[0].ID != task.ID {
			t.Fatalf("ListMoveTasks = %+v, %v", ts, err)
		}
		return ts[0].Moved
	}
	start := clock.Now()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 10 s (moved %d, clock +%v)", what, moved(), clock.Now().Sub(start))
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	waitFor("the first step", func() bool { return moved() >= 1 })
	// Half the task with both brokers' runners competing for each step.
	for moved() < n/2 {
		clock.Advance(50 * time.Millisecond)
		if got, limit := moved(), int64(clock.Now().Sub(start)/(time.Second/rate))+1; got > limit {
			t.Fatalf("%d moved after %v of clock at rate %d (at most %d)", got, clock.Now().Sub(start), rate, limit)
		}
		waitFor("a step", func() bool { return moved() >= int64(clock.Now().Sub(start)/(time.Second/rate)) })
	}
	// The broker that started the task goes away; the other one finishes it.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		ts, err := b.ListMoveTasks(ctx, "dlq", 1)
		if err != nil {
			t.Fatal(err)
		}
		if ts[0].Status == model.MoveTaskCompleted {
			if ts[0].Moved != n || ts[0].ToMove != n {
				t.Fatalf("completed task = %+v", ts[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task not completed by the remaining broker: %+v", ts[0])
		}
		clock.Advance(100 * time.Millisecond)
		time.Sleep(2 * time.Millisecond) // let the runner take its step
	}
	for q, want := range map[string]int64{"dlq": 0, "dest": n} {
		info, err := b.GetQueue(ctx, q)
		if err != nil || info.Stats.Visible != want {
			t.Fatalf("%s: %+v, %v; want %d visible", q, info.Stats, err, want)
		}
	}
	seen := map[string]bool{}
	for len(seen) < n {
		ds, err := b.Receive(ctx, model.ReceiveRequest{Queue: "dest", MaxMessages: 10})
		if err != nil || len(ds) == 0 {
			t.Fatalf("Receive: %d messages, %v (have %d of %d)", len(ds), err, len(seen), n)
		}
		for _, d := range ds {
			if seen[d.Body] {
				t.Fatalf("%s moved twice", d.Body)
			}
			seen[d.Body] = true
		}
	}
}

// TestMoveTaskFifo moves a FIFO dead-letter queue's messages to a FIFO
// destination: they keep their group and order there, with new sequence
// numbers and message ids, and are not taken for duplicates.
func TestMoveTaskFifo(t *testing.T) {
	url := requirePostgres(t)
	cfg := testConfig(url, schemaFor(t))
	clock := clocktest.NewFakeClock(time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC))
	cfg.Clock = clock
	be, err := postgres.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	b := front(t, be, cfg.Options)
	ctx := context.Background()
	fifo := map[string]string{model.AttrFifoQueue: "true"}
	for _, q := range []string{"dlq.fifo", "dest.fifo"} {
		if _, err := b.CreateQueue(ctx, q, fifo, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.CreateQueue(ctx, "src.fifo", map[string]string{model.AttrFifoQueue: "true",
		model.AttrRedrivePolicy: `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq.fifo","maxReceiveCount":1}`,
	}, nil); err != nil {
		t.Fatal(err)
	}
	sent := map[string]string{}
	for i := range 3 {
		body := fmt.Sprintf("m%d", i)
		res, err := b.Send(ctx, "dlq.fifo", []model.SendEntry{{Body: body, GroupID: "g", DedupID: "same-" + body}})
		if err != nil || res[0].Err != nil {
			t.Fatal(err, res)
		}
		sent[body] = res[0].MessageID
		clock.Advance(time.Millisecond)
	}
	if _, err := b.StartMoveTask(ctx, model.MoveTaskRequest{Source: "dlq.fifo", Destination: "dest.fifo"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ts, err := b.ListMoveTasks(ctx, "dlq.fifo", 1)
		if err != nil {
			t.Fatal(err)
		}
		if ts[0].Status == model.MoveTaskCompleted && ts[0].Moved == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task = %+v", ts[0])
		}
		clock.Advance(100 * time.Millisecond)
		time.Sleep(2 * time.Millisecond) // let the runner take its step
	}
	ds, err := b.Receive(ctx, model.ReceiveRequest{Queue: "dest.fifo", MaxMessages: 10})
	if err != nil || len(ds) != 3 {
		t.Fatalf("Receive = %d messages, %v", len(ds), err)
	}
	last := ""
	for i, d := range ds {
		if want := fmt.Sprintf("m%d", i); d.Body != want || d.GroupID != "g" || d.ID == sent[want] {
			t.Fatalf("message %d = %q group %q id %s (sent as %s)", i, d.Body, d.GroupID, d.ID, sent[want])
		}
		if d.SequenceNumber <= last {
			t.Fatalf("sequence numbers not increasing: %s after %s", d.SequenceNumber, last)
		}
		last = d.SequenceNumber
	}
}
