package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/sluicemq/sluice/client"
)

func TestQueueAdmin(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()

	q, err := e.c.CreateQueue(ctx, "orders", map[string]string{"VisibilityTimeout": "45", "MaxDepth": "100"}, client.Tags(map[string]string{"team": "shop"}))
	if err != nil {
		t.Fatal(err)
	}
	if q.Name != "orders" || q.ARN == "" || q.Fifo || q.Attributes["VisibilityTimeout"] != "45" || q.Attributes["MaxDepth"] != "100" ||
		q.Attributes["Paused"] != "false" || q.Tags["team"] != "shop" || q.CreatedAt.IsZero() || q.DeadLetterQueue != "" {
		t.Fatalf("CreateQueue answered %+v", q)
	}
	// A create with the same attributes answers the queue; with others it
	// is ErrQueueExists.
	if _, err := e.c.CreateQueue(ctx, "orders", map[string]string{"VisibilityTimeout": "45"}); err != nil {
		t.Fatalf("create again, same attributes: %v", err)
	}
	_, err = e.c.CreateQueue(ctx, "orders", map[string]string{"VisibilityTimeout": "46"})
	if ce := wantIs(t, err, client.ErrQueueExists); ce.Status != 409 || ce.Code != "queue_exists" || ce.Message == "" {
		t.Fatalf("create with other attributes: %#v", ce)
	}

	got, err := e.c.GetQueue(ctx, "orders")
	if err != nil || got.Name != "orders" || got.ARN != q.ARN {
		t.Fatalf("GetQueue = %+v, %v", got, err)
	}
	up, err := e.c.UpdateQueue(ctx, "orders", map[string]string{"VisibilityTimeout": "60"})
	if err != nil || up.Attributes["VisibilityTimeout"] != "60" || up.Attributes["MaxDepth"] != "100" {
		t.Fatalf("UpdateQueue = %+v, %v", up.Attributes, err)
	}
	_, err = e.c.UpdateQueue(ctx, "orders", map[string]string{"VisibilityTimeout": "nope"})
	wantIs(t, err, client.ErrInvalidParameter)

	p, err := e.c.Pause(ctx, "orders")
	if err != nil || p.Attributes["Paused"] != "true" {
		t.Fatalf("Pause = %v, %v", p.Attributes["Paused"], err)
	}
	e.send("orders", "one", "two")
	if ds, err := e.c.Receive(ctx, "orders", client.WaitTime(0)); err != nil || len(ds) != 0 {
		t.Fatalf("a paused queue delivered %d messages (%v)", len(ds), err)
	}
	r, err := e.c.Resume(ctx, "orders")
	if err != nil || r.Attributes["Paused"] != "false" {
		t.Fatalf("Resume = %v, %v", r.Attributes["Paused"], err)
	}
	e.receive("orders", 1)
	st, err := e.c.Stats(ctx, "orders")
	if err != nil || st.Visible != 1 || st.InFlight != 1 || st.Depth != 2 || st.DeadLetters != nil || st.Refused == nil {
		t.Fatalf("Stats = %+v, %v", st, err)
	}

	if err := e.c.PurgeQueue(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if st, err := e.c.Stats(ctx, "orders"); err != nil || st.Depth != 0 {
		t.Fatalf("Stats after purge = %+v, %v", st, err)
	}
	if err := e.c.DeleteQueue(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	_, err = e.c.GetQueue(ctx, "orders")
	if ce := wantIs(t, err, client.ErrQueueNotFound); ce.Status != 404 {
		t.Fatalf("GetQueue of a deleted queue: %#v", ce)
	}
	wantIs(t, e.c.DeleteQueue(ctx, "orders"), client.ErrQueueNotFound)
	_, err = e.c.Stats(ctx, "orders")
	wantIs(t, err, client.ErrQueueNotFound)
	if errors.Is(err, client.ErrMessageNotFound) || errors.Is(err, client.ErrNotFound) {
		t.Fatalf("queue_not_found matches another sentinel: %v", err)
	}
}

func TestQueueStatsDeadLetters(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	q := e.redriven("jobs", 3, nil)
	if q.DeadLetterQueue != "jobs-dlq" {
		t.Fatalf("DeadLetterQueue = %q", q.DeadLetterQueue)
	}
	st, err := e.c.Stats(context.Background(), "jobs")
	if err != nil || st.DeadLetters == nil || *st.DeadLetters != 0 {
		t.Fatalf("Stats = %+v, %v", st, err)
	}
}

func TestListQueuesPaging(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	for i := range 5 {
		e.queue(fmt.Sprintf("app-%d", i), nil)
	}
	e.queue("other", nil)
	var names []string
	var opts []client.ListOption
	pages := 0
	for {
		page, err := e.c.ListQueues(ctx, append(opts, client.Prefix("app-"), client.PageSize(2))...)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, q := range page.Queues {
			names = append(names, q.Name)
		}
		if page.Next == "" {
			break
		}
		opts = []client.ListOption{client.After(page.Next)}
	}
	if fmt.Sprint(names) != "[app-0 app-1 app-2 app-3 app-4]" || pages != 3 {
		t.Fatalf("paged %d pages: %v", pages, names)
	}
	all, err := e.c.ListQueues(ctx)
	if err != nil || len(all.Queues) != 6 || all.Next != "" {
		t.Fatalf("ListQueues() = %+v, %v", all, err)
	}
	_, err = e.c.ListQueues(ctx, client.PageSize(0))
	wantIs(t, err, client.ErrInvalidParameter)
}
