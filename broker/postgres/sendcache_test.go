package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/broker/model"
)

// TestSendCacheSeesOtherBrokersChanges: a broker's sends plan with the
// queue row of its earlier sends; after another broker changes the queue's
// settings, purges it, or deletes and re-creates it, the next send through
// the first broker follows the queue as it is now.
func TestSendCacheSeesOtherBrokersChanges(t *testing.T) {
	t.Parallel()
	a, b, _ := openPair(t, schemaFor(t), nil)
	ctx := context.Background()
	if _, err := a.CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	send := func() {
		t.Helper()
		res, err := b.Send(ctx, "q", []model.SendEntry{{Body: "x"}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("send: %v %v", err, res)
		}
	}
	stats := func(visible, delayed int64) {
		t.Helper()
		info, err := a.GetQueue(ctx, "q")
		if err != nil {
			t.Fatal(err)
		}
		if info.Stats.Visible != visible || info.Stats.Delayed != delayed {
			t.Fatalf("visible %d delayed %d, want %d %d", info.Stats.Visible, info.Stats.Delayed, visible, delayed)
		}
	}
	send()
	send() // with the cached row
	stats(2, 0)

	// A setting changed on the other broker: the next send is delayed.
	if err := a.SetQueueAttributes(ctx, "q", map[string]string{"DelaySeconds": "60"}); err != nil {
		t.Fatal(err)
	}
	send()
	stats(2, 1)

	// A purge on the other broker: the next send lands in the new content.
	if err := a.PurgeQueue(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	send()
	stats(0, 1)

	// Deleted, then re-created without a delay.
	if err := a.DeleteQueue(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Send(ctx, "q", []model.SendEntry{{Body: "x"}}); !errors.Is(err, model.ErrQueueDoesNotExist) {
		t.Fatalf("send to a deleted queue: %v", err)
	}
	if _, err := a.CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	send()
	stats(1, 0)

	// A larger message limit on the other broker: a body the cached
	// settings refuse is judged on the new ones.
	if err := a.SetQueueAttributes(ctx, "q", map[string]string{"MaximumMessageSize": "1024"}); err != nil {
		t.Fatal(err)
	}
	send()
	if err := a.SetQueueAttributes(ctx, "q", map[string]string{"MaximumMessageSize": "2048"}); err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("a", 1500)
	if res, err := b.Send(ctx, "q", []model.SendEntry{{Body: body}}); err != nil || res[0].Err != nil {
		t.Fatalf("send of 1500 bytes under a 2048-byte limit: %v %v", err, res)
	}
	stats(3, 0)
}
