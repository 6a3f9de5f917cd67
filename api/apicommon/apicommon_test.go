package apicommon_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicemq/sluice/api/apicommon"
	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/embedded"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/internal/testutil"
)

// TestGate: a waiting receive holds a slot, a second one past the cap is
// refused while one that does not wait is served, and cancelling the drain
// ends the wait with no messages and no error, at once.
func TestGate(t *testing.T) {
	t.Parallel()
	cfg := embedded.DefaultConfig()
	cfg.Dir = t.TempDir()
	be, err := embedded.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.New(be, broker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	ctx := context.Background()
	if _, err := b.CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	drain, stop := context.WithCancel(context.Background())
	g := apicommon.NewGate(1, drain)
	errFull := errors.New("full")
	full := func(n int) error {
		if n != 1 {
			t.Errorf("full(%d), want the cap 1", n)
		}
		return errFull
	}
	wait := 20 * time.Second
	type result struct {
		ds  []model.Delivery
		err error
	}
	done := make(chan result, 1)
	go func() {
		ds, err := g.Receive(ctx, b, model.ReceiveRequest{Queue: "q", WaitTime: &wait}, full)
		done <- result{ds, err}
	}()
	testutil.Eventually(t, 5*time.Second, "the receive to wait", func() bool { return g.Waiting() == 1 })
	if _, err := g.Receive(ctx, b, model.ReceiveRequest{Queue: "q", WaitTime: &wait}, full); !errors.Is(err, errFull) {
		t.Fatalf("a second waiting receive past the cap: %v, want the full error", err)
	}
	var zero time.Duration
	if _, err := g.Receive(ctx, b, model.ReceiveRequest{Queue: "q", WaitTime: &zero}, full); err != nil {
		t.Fatalf("a receive that does not wait, at the cap: %v", err)
	}
	stop()
	select {
	case r := <-done:
		if r.err != nil || len(r.ds) != 0 {
			t.Fatalf("the drained receive: %d messages, err %v; want none and no error", len(r.ds), r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the drain did not end the waiting receive")
	}
	if g.Waiting() != 0 {
		t.Fatalf("after the drain %d receives hold a slot", g.Waiting())
	}
	if ds, err := g.Receive(ctx, b, model.ReceiveRequest{Queue: "q", WaitTime: &wait}, full); err != nil || len(ds) != 0 {
		t.Fatalf("a receive after the drain: %d messages, err %v; want none at once", len(ds), err)
	}
}
