package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/internal/pgtest"
	"github.com/sluicemq/sluice/server"
)

// TestReadyzAnswersWhenTheStoreDoesNot: with the PostgreSQL store behind a
// proxy that stops answering (connections open, nothing forwarded),
// /readyz still answers 503 within its 2 s and says why, and a second probe
// while the first check is stuck answers at once.
func TestReadyzAnswersWhenTheStoreDoesNot(t *testing.T) {
	t.Parallel()
	dbURL, schema := pgtest.Schema(t)
	proxied, proxy := pgtest.ThroughProxy(t, dbURL)
	backend, err := postgres.Open(context.Background(), postgres.Config{URL: proxied, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = backend.Close() })
	t.Cleanup(proxy.CloseAll) // before the backend's close, which would wait for the stalled statements
	front, err := broker.New(backend, broker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	srv, err := server.New(cfg, front)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Stop(ctx)
	})
	probe := func() (int, string, time.Duration) {
		start := time.Now()
		resp, err := http.Get("http://" + srv.Addr().String() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), time.Since(start)
	}
	if code, body, _ := probe(); code != 200 {
		t.Fatalf("/readyz before the stall: %d %q", code, body)
	}
	proxy.Stall(true)
	code, body, took := probe()
	t.Logf("/readyz with the store silent: %d %q in %v", code, strings.TrimSpace(body), took.Round(time.Millisecond))
	if code != 503 || !strings.Contains(body, "did not answer within 2 s") || took > 10*time.Second {
		t.Fatalf("/readyz with the store silent: %d %q after %v, want 503 saying the store did not answer", code, body, took)
	}
	if code, body, _ := probe(); code != 503 || !strings.Contains(body, "did not answer") {
		t.Fatalf("a second /readyz: %d %q", code, body)
	}
}
