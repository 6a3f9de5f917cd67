package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/internal/pgtest"
	"github.com/sluicemq/sluice/internal/testutil"
)

// Connection failures become model.ErrUnavailable (a 503 on the wire);
// statement errors and a client that went away do not.
func TestUnavailableMapsConnectionErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "57P01"}, true}, // admin_shutdown
		{&pgconn.PgError{Code: "08006"}, true}, // connection_failure
		{fmt.Errorf("postgres: send: %w", io.ErrUnexpectedEOF), true},
		{&pgconn.PgError{Code: "23505"}, false}, // unique_violation
		{context.Canceled, false},
		{errors.New("postgres: decode: bad row"), false},
	} {
		err := tc.err
		unavailable(context.Background(), &err)
		if got := errors.Is(err, model.ErrUnavailable); got != tc.want {
			t.Errorf("%v: unavailable %v, want %v", tc.err, got, tc.want)
		}
		if !errors.Is(err, tc.err) {
			t.Errorf("%v: the cause is lost: %v", tc.err, err)
		}
	}
	// A deadline that passed while the caller's context is live is the
	// answer deadline's (deadline.go): unavailable. The caller's own
	// deadline is not.
	err := fmt.Errorf("postgres: claim: %w", context.DeadlineExceeded)
	unavailable(context.Background(), &err)
	if !errors.Is(err, model.ErrUnavailable) {
		t.Errorf("the answer deadline: %v, want unavailable", err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	err = fmt.Errorf("postgres: claim: %w", context.DeadlineExceeded)
	unavailable(done, &err)
	if errors.Is(err, model.ErrUnavailable) {
		t.Errorf("the caller's own end: %v, want it as it is", err)
	}
	// A database that refuses connections, through the real pool.
	cfg := DefaultConfig()
	cfg.URL = "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"
	_, err = Open(context.Background(), cfg)
	if err == nil {
		t.Fatal("Open of a closed port succeeded")
	}
	if !unreachable(err) {
		t.Errorf("a refused connection is not unreachable: %v", err)
	}
}

// TestNoAnswerIsUnavailable: with PostgreSQL behind a proxy that stops
// answering (connections open, nothing forwarded: a partition TCP does not
// see), a send and a receive answer ErrUnavailable within the answer
// deadline instead of waiting for ever, and once the network is back the
// broker serves again by itself.
func TestNoAnswerIsUnavailable(t *testing.T) {
	t.Parallel()
	dbURL, schema := pgtest.Schema(t)
	proxied, proxy := pgtest.ThroughProxy(t, dbURL)
	cfg := DefaultConfig()
	cfg.URL, cfg.Schema, cfg.AnswerTimeout = proxied, schema, time.Second
	b, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	t.Cleanup(proxy.CloseAll) // first: the close would wait for stalled statements
	f, err := broker.New(b, broker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := f.CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	send := func() error {
		res, err := f.Send(ctx, "q", []model.SendEntry{{ID: "a", Body: "x"}})
		if err == nil && res[0].Err != nil {
			err = res[0].Err
		}
		return err
	}
	if err := send(); err != nil {
		t.Fatal(err)
	}
	proxy.Stall(true)
	start := time.Now()
	err = send()
	took := time.Since(start)
	t.Logf("a send with PostgreSQL silent: %v after %v", err, took.Round(time.Millisecond))
	if !errors.Is(err, model.ErrUnavailable) || took > 10*time.Second {
		t.Fatalf("a send with PostgreSQL silent: %v after %v, want ErrUnavailable within the answer deadline", err, took)
	}
	zero := time.Duration(0)
	start = time.Now()
	// Bounded, so that a regression fails instead of hanging the package:
	// an idle connection's ping before it is handed out had no deadline.
	bounded, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = f.Receive(bounded, model.ReceiveRequest{Queue: "q", MaxMessages: 1, WaitTime: &zero})
	if !errors.Is(err, model.ErrUnavailable) || time.Since(start) > 10*time.Second {
		t.Fatalf("a receive with PostgreSQL silent: %v after %v, want ErrUnavailable", err, time.Since(start))
	}
	proxy.Stall(false)
	proxy.CloseAll() // the stalled connections lost bytes: the pool must make new ones
	testutil.Eventually(t, 60*time.Second, "sends served again after the partition", func() bool { return send() == nil })
}
