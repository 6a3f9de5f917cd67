package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/client/stream"
	"github.com/sluicemq/sluice/internal/testutil"
)

// TestConsumers: Consumers lists a stream a real stream client opened on the
// broker, typed (durations, times), and is ErrQueueNotFound for an unknown
// queue.
func TestConsumers(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.queue("mail", map[string]string{"VisibilityTimeout": "25"})
	if cs, err := e.c.Consumers(ctx, "mail"); err != nil || cs == nil || len(cs) != 0 {
		t.Fatalf("Consumers before a stream = %v, %v; want an empty list", cs, err)
	}
	sc, err := stream.Dial(e.URL, stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	con, err := sc.Consume(ctx, stream.ConsumeOptions{Queue: "mail", Credit: 5, ClientName: "mailer-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	e.send("mail", "hello")
	m, err := con.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got client.Consumer
	testutil.Eventually(t, 10*time.Second, "the stream listed holding its message", func() bool {
		cs, err := e.c.Consumers(ctx, "mail")
		if err != nil || len(cs) != 1 {
			t.Fatalf("Consumers = %+v, %v; want the one stream", cs, err)
		}
		got = cs[0]
		return got.Held == 1
	})
	if got.ID != con.ID() || got.Broker == "" || got.ClientName != "mailer-1" || got.Credit != 5 || got.Acked != 0 ||
		got.Lease != 25*time.Second || got.MaxHold != time.Hour || got.RemoteAddress == "" ||
		got.ConnectedAt.IsZero() || got.LastActiveAt.Before(got.ConnectedAt) {
		t.Errorf("Consumers = %+v; want id %s, mailer-1, credit 5, held 1, lease 25s, max hold 1h", got, con.ID())
	}
	if err := con.Ack(ctx, m.GetReceipt()); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the ack counted", func() bool {
		cs, err := e.c.Consumers(ctx, "mail")
		return err == nil && len(cs) == 1 && cs[0].Acked == 1 && cs[0].Held == 0 && cs[0].AckedPerSecond > 0
	})
	_, err = e.c.Consumers(ctx, "nope")
	wantIs(t, err, client.ErrQueueNotFound)
}
