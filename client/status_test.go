package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
)

func TestMessageStatus(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	e.queue("jobs", map[string]string{"CompletedRetentionSeconds": "3600"})
	ids := e.send("jobs", "a", "b")
	st, err := e.c.MessageStatus(ctx, "jobs", ids[0])
	if err != nil || st.State != client.StateReady || st.Done() || st.ID != ids[0] || st.Queue != "jobs" {
		t.Fatalf("a new message: %+v, %v; want ready", st, err)
	}
	ds := e.receive("jobs", 2, client.VisibilityTimeout(time.Minute))
	byID := map[string]client.Delivery{ds[0].ID: ds[0], ds[1].ID: ds[1]}
	st, err = e.c.MessageStatus(ctx, "jobs", ids[0])
	if err != nil || st.State != client.StateInFlight || st.Attempts != 1 || time.Until(st.LeaseEndsAt) < 30*time.Second {
		t.Fatalf("a received message: %+v, %v; want in flight", st, err)
	}
	if err := e.c.AckWithResult(ctx, "jobs", byID[ids[0]].Receipt, `{"total": 42}`); err != nil {
		t.Fatal(err)
	}
	st, err = e.c.MessageStatus(ctx, "jobs", ids[0])
	if err != nil || st.State != client.StateCompleted || !st.Done() || st.Result == nil || *st.Result != `{"total": 42}` || st.CompletedAt.IsZero() {
		t.Fatalf("an acked message: %+v, %v; want completed with its result", st, err)
	}
	err = e.c.AckWithResult(ctx, "jobs", byID[ids[1]].Receipt, strings.Repeat("x", 64*1024+1))
	if !errors.Is(err, client.ErrInvalidParameter) {
		t.Fatalf("an ack with a result past 64 KiB: %v, want ErrInvalidParameter", err)
	}
	if err := e.c.Ack(ctx, "jobs", byID[ids[1]].Receipt); err != nil {
		t.Fatal(err)
	}
	if st, err = e.c.MessageStatus(ctx, "jobs", ids[1]); err != nil || st.State != client.StateCompleted || st.Result != nil {
		t.Fatalf("a message acked without a result: %+v, %v", st, err)
	}
	if _, err := e.c.MessageStatus(ctx, "jobs", "00000000-0000-4000-8000-000000000000"); !errors.Is(err, client.ErrMessageNotFound) {
		t.Fatalf("an unknown id: %v, want ErrMessageNotFound", err)
	}
	if _, err := e.c.MessageStatus(ctx, "nope", ids[0]); !errors.Is(err, client.ErrQueueNotFound) {
		t.Fatalf("a missing queue: %v, want ErrQueueNotFound", err)
	}
}
