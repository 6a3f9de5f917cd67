package client_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/testutil"
)

// deadLetter sends msgs to queue, receives them and dead-letters each with
// reason "why: <body>".
func (e *env) deadLetter(queue string, msgs ...client.Message) {
	e.t.Helper()
	ctx := context.Background()
	for _, m := range msgs {
		if _, err := e.c.Send(ctx, queue, m); err != nil {
			e.t.Fatal(err)
		}
	}
	for _, d := range e.receive(queue, len(msgs)) {
		if err := e.c.DeadLetter(ctx, queue, d.Receipt, "why: "+d.Body); err != nil {
			e.t.Fatal(err)
		}
	}
}

// waitReplay waits for the newest replay into queue to end, and answers it.
func (e *env) waitReplay(queue, id string) client.ReplayTask {
	e.t.Helper()
	var last client.ReplayTask
	testutil.Eventually(e.t, 10*time.Second, "the replay to end", func() bool {
		ts, err := e.c.Replays(context.Background(), queue, 1)
		if err != nil {
			e.t.Fatal(err)
		}
		if len(ts) == 1 && ts[0].ID == id {
			last = ts[0]
		}
		return last.Done()
	})
	return last
}

func TestDeadLettersReplay(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	e.redriven("orders", 3, nil)
	e.deadLetter("orders",
		client.Message{Body: `{"order": 44}`, CorrelationID: "c-44", Attributes: map[string]client.Attribute{"kind": client.String("order")}},
		client.Message{Body: `{"order": 47}`, CorrelationID: "c-47"},
		client.Message{Body: `{"order": 48}`},
	)

	page, err := e.c.DeadLetters(ctx, "orders", client.WithReason("44"))
	if err != nil || len(page.Messages) != 1 || page.Messages[0].CorrelationID != "c-44" {
		t.Fatalf("DeadLetters(reason 44) = %+v, %v", page, err)
	}
	fix := page.Messages[0]
	page, err = e.c.DeadLetters(ctx, "orders", client.Limit(1))
	if err != nil || len(page.Messages) != 1 || page.Next == "" {
		t.Fatalf("DeadLetters(limit 1) = %+v, %v", page, err)
	}
	page, err = e.c.DeadLetters(ctx, "orders", client.Cursor(page.Next), client.Limit(10))
	if err != nil || len(page.Messages) != 2 {
		t.Fatalf("DeadLetters page 2 = %+v, %v", page, err)
	}
	drop := page.Messages[0] // order 47
	found, err := e.c.DeleteDeadLetters(ctx, "orders", []string{drop.ID, "no-such-id"})
	if err != nil || fmt.Sprint(found) != "[true false]" {
		t.Fatalf("DeleteDeadLetters = %v, %v", found, err)
	}

	// Edit and replay the order without a customer.
	task, err := e.c.Replay(ctx, "orders", client.ReplayIDs(fix.ID), client.EditBody(`{"order": 44, "customer": 7}`),
		client.EditAttributes(map[string]client.Attribute{"kind": client.String("fixed"), "blob": client.Binary([]byte{1, 2})}),
		client.MaxPerSecond(100))
	if err != nil || task.ID == "" || task.Source != "orders-dlq" || task.Destination != "orders" || task.MaxPerSecond != 100 || task.ToMove != 1 {
		t.Fatalf("Replay = %+v, %v", task, err)
	}
	done := e.waitReplay("orders", task.ID)
	if done.Status != "COMPLETED" || done.Moved != 1 || done.Skipped != 0 || done.StartedAt.IsZero() {
		t.Fatalf("replay ended %+v", done)
	}
	d := e.receive("orders", 1)[0]
	if d.Body != `{"order": 44, "customer": 7}` || d.ID == fix.ID || d.Attempts != 1 || d.CorrelationID != "c-44" ||
		d.Attributes["kind"].Value != "fixed" || string(d.Attributes["blob"].Binary) != "\x01\x02" {
		t.Fatalf("replayed message %+v", d)
	}
	if err := e.c.Ack(ctx, "orders", d.Receipt); err != nil {
		t.Fatal(err)
	}

	// Then every dead letter left (order 48).
	task, err = e.c.Replay(ctx, "orders", client.MaxPerSecond(50))
	if err != nil {
		t.Fatal(err)
	}
	if done := e.waitReplay("orders", task.ID); done.Status != "COMPLETED" || done.Moved != 1 {
		t.Fatalf("replay of all ended %+v", done)
	}
	d = e.receive("orders", 1)[0]
	if d.Body != `{"order": 48}` {
		t.Fatalf("replayed %q", d.Body)
	}
	ts, err := e.c.Replays(ctx, "orders", 0)
	if err != nil || len(ts) != 2 || ts[0].ID != task.ID {
		t.Fatalf("Replays = %+v, %v", ts, err)
	}
	if st, err := e.c.Stats(ctx, "orders"); err != nil || *st.DeadLetters != 0 {
		t.Fatalf("Stats = %+v, %v", st, err)
	}
	_, err = e.c.Replays(ctx, "orders", 11)
	wantIs(t, err, client.ErrInvalidParameter)
}

func TestDeadLettersShared(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	dlq := e.queue("shared-dlq", nil)
	redrive := map[string]string{"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":3}`, dlq.ARN)}
	e.queue("a", redrive)
	e.queue("b", redrive)
	e.deadLetter("a", client.Message{Body: "from a"})
	e.deadLetter("b", client.Message{Body: "from b"})

	// A replay of all of a's dead letters would move b's too: refused.
	_, err := e.c.Replay(ctx, "a")
	if ce := wantIs(t, err, client.ErrConflict); ce.Status != 409 {
		t.Fatalf("%#v", ce)
	}
	page, err := e.c.DeadLetters(ctx, "a")
	if err != nil || len(page.Messages) != 1 || page.Messages[0].Body != "from a" {
		t.Fatalf("DeadLetters(a) = %+v, %v", page, err)
	}
	task, err := e.c.Replay(ctx, "a", client.ReplayIDs(page.Messages[0].ID))
	if err != nil {
		t.Fatal(err)
	}
	e.waitReplay("a", task.ID)
	var bodies []string
	for _, q := range []string{"a", "b"} {
		p, err := e.c.Browse(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range p.Messages {
			bodies = append(bodies, q+": "+m.Body)
		}
	}
	sort.Strings(bodies)
	if fmt.Sprint(bodies) != "[a: from a]" {
		t.Fatalf("after the replay: %v", bodies)
	}
}
