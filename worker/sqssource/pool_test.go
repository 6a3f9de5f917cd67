package sqssource_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/worker"
	"github.com/sluicemq/sluice/worker/sqssource"
)

// TestPoolOverSQS runs a worker.Pool over this source against Sluice's SQS
// API on the wall clock: ordinary messages are acked once each; one that
// fails once with RetryAfter succeeds on its second receive; a poison
// message (DeadLetterNow) is sent to the dead-letter queue at once; one that
// panics every time is nacked with the client-side backoff until SQS's
// redrive (maxReceiveCount 2) moves it; the handlers see the trace context.
func TestPoolOverSQS(t *testing.T) {
	t.Parallel()
	e := setup(t, false)
	q, dlq := e.withDLQ("pool", false, 2)
	const good = 20
	for i := range good {
		e.send(q, "good-"+strconv.Itoa(i), map[string]types.MessageAttributeValue{"traceparent": str(traceparent)}, "")
	}
	e.send(q, "flaky", nil, "")
	e.send(q, "poison", nil, "")
	e.send(q, "panic", nil, "")

	var mu sync.Mutex
	acked := map[string]int{}
	var traceMissing []string
	flakyTries := 0
	h := worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
		body := string(m.Body)
		mu.Lock()
		defer mu.Unlock()
		switch body {
		case "poison":
			return worker.DeadLetterNow("cannot be handled")
		case "panic":
			panic("boom")
		case "flaky":
			flakyTries++
			if flakyTries == 1 {
				return worker.RetryAfter(time.Second, errors.New("downstream busy"))
			}
			if m.ReceiveCount != 2 {
				t.Errorf("flaky's second try has ReceiveCount %d, want 2", m.ReceiveCount)
			}
		default:
			if worker.TraceParent(ctx) != traceparent {
				traceMissing = append(traceMissing, body)
			}
		}
		acked[body]++
		return nil
	})
	// The jitter draws 0: a nacked message is visible again at once, so the
	// panicking one reaches its maxReceiveCount quickly.
	src := e.source(q, sqssource.Config{Rand: func() float64 { return 0 }})
	pool, err := worker.NewPool(worker.Config{Source: src, Handler: h, Concurrency: 4, Lease: 10 * time.Second,
		WaitTime: time.Second, Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- pool.Run(context.Background()) }()

	// One GetQueueAttributes call reads the three counts of q together: read
	// one by one, the flaky message could turn visible again (its 1 s nack
	// ending) between the read of the visible count and the read of the
	// in-flight one, and the queue would look empty while it still waited.
	settled := func() bool {
		out, err := e.c.GetQueueAttributes(e.ctx, &sqs.GetQueueAttributesInput{QueueUrl: &q,
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages,
				types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
				types.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
		if err != nil {
			t.Fatalf("GetQueueAttributes: %v", err)
		}
		for _, n := range out.Attributes {
			if n != "0" {
				return false
			}
		}
		return len(out.Attributes) == 3
	}
	testutil.Eventually(t, 20*time.Second, "every message handled or dead-lettered", func() bool {
		mu.Lock()
		handled := len(acked)
		mu.Unlock()
		return handled == good+1 && e.attr(dlq, types.QueueAttributeNameApproximateNumberOfMessages) == "2" && settled()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pool.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-runErr; !errors.Is(err, worker.ErrPoolClosed) {
		t.Fatalf("Run = %v, want ErrPoolClosed", err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(acked) != good+1 {
		t.Errorf("acked %d distinct messages, want %d", len(acked), good+1)
	}
	for body, n := range acked {
		if n != 1 {
			t.Errorf("%s handled %d times, want once", body, n)
		}
	}
	if len(traceMissing) > 0 {
		t.Errorf("handlers without the trace context: %v", traceMissing)
	}
	reasons := map[string]string{}
	for _, m := range e.rawReceive(dlq) {
		r := m.MessageAttributes[sqssource.DeadLetterReasonAttribute].StringValue
		reasons[*m.Body] = ""
		if r != nil {
			reasons[*m.Body] = *r
		}
	}
	// The poison message carries its reason; the panicking one was moved by
	// SQS's redrive, which adds none.
	if len(reasons) != 2 || reasons["poison"] != "cannot be handled" || reasons["panic"] != "" {
		t.Errorf("dead letters %v, want poison (with its reason) and panic", reasons)
	}
}
