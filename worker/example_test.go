package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/embedded"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/server"
	"github.com/sluicemq/sluice/worker"
	"github.com/sluicemq/sluice/worker/workertest"
)

// A worker process: a pool of JSON handlers routed by a "type" attribute,
// run until an interrupt, then shut down gracefully. (The example starts a
// broker in-process; a real worker names its broker's address.)
func ExampleNewPool() {
	base, stopBroker := exampleBroker()
	defer stopBroker()
	c, _ := client.New(base)
	defer c.Close()
	ctx := context.Background()
	_, _ = c.CreateQueue(ctx, "emails", nil)
	for _, to := range []string{"ada@example.com", "grace@example.com"} {
		_, _ = c.Send(ctx, "emails", client.Message{Body: `{"to":"` + to + `"}`,
			Attributes: map[string]client.Attribute{"type": client.String("welcome")}})
	}

	type welcome struct {
		To string `json:"to"`
	}
	sent := make(chan string, 2)
	mux := worker.NewMux("type")
	mux.Handle("welcome", worker.JSON(func(ctx context.Context, m *worker.Message, w welcome) error {
		sent <- w.To // send the email here; an error retries it
		return nil
	}))

	cfg := worker.DefaultConfig()
	cfg.Source = worker.NewSource(c, "emails")
	cfg.Handler = worker.Chain(mux, worker.Timeout(time.Minute))
	cfg.Logger = slog.New(slog.DiscardHandler)
	pool, err := worker.NewPool(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Shut down on an interrupt (here: once both emails are sent).
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	go func() {
		var got []string
		for len(got) < 2 {
			got = append(got, <-sent)
		}
		sort.Strings(got)
		fmt.Println("sent to", got)
		stop()
	}()
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = pool.Shutdown(shutdownCtx) // running handlers finish; unstarted messages go back
	}()
	fmt.Println(pool.Run(context.Background()))
	// Output:
	// sent to [ada@example.com grace@example.com]
	// worker: the pool is closed (Shutdown was called); make a new one with NewPool to run again
}

// What each handler result does to its message.
func ExampleOutcomeOf() {
	for _, err := range []error{
		nil,
		fmt.Errorf("smtp: %w", os.ErrDeadlineExceeded),
		worker.RetryAfter(time.Minute, fmt.Errorf("rate limited")),
		worker.Snooze(time.Hour),
		worker.DeadLetterNow("no such customer"),
	} {
		o := worker.OutcomeOf(err)
		fmt.Printf("%s %q %v\n", o.Kind, o.Reason, o.Delay)
	}
	// Output:
	// ack "" 0s
	// nack "smtp: i/o timeout" 0s
	// nack "rate limited" 1m0s
	// snooze "" 1h0m0s
	// dead-letter "no such customer" 0s
}

// Route on a type attribute; an unknown type is nacked so that a newer
// worker can take it.
func ExampleMux() {
	mux := worker.NewMux("type")
	mux.HandleFunc("invoice.created", func(ctx context.Context, m *worker.Message) error { return nil })
	for _, typ := range []string{"invoice.created", "invoice.voided"} {
		o, _ := workertest.Handle(context.Background(), mux, workertest.NewMessage("{}", workertest.Type("type", typ)))
		fmt.Println(typ, o.Kind)
	}
	// Output:
	// invoice.created ack
	// invoice.voided nack
}

// exampleBroker starts a broker in-process and returns its base URL and a
// stop function.
func exampleBroker() (string, func()) {
	dir, _ := os.MkdirTemp("", "sluice-worker-example")
	log := slog.New(slog.DiscardHandler)
	opts := storage.Options{Logger: log}
	backend, err := embedded.Open(embedded.Config{Dir: dir, Options: opts})
	if err != nil {
		panic(err)
	}
	front, _ := broker.New(backend, broker.Config{Logger: opts.Logger, Observer: opts.Observer})
	cfg := server.DefaultConfig()
	cfg.Addr, cfg.Logger = "127.0.0.1:0", log
	srv, err := server.New(cfg, front)
	if err != nil {
		panic(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		panic(err)
	}
	return "http://" + srv.Addr().String(), func() {
		_ = srv.Stop(context.Background())
		_ = front.Close()
		_ = os.RemoveAll(dir)
	}
}
