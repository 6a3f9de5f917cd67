package worker_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/worker"
)

// The pool over HTTP through NewSource with ProtocolHTTP: a Mux of JSON handlers with
// adaptive concurrency (NewSource is a Backlogger). A good order is acked,
// a body that does not decode is dead-lettered at once, an unknown type is
// nacked (the queue's RetryPolicy delays it a minute), and Shutdown stops
// cleanly.
func TestPoolOverNativeSource(t *testing.T) {
	t.Parallel()
	e := setupNative(t)
	type order struct {
		ID    int `json:"id"`
		Cents int `json:"cents"`
	}
	var paid atomic.Int64
	mux := worker.NewMux("type")
	mux.Handle("order.paid", worker.JSON(func(ctx context.Context, m *worker.Message, o order) error {
		paid.Add(int64(o.Cents))
		return nil
	}))
	send := func(typ, body string) {
		t.Helper()
		_, err := e.c.Send(context.Background(), "jobs", client.Message{Body: body,
			Attributes: map[string]client.Attribute{"type": client.String(typ)}})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		send("order.paid", `{"id":`+string(rune('0'+i%10))+`,"cents":100}`)
	}
	send("order.paid", `{"id":`)
	send("order.refunded", `{"id":1}`)

	cfg := worker.DefaultConfig()
	cfg.Source, cfg.Handler = e.src, mux
	cfg.Concurrency, cfg.MinConcurrency, cfg.AdaptInterval = 8, 1, 50*time.Millisecond
	cfg.WaitTime = time.Second
	cfg.Logger = testutil.Logger(t)
	p, err := worker.NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- p.Run(context.Background()) }()

	stats := func() client.Stats {
		st, err := e.c.Stats(context.Background(), "jobs")
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	testutil.Eventually(t, wait, "every order handled", func() bool {
		st := stats()
		return st.Visible == 0 && st.InFlight == 0 && st.Delayed == 1 && st.DeadLetters != nil && *st.DeadLetters == 1
	})
	if n := paid.Load(); n != 2000 {
		t.Fatalf("paid %d cents, want 2000", n)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-ran; !errors.Is(err, worker.ErrPoolClosed) {
		t.Fatal(err)
	}
	m := e.browse()[`{"id":1}`]
	if m.Attempts != 1 || !strings.Contains(m.FailureReason, `no handler for message type "order.refunded"`) {
		t.Fatalf("unknown type: attempts %d reason %q", m.Attempts, m.FailureReason)
	}
	page, err := e.c.DeadLetters(context.Background(), "jobs")
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 1 || !strings.Contains(page.Messages[0].FailureReason, "does not decode") {
		t.Fatalf("dead letters %+v", page.Messages)
	}
}
