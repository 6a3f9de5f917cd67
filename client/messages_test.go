package client_test

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/server"
)

func TestSendReceiveRoundTrip(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	e.redriven("orders", 5, nil)

	blob := []byte{0, 1, 2, 0xff, 'x'}
	m := client.Message{
		Body: `{"order": 41}`,
		Attributes: map[string]client.Attribute{
			"kind":   client.String("new-order"),
			"amount": client.Number("129.90"),
			"blob":   client.Binary(blob),
			"label":  {Type: "Binary.png", Binary: []byte("png")},
		},
		Priority:      10,
		MaxAttempts:   2,
		TTL:           1500 * time.Second,
		CorrelationID: "checkout-7f3a",
		TraceContext:  "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	}
	sent, err := e.c.Send(ctx, "orders", m)
	if err != nil || sent.ID == "" || sent.SequenceNumber != "" {
		t.Fatalf("Send = %+v, %v", sent, err)
	}
	ds, err := e.c.Receive(ctx, "orders", client.MaxMessages(10), client.WaitTime(time.Second), client.VisibilityTimeout(30*time.Second))
	if err != nil || len(ds) != 1 {
		t.Fatalf("Receive = %d messages, %v", len(ds), err)
	}
	d := ds[0]
	if d.ID != sent.ID || d.Body != m.Body || d.Priority != 10 || d.MaxAttempts != 2 || d.TTL != 1500*time.Second || d.CorrelationID != m.CorrelationID ||
		d.TraceContext != m.TraceContext || d.Attempts != 1 || d.ReceiveCount != 1 || d.Receipt == "" ||
		d.CreatedAt.IsZero() || d.FirstReceivedAt.IsZero() || d.LastReceivedAt.IsZero() {
		t.Fatalf("delivery %+v", d)
	}
	if len(d.Attributes) != 4 || !reflect.DeepEqual(d.Attributes["kind"], client.String("new-order")) || !reflect.DeepEqual(d.Attributes["amount"], client.Number("129.90")) ||
		!bytes.Equal(d.Attributes["blob"].Binary, blob) || d.Attributes["blob"].Type != "Binary" ||
		string(d.Attributes["label"].Binary) != "png" || d.Attributes["label"].Type != "Binary.png" {
		t.Fatalf("attributes %+v", d.Attributes)
	}
	// The lease is 30 s: the message is in flight until then.
	page, err := e.c.Browse(ctx, "orders")
	if err != nil || len(page.Messages) != 1 || page.Messages[0].State != "inflight" ||
		page.Messages[0].VisibleAt.Sub(d.LastReceivedAt) < 29*time.Second || page.Queue != "orders" {
		t.Fatalf("Browse = %+v, %v", page, err)
	}
	if err := e.c.Ack(ctx, "orders", d.Receipt); err != nil {
		t.Fatal(err)
	}
	if st, err := e.c.Stats(ctx, "orders"); err != nil || st.Depth != 0 {
		t.Fatalf("Stats after ack = %+v, %v", st, err)
	}
}

func TestSendDelays(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	e.queue("later", nil)

	before := time.Now()
	// 10.2 s is sent as 11 whole seconds: a delay is never shortened. (Long
	// enough that "a" is still delayed when Browse looks on a loaded machine.)
	a, err := e.c.Send(ctx, "later", client.Message{Body: "a", Delay: 10200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	at := before.Add(time.Hour).Truncate(time.Second)
	b, err := e.c.Send(ctx, "later", client.Message{Body: "b", DeliverAt: at})
	if err != nil {
		t.Fatal(err)
	}
	page, err := e.c.Browse(ctx, "later")
	if err != nil || len(page.Messages) != 2 {
		t.Fatalf("Browse = %+v, %v", page, err)
	}
	for _, m := range page.Messages {
		if m.State != "delayed" {
			t.Fatalf("message %s is %s, want delayed", m.Body, m.State)
		}
		switch m.ID {
		case a.ID:
			// The lower bound rules out a shortened delay (10 s); the upper
			// one is loose, since the send itself may be slow.
			if got := m.VisibleAt.Sub(before); got < 10900*time.Millisecond || got > 20*time.Second {
				t.Fatalf("Delay 10.2 s made it visible %v after the send, want 11 s", got)
			}
		case b.ID:
			if d := m.VisibleAt.Sub(at); d < 0 || d > time.Second {
				t.Fatalf("DeliverAt %v made it visible at %v", at, m.VisibleAt)
			}
		}
	}
	_, err = e.c.Send(ctx, "later", client.Message{Body: "c", Delay: time.Second, DeliverAt: at})
	wantIs(t, err, client.ErrInvalidParameter)
}

func TestSendBatch(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	e.queue("small", map[string]string{"MaximumMessageSize": "1024"})

	res, err := e.c.SendBatch(ctx, "small", []client.Message{
		{Body: "one"}, {Body: strings.Repeat("x", 2000)}, {Body: "three", Priority: 500},
		{Body: "four", Attributes: map[string]client.Attribute{"n": client.Number("7")}},
	})
	if err != nil || len(res) != 4 {
		t.Fatalf("SendBatch = %v, %v", res, err)
	}
	if res[0].Err != nil || res[0].ID == "" || res[3].Err != nil || res[3].ID == "" {
		t.Fatalf("entries 0 and 3: %+v %+v", res[0], res[3])
	}
	for _, i := range []int{1, 2} {
		ce := wantIs(t, res[i].Err, client.ErrInvalidParameter)
		if ce.Status != 400 || ce.Message == "" || res[i].ID != "" {
			t.Fatalf("entry %d: %#v", i, ce)
		}
	}
	// A batch too long is refused whole.
	_, err = e.c.SendBatch(ctx, "small", make([]client.Message, 11))
	wantIs(t, err, client.ErrInvalidParameter)
	_, err = e.c.SendBatch(ctx, "small", nil)
	wantIs(t, err, client.ErrInvalidParameter)
	_, err = e.c.SendBatch(ctx, "missing", []client.Message{{Body: "x"}})
	wantIs(t, err, client.ErrQueueNotFound)
}

func TestFifoSend(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	e.queue("pay.fifo", map[string]string{"FifoQueue": "true"})
	r1, err := e.c.Send(ctx, "pay.fifo", client.Message{Body: "a", GroupID: "g1", DedupID: "d1"})
	if err != nil || r1.SequenceNumber == "" {
		t.Fatalf("Send = %+v, %v", r1, err)
	}
	// The same dedup id within the window is the same message.
	r2, err := e.c.Send(ctx, "pay.fifo", client.Message{Body: "a", GroupID: "g1", DedupID: "d1"})
	if err != nil || r2.ID != r1.ID {
		t.Fatalf("duplicate Send = %+v, %v; want id %s", r2, err, r1.ID)
	}
	ds := e.receive("pay.fifo", 1)
	if ds[0].GroupID != "g1" || ds[0].DedupID != "d1" || ds[0].SequenceNumber != r1.SequenceNumber {
		t.Fatalf("delivery %+v", ds[0])
	}
}

func TestBackpressure(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	e.queue("tight", map[string]string{"MaxDepth": "2"})
	e.send("tight", "a", "b")
	_, err := e.c.Send(ctx, "tight", client.Message{Body: "c"})
	ce := wantIs(t, err, client.ErrQueueFull)
	if ce.Status != 429 || ce.Code != "queue_full" || ce.RetryAfter != time.Second {
		t.Fatalf("queue full: %#v", ce)
	}
	// 429 is retried (3 times by default), each after the broker's
	// Retry-After.
	if w := e.waits.all(); fmt.Sprint(w) != "[1s 1s 1s]" {
		t.Fatalf("waits %v, want three of 1 s", w)
	}
	_, err = e.c.SendBatch(ctx, "tight", []client.Message{{Body: "c"}})
	wantIs(t, err, client.ErrQueueFull)
}

func TestTooLarge(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *server.Config) { c.MaxBodyBytes = 1 << 20 })
	e.queue("big", nil)
	_, err := e.c.Send(context.Background(), "big", client.Message{Body: strings.Repeat("x", 1<<20+1)})
	if ce := wantIs(t, err, client.ErrTooLarge); ce.Status != 413 {
		t.Fatalf("too large: %#v", ce)
	}
}

func TestBrowsePagingAndFilters(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	e.queue("q", nil)
	var ids []string
	for i := range 5 {
		kind := "even"
		if i%2 == 1 {
			kind = "odd"
		}
		r, err := e.c.Send(ctx, "q", client.Message{Body: fmt.Sprint(i), Attributes: map[string]client.Attribute{"kind": client.String(kind)}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	e.send("q", "plain")

	var bodies []string
	var opts []client.BrowseOption
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		page, err := e.c.Browse(ctx, "q", append(opts, client.Limit(2))...)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range page.Messages {
			bodies = append(bodies, m.Body)
			if m.State != "visible" {
				t.Fatalf("state %q", m.State)
			}
		}
		if page.Next == "" {
			break
		}
		opts = []client.BrowseOption{client.Cursor(page.Next)}
	}
	if fmt.Sprint(bodies) != "[0 1 2 3 4 plain]" {
		t.Fatalf("browsed %v", bodies)
	}
	page, err := e.c.Browse(ctx, "q", client.InOrder(client.Newest), client.Limit(1))
	if err != nil || len(page.Messages) != 1 || page.Messages[0].Body != "plain" || page.Next == "" {
		t.Fatalf("newest = %+v, %v", page, err)
	}
	page, err = e.c.Browse(ctx, "q", client.WithAttributeValue("kind", "odd"), client.Limit(100))
	if err != nil || len(page.Messages) != 2 || page.Messages[0].Body != "1" || page.Messages[1].Body != "3" {
		t.Fatalf("kind=odd: %+v, %v", page, err)
	}
	page, err = e.c.Browse(ctx, "q", client.WithAttribute("kind"), client.Limit(100))
	if err != nil || len(page.Messages) != 5 {
		t.Fatalf("has kind: %d, %v", len(page.Messages), err)
	}
	_, err = e.c.Browse(ctx, "q", client.InOrder("sideways"))
	wantIs(t, err, client.ErrInvalidParameter)

	// Browsing leased nothing.
	if st, err := e.c.Stats(ctx, "q"); err != nil || st.Visible != 6 {
		t.Fatalf("Stats = %+v, %v", st, err)
	}

	// Delete by id, single and batch.
	if err := e.c.DeleteMessage(ctx, "q", ids[0]); err != nil {
		t.Fatal(err)
	}
	ce := wantIs(t, e.c.DeleteMessage(ctx, "q", ids[0]), client.ErrMessageNotFound)
	if ce.Status != 404 || ce.Code != "message_not_found" {
		t.Fatalf("%#v", ce)
	}
	found, err := e.c.DeleteMessages(ctx, "q", []string{ids[1], "no-such-message", ids[2]})
	if err != nil || fmt.Sprint(found) != "[true false true]" {
		t.Fatalf("DeleteMessages = %v, %v", found, err)
	}
	if st, err := e.c.Stats(ctx, "q"); err != nil || st.Visible != 3 {
		t.Fatalf("Stats = %+v, %v", st, err)
	}
}

func TestReceiveInvalid(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	e.queue("q", nil)
	_, err := e.c.Receive(ctx, "q", client.MaxMessages(11))
	wantIs(t, err, client.ErrInvalidParameter)
	_, err = e.c.Receive(ctx, "q", client.WaitTime(21*time.Second))
	wantIs(t, err, client.ErrInvalidParameter)
	_, err = e.c.Receive(ctx, "nope", client.WaitTime(0))
	wantIs(t, err, client.ErrQueueNotFound)
	// A queue name that needs escaping reaches the broker as one segment.
	_, err = e.c.Receive(ctx, "a/b c", client.WaitTime(0))
	wantIs(t, err, client.ErrQueueNotFound)
}
