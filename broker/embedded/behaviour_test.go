package embedded

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
)

// These tests cover what is specific to this backend's machinery (clock
// timers, the sweeper, waiters, Close); the shared semantics are
// broker/brokertest's.

func TestRetentionSweeperRunsOnClockAdvance(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("q", map[string]string{"MessageRetentionPeriod": "60"})
	e.createQueue("dlq", map[string]string{"MessageRetentionPeriod": "120"})
	e.send("q", "ready", "inflight")
	delay := 30 * time.Second
	if _, err := e.b.Send(context.Background(), "q", []broker.SendEntry{{Body: "delayed", Delay: &delay}}); err != nil {
		t.Fatal(err)
	}
	e.send("dlq", "dead")
	e.receive("q", 1, time.Hour)
	e.wantStats("q", broker.QueueStats{Visible: 1, InFlight: 1, Delayed: 1})
	e.clock.Advance(59 * time.Second)
	e.wantStats("q", broker.QueueStats{Visible: 2, InFlight: 1})
	e.clock.Advance(time.Second) // sent + 60 s: all three expire, whatever their state
	eventually(t, "sweep of q", func() bool { return e.stats("q") == broker.QueueStats{} })
	if got := e.stats("dlq"); got.Visible != 1 {
		t.Fatalf("dlq swept early: %+v", got)
	}
	e.clock.Advance(time.Minute)
	eventually(t, "sweep of dlq", func() bool { return e.stats("dlq") == broker.QueueStats{} })
	e.restart() // and the deletions were durable
	e.wantStats("q", broker.QueueStats{})
	e.wantStats("dlq", broker.QueueStats{})
}

func TestWaitingReceiveWakesOnLeaseExpiryAndDelay(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("q", nil)
	e.send("q", "a")
	e.receive("q", 1, 5*time.Second)
	got := make(chan []broker.Delivery, 1)
	wait := 20 * time.Second
	timers := e.clock.Timers()
	go func() {
		ds, _ := e.b.Receive(context.Background(), broker.ReceiveRequest{Queue: "q", WaitTime: &wait})
		got <- ds
	}()
	eventually(t, "the receive to wait", func() bool { return e.clock.Timers() > timers })
	e.clock.Advance(5 * time.Second) // the lease expires: no poll tick needed
	select {
	case ds := <-got:
		if len(ds) != 1 || ds[0].Body != "a" || ds[0].ReceiveCount != 2 {
			t.Fatalf("got %+v", ds)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiting receive not woken by the expired lease")
	}
}

func TestCloseEndsWaitersAndIsIdempotent(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("q", nil)
	e.createQueue("gone", nil)
	wait := 20 * time.Second
	res := make(chan error, 2)
	timers := e.clock.Timers()
	for _, q := range []string{"q", "gone"} {
		go func() {
			_, err := e.b.Receive(context.Background(), broker.ReceiveRequest{Queue: q, WaitTime: &wait})
			res <- err
		}()
	}
	eventually(t, "both receives to wait", func() bool { return e.clock.Timers() >= timers+2 })
	if err := e.b.DeleteQueue(context.Background(), "gone"); err != nil {
		t.Fatal(err)
	}
	if err := <-res; !errors.Is(err, broker.ErrQueueDoesNotExist) {
		t.Fatalf("receive on deleted queue: %v", err)
	}
	if err := e.b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-res; !errors.Is(err, broker.ErrClosed) {
		t.Fatalf("receive at close: %v", err)
	}
	if err := e.b.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := e.b.Send(context.Background(), "q", []broker.SendEntry{{Body: "x"}}); !errors.Is(err, broker.ErrClosed) {
		t.Fatalf("send after close: %v", err)
	}
}

func TestCancelledWaitClaimsNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("q", nil)
	ctx, cancel := context.WithCancel(context.Background())
	wait := 20 * time.Second
	res := make(chan error, 1)
	timers := e.clock.Timers()
	go func() {
		_, err := e.b.Receive(ctx, broker.ReceiveRequest{Queue: "q", WaitTime: &wait})
		res <- err
	}()
	eventually(t, "the receive to wait", func() bool { return e.clock.Timers() > timers })
	cancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled receive: %v", err)
	}
	e.send("q", "a")
	e.wantStats("q", broker.QueueStats{Visible: 1})
}

func TestDeadLetterMoveIsDurable(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("q", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":1}`})
	res := e.send("q", "a")
	first := e.receive("q", 1, 0) // visible again at once
	if len(first) != 1 {
		t.Fatal("first receive got nothing")
	}
	if ds := e.receive("q", 1, time.Minute); len(ds) != 0 {
		t.Fatalf("second receive delivered %v instead of moving it", bodies(ds))
	}
	e.wantStats("q", broker.QueueStats{})
	e.restart()
	e.wantStats("dlq", broker.QueueStats{Visible: 1})
	ds := e.receive("dlq", 1, time.Minute)
	if len(ds) != 1 {
		t.Fatal("nothing in the dead-letter queue")
	}
	d := ds[0]
	if d.ID != res[0].MessageID || d.Body != "a" || d.DeadLetterSource != "q" || d.ReceiveCount != 2 ||
		!d.SentAt.Equal(t0) || !d.FirstReceiveAt.Equal(t0) {
		t.Fatalf("moved message: %+v", d.Message)
	}
	// The source lease's receipt is stale: a delete succeeds without effect.
	if errs, err := e.b.Delete(context.Background(), "q", []broker.DeleteEntry{{Receipt: first[0].Receipt}}); err != nil || errs[0] != nil {
		t.Fatalf("stale delete: %v %v", err, errs)
	}
	e.wantStats("dlq", broker.QueueStats{InFlight: 1})
}
