package broker

import (
	"context"
	"testing"

	"github.com/sluicemq/sluice/broker/embedded"
	"github.com/sluicemq/sluice/broker/model"
)

// TestHoldAfterEndNotKept: a delivery whose hold is recorded after its
// stream ended (the dispatcher's deliver racing the stream's Close) leaves
// nothing in the registry of holders: the ended stream's entries were
// dropped already and would stay forever.
func TestHoldAfterEndNotKept(t *testing.T) {
	be, err := embedded.Open(embedded.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(be, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	if _, err := b.CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Send(ctx, "q", []model.SendEntry{{Body: "m"}}); err != nil {
		t.Fatal(err)
	}
	c, err := b.Consume(ctx, ConsumerConfig{Queue: "q", Credit: 0})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := b.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 1})
	if err != nil || len(ds) != 1 {
		t.Fatalf("Receive: %v, %v", ds, err)
	}
	c.Close()
	b.streams.hold(c, ds)
	b.streams.mu.Lock()
	n := len(b.streams.holder)
	b.streams.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d receipts recorded as held by an ended stream, want 0", n)
	}
}
