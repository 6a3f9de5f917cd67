package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/worker"
	"github.com/sluicemq/sluice/worker/workertest"
)

func TestMuxRoutes(t *testing.T) {
	t.Parallel()
	var trail []string
	mux := worker.NewMux("type")
	mux.Use(func(next worker.Handler) worker.Handler {
		return worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
			trail = append(trail, "mw")
			return next.HandleMessage(ctx, m)
		})
	})
	mux.HandleFunc("a", func(ctx context.Context, m *worker.Message) error {
		trail = append(trail, "a")
		return nil
	})
	mux.HandleFunc("b", func(ctx context.Context, m *worker.Message) error {
		return worker.Snooze(time.Second)
	})
	h := mux

	if o := workertest.Run(t, h, workertest.NewMessage("x", workertest.Type("type", "a"))); o.Kind != worker.KindAck {
		t.Fatalf("a: %+v", o)
	}
	if strings.Join(trail, ",") != "mw,a" {
		t.Fatalf("trail %v, want the middleware then the route", trail)
	}
	if o := workertest.Run(t, h, workertest.NewMessage("x", workertest.Type("type", "b"))); o.Kind != worker.KindSnooze || o.Delay != time.Second {
		t.Fatalf("b: %+v", o)
	}
	// An unknown type, or none, is nacked (retried) with a reason naming it.
	o := workertest.Run(t, h, workertest.NewMessage("x", workertest.Type("type", "c")))
	if o.Kind != worker.KindNack || !strings.Contains(o.Reason, `"c"`) {
		t.Fatalf("unknown type: %+v", o)
	}
	if o := workertest.Run(t, h, workertest.NewMessage("x")); o.Kind != worker.KindNack {
		t.Fatalf("no type: %+v", o)
	}
	mux.NotFound(worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
		return worker.DeadLetterNow("unknown type")
	}))
	if o := workertest.Run(t, h, workertest.NewMessage("x", workertest.Type("type", "c"))); o.Kind != worker.KindDeadLetter {
		t.Fatalf("NotFound: %+v", o)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("registering a type twice did not panic")
		}
	}()
	mux.HandleFunc("a", func(ctx context.Context, m *worker.Message) error { return nil })
}

func TestJSON(t *testing.T) {
	t.Parallel()
	type payment struct {
		Employee string `json:"employee"`
		Cents    int    `json:"cents"`
	}
	var got payment
	h := worker.JSON(func(ctx context.Context, m *worker.Message, p payment) error {
		got = p
		return nil
	})
	if o := workertest.Run(t, h, workertest.NewMessage(`{"employee":"e1","cents":500,"new":true}`)); o.Kind != worker.KindAck || got.Cents != 500 {
		t.Fatalf("outcome %+v, payment %+v", o, got)
	}
	o := workertest.Run(t, h, workertest.NewMessage(`{"employee":`))
	if o.Kind != worker.KindDeadLetter || !strings.Contains(o.Reason, "does not decode as JSON into worker_test.payment") {
		t.Fatalf("bad body: %+v", o)
	}
}

func TestOutcomeOf(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", worker.MaxReasonBytes) // 2 bytes each
	for _, tt := range []struct {
		err  error
		want worker.Outcome
	}{
		{nil, worker.Outcome{Kind: worker.KindAck}},
		{errors.New("boom"), worker.Outcome{Kind: worker.KindNack, Reason: "boom"}},
		{worker.DeadLetterNow("bad"), worker.Outcome{Kind: worker.KindDeadLetter, Reason: "bad"}},
		{wrap(worker.DeadLetterNow("bad")), worker.Outcome{Kind: worker.KindDeadLetter, Reason: "bad"}},
		{worker.Snooze(time.Minute), worker.Outcome{Kind: worker.KindSnooze, Delay: time.Minute}},
		{worker.RetryAfter(time.Second, errors.New("busy")), worker.Outcome{Kind: worker.KindNack, Reason: "busy", Delay: time.Second}},
		{worker.Snooze(24 * time.Hour), worker.Outcome{Kind: worker.KindSnooze, Delay: worker.MaxDelay}},
		{worker.RetryAfter(-time.Second, errors.New("busy")), worker.Outcome{Kind: worker.KindNack, Reason: "busy"}},
		{worker.Snooze(-time.Minute), worker.Outcome{Kind: worker.KindSnooze}},
		{&worker.SnoozeError{Delay: -time.Minute}, worker.Outcome{Kind: worker.KindSnooze}},
		{&worker.RetryAfterError{Delay: -time.Minute}, worker.Outcome{Kind: worker.KindNack, Reason: "retry after -1m0s"}},
		{worker.RetryAfter(13*time.Hour, errors.New("busy")), worker.Outcome{Kind: worker.KindNack, Reason: "busy", Delay: worker.MaxDelay}},
		{worker.RetryAfter(time.Second, nil), worker.Outcome{Kind: worker.KindNack, Reason: "retry after 1s", Delay: time.Second}},
		{errors.New("a\x00b\xff"), worker.Outcome{Kind: worker.KindNack, Reason: "a\uFFFDb\uFFFD"}},
		{errors.New(long), worker.Outcome{Kind: worker.KindNack, Reason: long[:worker.MaxReasonBytes]}},
		{errors.New("x" + long), worker.Outcome{Kind: worker.KindNack, Reason: "x" + long[:worker.MaxReasonBytes-2]}},
	} {
		if got := worker.OutcomeOf(tt.err); got != tt.want {
			t.Errorf("OutcomeOf(%.40v) = %+v, want %+v", tt.err, got, tt.want)
		}
	}
}

func wrap(err error) error { return errors.Join(errors.New("context"), err) }

// The constructors never keep a negative delay (an error's text, or a
// Source given the delay directly, would show it).
func TestNegativeDelayIsZero(t *testing.T) {
	t.Parallel()
	var sn *worker.SnoozeError
	if !errors.As(worker.Snooze(-time.Second), &sn) || sn.Delay != 0 {
		t.Fatalf("Snooze(-1s) = %+v, want Delay 0", sn)
	}
	var ra *worker.RetryAfterError
	if !errors.As(worker.RetryAfter(-time.Second, nil), &ra) || ra.Delay != 0 {
		t.Fatalf("RetryAfter(-1s) = %+v, want Delay 0", ra)
	}
}

func TestChainAndTimeout(t *testing.T) {
	t.Parallel()
	var order []string
	mw := func(name string) worker.Middleware {
		return func(next worker.Handler) worker.Handler {
			return worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
				order = append(order, name)
				return next.HandleMessage(ctx, m)
			})
		}
	}
	h := worker.Chain(worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
		<-ctx.Done()
		return ctx.Err()
	}), mw("outer"), mw("inner"), worker.Timeout(time.Millisecond))
	o, err := workertest.Handle(context.Background(), h, workertest.NewMessage("x"))
	if !errors.Is(err, context.DeadlineExceeded) || o.Kind != worker.KindNack {
		t.Fatalf("outcome %+v err %v", o, err)
	}
	if strings.Join(order, ",") != "outer,inner" {
		t.Fatalf("order %v", order)
	}
}

// ProcessCPU measures this process: spinning raises its reading above 0.
func TestProcessCPU(t *testing.T) {
	s := worker.ProcessCPU()
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
	}
	if u := s.CPUUsage(); u <= 0 || u > 4 {
		t.Fatalf("CPU use %v after spinning, want a share above 0", u)
	}
}
