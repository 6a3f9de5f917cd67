package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/client/stream"
	"github.com/sluicemq/sluice/internal/testutil"
)

// TestStreamSeries: sluice_queue_streams counts the consumer streams real
// stream clients (client/stream) open on a queue, and
// sluice_queue_consumer_lag_messages is the queue's visible messages while
// one is open, 0 before and after; a queue without a stream has both at 0.
func TestStreamSeries(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, q := range []string{"jobs", "idle"} {
		if _, err := e.c.CreateQueue(ctx, q, nil); err != nil {
			t.Fatal(err)
		}
	}
	send := func(q string, n int) {
		t.Helper()
		for range n {
			if _, err := e.c.Send(ctx, q, client.Message{Body: "m"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	send("jobs", 5)
	send("idle", 2)
	fams := e.scrape()
	for _, q := range []string{"jobs", "idle"} {
		e.want(fams, "sluice_queue_streams", 0, "queue="+q)
		e.want(fams, "sluice_queue_consumer_lag_messages", 0, "queue="+q)
	}

	// Two streams of one credit each: they hold two messages, three stay
	// visible, and the lag is those three.
	sc, err := stream.Dial(e.b.URL, stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	var cons []*stream.Consumer
	for range 2 {
		con, err := sc.Consume(ctx, stream.ConsumeOptions{Queue: "jobs", Credit: 1, ClientName: "metrics-test"})
		if err != nil {
			t.Fatal(err)
		}
		defer con.Close()
		if _, err := con.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		cons = append(cons, con)
	}
	fams = e.scrape()
	e.want(fams, "sluice_queue_streams", 2, "queue=jobs")
	e.want(fams, "sluice_queue_visible_messages", 3, "queue=jobs")
	e.want(fams, "sluice_queue_consumer_lag_messages", 3, "queue=jobs")
	e.want(fams, "sluice_queue_streams", 0, "queue=idle")
	e.want(fams, "sluice_queue_consumer_lag_messages", 0, "queue=idle")

	// One closes: one stream; its message is back, so four wait.
	if err := cons[0].Close(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "one stream, a lag of 4", func() bool {
		fams := e.scrape()
		n, _ := value(fams, "sluice_queue_streams", "queue=jobs")
		lag, _ := value(fams, "sluice_queue_consumer_lag_messages", "queue=jobs")
		return n == 1 && lag == 4
	})
	// The last closes: no stream, no lag, though messages wait.
	if err := cons[1].Close(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "no stream, no lag", func() bool {
		fams := e.scrape()
		n, _ := value(fams, "sluice_queue_streams", "queue=jobs")
		lag, _ := value(fams, "sluice_queue_consumer_lag_messages", "queue=jobs")
		visible, _ := value(fams, "sluice_queue_visible_messages", "queue=jobs")
		return n == 0 && lag == 0 && visible == 5
	})
}
