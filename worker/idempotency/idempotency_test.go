package idempotency_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicemq/sluice/worker"
	"github.com/sluicemq/sluice/worker/idempotency"
	"github.com/sluicemq/sluice/worker/idempotency/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMemoryStore(t *testing.T) {
	storetest.Run(t, func(*testing.T) idempotency.Store { return idempotency.NewMemoryStore() })
}

func TestKey(t *testing.T) {
	t.Parallel()
	m := &worker.Message{ID: "0b8a-id"}
	if got := idempotency.Key(m); got != "0b8a-id" {
		t.Fatalf("Key without the attribute = %q; want the message id", got)
	}
	m.Attributes = map[string]worker.Attribute{idempotency.AttrIdempotencyKey: {Type: "String", Value: "payroll/42"}}
	if got := idempotency.Key(m); got != "payroll/42" {
		t.Fatalf("Key = %q; want the attribute", got)
	}
}

func TestMiddleware(t *testing.T) {
	t.Parallel()
	// A producer retried a send: two messages (two ids), one key. The
	// handler runs once; the second copy is acked (nil) without it.
	store := idempotency.NewMemoryStore()
	var calls atomic.Int32
	h := idempotency.Middleware(store, idempotency.AtMostOnce)(worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
		calls.Add(1)
		return nil
	}))
	attrs := map[string]worker.Attribute{idempotency.AttrIdempotencyKey: {Type: "String", Value: "pay-1"}}
	for _, id := range []string{"first-copy", "second-copy"} {
		if err := h.HandleMessage(context.Background(), &worker.Message{ID: id, Attributes: attrs}); err != nil {
			t.Fatal(err)
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("handler ran %d times; want 1", calls.Load())
	}
	// A control error passes through unchanged and forgets the key.
	snooze := worker.Snooze(time.Minute)
	h2 := idempotency.Middleware(store, idempotency.AtMostOnce)(worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error { return snooze }))
	if err := h2.HandleMessage(context.Background(), &worker.Message{ID: "x"}); !errors.Is(err, snooze) {
		t.Fatalf("control error = %v; want it unchanged", err)
	}
	if store.Len() != 1 {
		t.Fatalf("store holds %d keys; want 1 (the failed one forgotten)", store.Len())
	}
}
