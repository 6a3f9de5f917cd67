package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/worker"
)

func main() {
	brokerURL := flag.String("broker", "http://127.0.0.1:9324", "the broker's base URL")
	listen := flag.String("listen", "127.0.0.1:8080", "the web server's address")
	out := flag.String("out", "", "file the sent emails are appended to (default: standard output)")
	flag.Parse()
	if err := run(*brokerURL, *listen, *out); err != nil {
		fmt.Fprintln(os.Stderr, "email:", err)
		os.Exit(1)
	}
}

func run(brokerURL, listen, out string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := client.New(brokerURL)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.CreateQueue(ctx, Queue, nil); err != nil {
		return fmt.Errorf("create queue %s on %s (is the broker running? go run ./cmd/sluice serve): %w", Queue, brokerURL, err)
	}
	sink := os.Stdout
	if out != "" {
		f, err := os.OpenFile(out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		sink = f
	}

	cfg := worker.DefaultConfig()
	cfg.Source = worker.NewSource(c, Queue)
	cfg.Handler = worker.Chain(SendWelcome(&LogMailer{W: sink}), worker.Timeout(time.Minute))
	pool, err := worker.NewPool(cfg)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/signup", Signup{Client: c})
	srv := &http.Server{Addr: listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	errs := make(chan error, 2)
	go func() { errs <- pool.Run(context.Background()) }()
	go func() { errs <- srv.ListenAndServe() }()
	slog.Info("email example running", "listen", listen, "broker", brokerURL)
	select {
	case <-ctx.Done():
	case err := <-errs:
		slog.Error("stopping", "err", err)
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
	if err := pool.Shutdown(shutdown); err != nil && !errors.Is(err, worker.ErrPoolClosed) {
		return err
	}
	return nil
}
