package demo_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/demo"
	"github.com/sluicemq/sluice/internal/testutil"
)

// TestDemoScenarios runs the demo until each scenario has happened: a
// redelivery of the slow report, a payment retried after the retry
// policy's backoff, sends refused at MaxDepth, and the poison pill in
// orders-dlq with the panic as its reason; the dashboard's stats show the
// dead letter.
func TestDemoScenarios(t *testing.T) {
	t.Parallel()
	var out testutil.Buffer
	d, err := demo.Start(context.Background(), demo.Config{Addr: "127.0.0.1:0", Out: &out, Logger: testutil.Logger(t), Interval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	testutil.Eventually(t, 30*time.Second, "every scenario to happen", func() bool {
		r := d.Report()
		return r.Redeliveries > 0 && r.Retries > 0 && r.Refused > 0 && r.PoisonAttempts >= 3 && r.OrdersHandled > 0
	})
	r := d.Report()
	if r.MinRetryGap < time.Second {
		t.Errorf("a payment was retried %v after its failure, before the retry policy's 1 s backoff", r.MinRetryGap)
	}
	if r.Refused >= 120 || r.Refused < 120-50 {
		t.Errorf("%d sends of a 120-message burst refused at MaxDepth 50: want at least 70 and not all", r.Refused)
	}
	ctx := context.Background()
	testutil.Eventually(t, 20*time.Second, "the poison pill in orders-dlq", func() bool {
		page, err := d.Client().DeadLetters(ctx, demo.QueueOrders)
		if err != nil || len(page.Messages) == 0 {
			return false
		}
		m := page.Messages[0]
		if !strings.Contains(m.FailureReason, "panic: cannot parse order") || m.Attempts != 3 || m.DeadLetterSource != demo.QueueOrders {
			t.Fatalf("dead letter %+v: want the panic as its reason after 3 attempts, from orders", m)
		}
		return true
	})
	// The dashboard's stats see it: orders is at least a warning.
	testutil.Eventually(t, 10*time.Second, "orders' dead letter on /v1/stats", func() bool {
		resp, err := http.Get(d.URL + "/v1/stats")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var s struct {
			Queues []struct {
				Name        string
				DeadLetters int64
				Health      string
			}
		}
		if json.NewDecoder(resp.Body).Decode(&s) != nil {
			return false
		}
		for _, q := range s.Queues {
			if q.Name == demo.QueueOrders {
				return q.DeadLetters > 0 && q.Health != "ok"
			}
		}
		return false
	})
	for _, want := range []string{"delivered again", "refused (queue_full)", "made its handler panic"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the narration does not say %q:\n%s", want, out.String())
		}
	}
}
