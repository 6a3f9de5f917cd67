package client_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/embedded"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/server"
)

// startBroker starts a broker in-process for the example; a program would
// call client.New with its broker's address ("http://127.0.0.1:9324").
func startBroker() (url string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "sluice-client-example")
	if err != nil {
		return "", nil, err
	}
	backend, err := embedded.Open(embedded.Config{Dir: dir})
	if err != nil {
		return "", nil, err
	}
	front, err := broker.New(backend, broker.Config{})
	if err != nil {
		return "", nil, err
	}
	cfg := server.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	srv, err := server.New(cfg, front)
	if err != nil {
		return "", nil, err
	}
	if err := srv.Start(context.Background()); err != nil {
		return "", nil, err
	}
	return "http://" + srv.Addr().String(), func() {
		_ = srv.Stop(context.Background())
		_ = front.Close()
		_ = os.RemoveAll(dir)
	}, nil
}

// Create a queue with a dead-letter queue, send a message, receive it with
// a long poll, and ack it; then dead-letter one that can never succeed and
// look at it.
func Example() {
	base, stop, err := startBroker()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()
	ctx := context.Background()

	c, err := client.New(base, client.WithRetries(5))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	dlq, err := c.CreateQueue(ctx, "orders-dlq", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = c.CreateQueue(ctx, "orders", map[string]string{
		"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":3}`, dlq.ARN),
		"MaxDepth":      "100000",
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	_, err = c.Send(ctx, "orders", client.Message{
		Body:          `{"order": 41}`,
		Attributes:    map[string]client.Attribute{"kind": client.String("new-order")},
		CorrelationID: "checkout-7f3a",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	msgs, err := c.Receive(ctx, "orders", client.MaxMessages(10), client.WaitTime(5*time.Second), client.VisibilityTimeout(time.Minute))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range msgs {
		fmt.Println(m.Body, m.Attributes["kind"].Value, m.CorrelationID, m.Attempts)
		if err := c.Ack(ctx, "orders", m.Receipt); err != nil {
			fmt.Println(err)
		}
	}

	// A message that can never succeed goes to the dead-letter queue now,
	// with its reason.
	_, _ = c.Send(ctx, "orders", client.Message{Body: `{"order": 44}`})
	msgs, _ = c.Receive(ctx, "orders", client.WaitTime(5*time.Second))
	for _, m := range msgs {
		_ = c.DeadLetter(ctx, "orders", m.Receipt, "order 44 has no customer")
	}
	page, err := c.DeadLetters(ctx, "orders")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range page.Messages {
		fmt.Println(m.Body, "in", page.Queue+":", m.FailureReason)
	}

	// Errors are typed: errors.Is against the sentinels.
	_, err = c.Stats(ctx, "no-such-queue")
	fmt.Println(errors.Is(err, client.ErrQueueNotFound))
	// Output:
	// {"order": 41} new-order checkout-7f3a 1
	// {"order": 44} in orders-dlq: order 44 has no customer
	// true
}

// A nightly report: a schedule that sends the report's job to its queue at
// 04:00 Berlin time every night, sending one job for the nights missed
// while no broker was up. Workers take the jobs from the queue as any
// other message.
func ExampleClient_CreateSchedule() {
	base, stop, err := startBroker()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()
	ctx := context.Background()
	c, err := client.New(base)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	if _, err := c.CreateQueue(ctx, "reports", nil); err != nil {
		fmt.Println(err)
		return
	}
	s, err := c.CreateSchedule(ctx, client.ScheduleSpec{
		Name: "nightly-report", Queue: "reports", Spec: "0 4 * * *", TimeZone: "Europe/Berlin", Missed: "once",
		Message: client.Message{Body: `{"report": "daily-sales"}`, CorrelationID: "nightly-report"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	fmt.Printf("%s: %s in %s, missed runs: %s\n", s.Name, s.Spec, s.TimeZone, s.Missed)
	fmt.Println("next run at", s.NextRun.In(berlin).Format("15:04"), "Berlin time")
	// Output:
	// nightly-report: 0 4 * * * in Europe/Berlin, missed runs: once
	// next run at 04:00 Berlin time
}

// A job's status polled until it is done: the producer keeps the message
// id its send answered, a worker acks the job with its result, and the
// producer reads the result from the status (the queue keeps completed
// records for an hour: CompletedRetentionSeconds).
func ExampleClient_MessageStatus() {
	base, stop, err := startBroker()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()
	ctx := context.Background()
	c, err := client.New(base)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	if _, err := c.CreateQueue(ctx, "invoices", map[string]string{"CompletedRetentionSeconds": "3600"}); err != nil {
		fmt.Println(err)
		return
	}
	job, err := c.Send(ctx, "invoices", client.Message{Body: `{"order": 17}`})
	if err != nil {
		fmt.Println(err)
		return
	}
	// A worker, elsewhere: it renders the invoice and acks with where it is.
	go func() {
		ds, err := c.Receive(ctx, "invoices", client.WaitTime(20*time.Second))
		if err == nil && len(ds) == 1 {
			_ = c.AckWithResult(ctx, "invoices", ds[0].Receipt, `{"pdf": "invoices/17.pdf"}`)
		}
	}()
	for {
		st, err := c.MessageStatus(ctx, "invoices", job.ID)
		if err != nil {
			fmt.Println(err)
			return
		}
		if st.Done() {
			fmt.Println(st.State, *st.Result)
			break
		}
		time.Sleep(50 * time.Millisecond) // a real poll waits longer
	}
	// Output:
	// completed {"pdf": "invoices/17.pdf"}
}
