// Command peerbench runs the loads of `sluice bench` against Sluice's
// peers (RabbitMQ, NATS JetStream, River) with the same flags and the same
// summary, so the numbers compare. It lives in the bench module so that
// the sluice binary links none of the peers' clients.
//
//	peerbench --system rabbitmq --mode steady --producers 32 --consumers 32 --pid $(pgrep beam.smp) --json
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/bench/peers"
	"github.com/sluicemq/sluice/loadgen"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("peerbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := loadgen.DefaultConfig()
	var system, mode, pids, queue, amqpURL, natsURL, natsSync, pgURL, queueType string
	var quiet, asJSON bool
	var prefetch, workers int
	fs.StringVar(&system, "system", "", "rabbitmq, nats or river")
	fs.StringVar(&mode, "mode", string(cfg.Mode), "produce, drain or steady")
	fs.StringVar(&queue, "queue", "", "queue, stream or River queue name (default: bench_<time>)")
	fs.IntVar(&cfg.Producers, "producers", cfg.Producers, "sending goroutines")
	fs.IntVar(&cfg.Consumers, "consumers", cfg.Consumers, "receiving goroutines")
	fs.IntVar(&cfg.Batch, "batch", cfg.Batch, "messages per send (1..10)")
	fs.IntVar(&cfg.ReceiveMax, "receive-max", cfg.ReceiveMax, "most messages per receive (1..10)")
	fs.IntVar(&cfg.BodySize, "body-size", cfg.BodySize, "body size in bytes")
	fs.Float64Var(&cfg.Rate, "rate", 0, "offered rate in messages/s (0: as fast as confirmed)")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "measured time (produce, steady)")
	fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "unmeasured time before it")
	fs.IntVar(&cfg.Messages, "messages", cfg.Messages, "messages drain loads and then receives")
	fs.StringVar(&pids, "pid", "", "the broker's process ids, comma-separated (descendants included)")
	fs.BoolVar(&quiet, "quiet", false, "no progress line")
	fs.BoolVar(&asJSON, "json", false, "print the summary as JSON")
	fs.StringVar(&amqpURL, "amqp-url", "amqp://guest:guest@127.0.0.1:5672/", "RabbitMQ's URL")
	fs.StringVar(&queueType, "amqp-queue-type", "classic", "RabbitMQ queue type: classic or quorum")
	fs.IntVar(&prefetch, "amqp-prefetch", 20, "RabbitMQ consumer prefetch")
	fs.StringVar(&natsURL, "nats-url", "nats://127.0.0.1:4222", "NATS server's URL")
	fs.StringVar(&natsSync, "nats-sync", "lazy", "the NATS server's fsync setting, for the summary: lazy or always")
	fs.StringVar(&pgURL, "pg-url", "postgres://postgres@127.0.0.1:5432/sluice_bench_river", "River's PostgreSQL URL")
	fs.IntVar(&workers, "river-workers", 0, "River's MaxWorkers (default: consumers x receive-max)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "peerbench: %s\n", fmt.Sprintf(format, a...))
		return 2
	}
	cfg.Mode = loadgen.Mode(mode)
	var err error
	if cfg.PIDs, err = loadgen.ParsePIDs(pids); err != nil {
		return usage("%v", err)
	}
	if err := cfg.Validate(); err != nil {
		return usage("%v", err)
	}
	if queue == "" {
		queue = fmt.Sprintf("bench_%d", time.Now().UnixNano())
	}
	var d loadgen.Driver
	switch system {
	case "rabbitmq":
		d = &peers.RabbitMQ{URL: amqpURL, Queue: queue, QueueType: queueType, Prefetch: prefetch}
	case "nats":
		d = &peers.JetStream{URL: natsURL, Stream: queue, Sync: natsSync}
	case "river":
		if workers == 0 {
			workers = cfg.Consumers * cfg.ReceiveMax
		}
		d = &peers.River{URL: pgURL, Queue: queue, Workers: workers}
	default:
		return usage("--system %q: want rabbitmq, nats or river", system)
	}
	if !quiet {
		cfg.Progress = stderr
	}
	s, err := loadgen.Run(ctx, d, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "peerbench: %s: %v\n", system, err)
		return 1
	}
	if asJSON {
		err = s.WriteJSON(stdout)
	} else {
		err = s.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "peerbench: %v\n", err)
		return 1
	}
	if s.Throughput == 0 {
		fmt.Fprintf(stderr, "peerbench: no message got through: %s\n", s.FirstError)
		return 1
	}
	return 0
}
