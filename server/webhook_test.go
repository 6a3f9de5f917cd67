package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/embedded"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/server"
	"github.com/sluicemq/sluice/webhook"
)

// TestWebhooksRunWithTheServer: with Config.Webhooks the server starts a
// dispatcher (a dead letter reaches the receiver, signed) and Stop stops
// it before the caller closes the broker.
func TestWebhooksRunWithTheServer(t *testing.T) {
	t.Parallel()
	const secret = "server-test-secret-0123456789"
	var calls atomic.Int32
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify([]byte(secret), r.Header.Get(webhook.SignatureHeader), body, time.Now(), 0); err != nil {
			t.Errorf("the call's signature: %v", err)
		}
		calls.Add(1)
	}))
	defer recv.Close()
	host := strings.TrimPrefix(recv.URL, "http://")

	backend, err := embedded.Open(embedded.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	wcfg := webhook.DefaultConfig()
	wcfg.Secret, wcfg.AllowedHosts, wcfg.Logger = secret, []string{host}, testutil.Logger(t)
	hosts, err := webhook.ParseHosts(wcfg.AllowedHosts...)
	if err != nil {
		t.Fatal(err)
	}
	front, err := broker.New(backend, broker.Config{WebhookHosts: hosts})
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.DefaultConfig()
	cfg.Addr, cfg.Webhooks = "127.0.0.1:0", &wcfg
	srv, err := server.New(cfg, front)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	deadLetterOne(t, ctx, front, recv.URL+"/dlq")
	testutil.Eventually(t, 10*time.Second, "the webhook call", func() bool { return calls.Load() == 1 })
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestWebhooksConfigValidated(t *testing.T) {
	t.Parallel()
	cfg := server.DefaultConfig()
	cfg.Webhooks = &webhook.Config{Secret: "short"}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "Secret") {
		t.Fatalf("Validate with a short webhook secret: %v", err)
	}
	cfg.Webhooks = &webhook.Config{Secret: "long-enough-secret-123", AllowedHosts: []string{"https://x/"}}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "allowed host") {
		t.Fatalf("Validate with a bad allowed host: %v", err)
	}
}

// TestWebhooksUseTheBrokersClock: the server's dispatcher runs on the
// broker's clock (its gathering window and its signature's timestamp), as
// webhook.Config.Clock asks, unless the config names another clock.
func TestWebhooksUseTheBrokersClock(t *testing.T) {
	t.Parallel()
	const secret = "server-test-secret-0123456789"
	clock := clocktest.NewFakeClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	var calls atomic.Int32
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify([]byte(secret), r.Header.Get(webhook.SignatureHeader), body, clock.Now(), 0); err != nil {
			t.Errorf("the call's signature against the broker's clock: %v", err)
		}
		calls.Add(1)
	}))
	defer recv.Close()

	opts := storage.Options{Clock: clock, Logger: testutil.Logger(t)}
	hosts, err := webhook.ParseHosts(strings.TrimPrefix(recv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	backend, err := embedded.Open(embedded.Config{Dir: t.TempDir(), Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	front, err := broker.New(backend, broker.Config{Logger: opts.Logger, WebhookHosts: hosts})
	if err != nil {
		t.Fatal(err)
	}
	wcfg := webhook.DefaultConfig()
	wcfg.Secret, wcfg.AllowedHosts = secret, []string{strings.TrimPrefix(recv.URL, "http://")}
	cfg := server.DefaultConfig()
	cfg.Addr, cfg.Webhooks = "127.0.0.1:0", &wcfg
	srv, err := server.New(cfg, front)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Stop(ctx); err != nil {
			t.Error(err)
		}
	}()
	deadLetterOne(t, ctx, front, recv.URL+"/dlq")
	// The gathering window passes on the broker's clock.
	testutil.Eventually(t, 10*time.Second, "the webhook call", func() bool {
		clock.Advance(100 * time.Millisecond)
		return calls.Load() == 1
	})
}

// deadLetterOne creates queue src, whose dead letters go to dlq and are
// announced to webhook, and dead-letters one message from it (a nack on its
// only attempt).
func deadLetterOne(t *testing.T, ctx context.Context, front *broker.Broker, webhook string) {
	t.Helper()
	if _, err := front.CreateQueue(ctx, "dlq", nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := front.CreateQueue(ctx, "src", map[string]string{
		model.AttrRedrivePolicy:     fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":1}`, model.ARN("us-east-1", "000000000000", "dlq")),
		model.AttrDeadLetterWebhook: webhook,
	}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := front.Send(ctx, "src", []model.SendEntry{{Body: "poison"}}); err != nil {
		t.Fatal(err)
	}
	ds, err := front.Receive(ctx, model.ReceiveRequest{Queue: "src"})
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive: %d, %v", len(ds), err)
	}
	if _, err := front.ChangeVisibility(ctx, "src", []model.VisibilityEntry{{Receipt: ds[0].Receipt}}); err != nil {
		t.Fatal(err)
	}
}
