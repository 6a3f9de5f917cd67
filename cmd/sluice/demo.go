package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/demo"
)

func init() {
	register("demo", command{"run a broker with traffic that shows the queue patterns, and its dashboard", runDemo})
}

// runDemo is `sluice demo`: a broker on a temporary store, its dashboard,
// and the scenarios of package internal/demo, until Ctrl-C or --duration.
func runDemo(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sluice demo", flag.ContinueOnError)
	fs.SetOutput(helpOut(args, stdout, stderr))
	addr := fs.String("addr", "127.0.0.1:9324", "address to listen on; port 0 picks a free port")
	duration := fs.Duration("duration", 0, "how long to run (0: until Ctrl-C)")
	logLevel := fs.String("log-level", "error", "broker log level: debug, info, warn, error (the workers log at debug only)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: sluice demo [flags]\n\n"+
			"Start a broker on a temporary store (removed at the end) with producers, competing\n"+
			"workers, a slow task that outlives its lease, a retry policy backing off, a burst\n"+
			"that hits a queue's maximum depth and a poison pill, and print the dashboard's URL.\n\n"+
			"examples:\n"+
			"  sluice demo\n"+
			"  sluice demo --duration 2m\n"+
			"  sluice demo --addr 127.0.0.1:0 --log-level info\n\n"+
			"flags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sluice demo: unexpected arguments %q (demo takes only flags)\n", fs.Args())
		return 2
	}
	if *duration < 0 {
		fmt.Fprintf(stderr, "sluice demo: --duration %v must not be negative (0 runs until Ctrl-C)\n", *duration)
		return 2
	}
	log, err := newLogger(*logLevel, "text", stderr)
	if err != nil {
		fmt.Fprintf(stderr, "sluice demo: %v\n", err)
		return 2
	}
	hello := func(out io.Writer, url string) {
		fmt.Fprintf(out, `sluice demo: a broker on a temporary store, listening on %s

Open the dashboard: %s/ui/

What to watch for (the dashboard's page in brackets):
  orders      two worker pools compete for a steady stream; every %v a poison pill
              makes its handler panic 3 times and lands in orders-dlq (warning: 1 dead letter)
              [#/queues/orders-dlq/dead-letters: grouped by the panic, replay or delete]
  reports     a slow report outlives its 2 s lease and is delivered again (in flight, then visible)
              [#/queues/reports: the Flow marks the lease's end and the redelivery]
  payments    failed payments wait 1 s, 2 s, then succeed: the retry policy's backoff (delayed)
              [#/queues/payments: the Backing off lane, "retry in 1 s", nacks in the rate chart]
  thumbnails  every %v a burst of 120 sends meets MaxDepth 50: the refused sends are
              counted in /metrics (sluice_sends_refused_total) and printed here
  all         [#/overview: totals, throughput, uptime, the store's size and free disk]

The same broker answers the SQS API and the native API (/v1/) at %s.
Stop with Ctrl-C.

`, url, url, demo.PoisonEvery, demo.BurstEvery, url)
	}
	d, err := demo.Start(ctx, demo.Config{Addr: *addr, Logger: log, Out: stdout, Hello: hello})
	if err != nil {
		// The package's own "demo: " would repeat the command's name.
		fmt.Fprintf(stderr, "sluice demo: %s\n", strings.TrimPrefix(err.Error(), "demo: "))
		return 1
	}
	var timeout <-chan time.Time
	if *duration > 0 {
		t := time.NewTimer(*duration)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ctx.Done():
	case <-timeout:
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = d.Stop(stopCtx)
	r := d.Report()
	fmt.Fprintf(stdout, "\nsluice demo: stopped. Orders sent %d, handled %d; poison pills %d; redeliveries %d; payment retries %d; refused sends %d.\n",
		r.OrdersSent, r.OrdersHandled, r.PoisonPills, r.Redeliveries, r.Retries, r.Refused)
	if err != nil {
		fmt.Fprintf(stderr, "sluice demo: stop: %v\n", err)
		return 1
	}
	return 0
}
