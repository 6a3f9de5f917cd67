package workertest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluicemq/sluice/worker"
	"github.com/sluicemq/sluice/worker/workertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	var seen string
	h := worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
		seen = worker.TraceParent(ctx)
		switch string(m.Body) {
		case "panic":
			panic("oops")
		case "fail":
			return errors.New("failed")
		}
		return nil
	})
	if o := workertest.Run(t, h, workertest.NewMessage("ok", workertest.TraceContext(tp))); o.Kind != worker.KindAck || seen != tp {
		t.Fatalf("ok: %+v, trace %q", o, seen)
	}
	if o := workertest.Run(t, h, workertest.NewMessage("fail")); o != (worker.Outcome{Kind: worker.KindNack, Reason: "failed"}) {
		t.Fatalf("fail: %+v", o)
	}
	o, err := workertest.Handle(context.Background(), h, workertest.NewMessage("panic"))
	var pe *worker.PanicError
	if o.Kind != worker.KindNack || o.Reason != "panic: oops" || !errors.As(err, &pe) || len(pe.Stack) == 0 {
		t.Fatalf("panic: %+v %v", o, err)
	}
}

func TestNewMessage(t *testing.T) {
	t.Parallel()
	m := workertest.NewMessage("b", workertest.ID("id1"), workertest.Attempts(3, 5),
		workertest.CorrelationID("c"), workertest.Type("type", "t"))
	if m.ID != "id1" || m.Attempts != 3 || m.ReceiveCount != 3 || m.MaxAttempts != 5 ||
		m.CorrelationID != "c" || m.Attributes["type"].Value != "t" || string(m.Body) != "b" {
		t.Fatalf("%+v", m)
	}
}

// Test a handler: the outcome the pool would apply. In a test, call
// workertest.Run(t, h, m), which returns the outcome alone.
func ExampleHandle() {
	type signup struct {
		Email string `json:"email"`
	}
	h := worker.JSON(func(ctx context.Context, m *worker.Message, s signup) error {
		if s.Email == "" {
			return worker.DeadLetterNow("no email")
		}
		return nil
	})
	for _, body := range []string{`{"email":"a@example.com"}`, `{}`, `not json`} {
		o, _ := workertest.Handle(context.Background(), h, workertest.NewMessage(body))
		fmt.Printf("%s %q\n", o.Kind, o.Reason)
	}
	// Output:
	// ack ""
	// dead-letter "no email"
	// dead-letter "the body does not decode as JSON into workertest_test.signup: invalid character 'o' in literal null (expecting 'u')"
}
