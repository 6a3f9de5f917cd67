package sqs_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluicemq/sluice/api/sqs"
	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/embedded"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/server"
	"github.com/sluicemq/sluice/worker/sqssource"
)

// env is one broker started for one test: the real server on 127.0.0.1:0 over
// the embedded backend in a temporary directory.
type env struct {
	t      *testing.T
	srv    *server.Server
	URL    string // http://127.0.0.1:port
	client *awssqs.Client
}

// setup starts a server over an embedded broker; mods are
// func(*server.Config) and func(*broker.Config) changes.
func setup(t *testing.T, mods ...any) *env {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	backend, err := embedded.Open(embedded.Config{Dir: t.TempDir(), Options: storage.Options{Logger: log}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Logger = log
	bcfg := broker.Config{Logger: log}
	for _, m := range mods {
		switch m := m.(type) {
		case func(*server.Config):
			m(&cfg)
		case func(*broker.Config):
			m(&bcfg)
		default:
			t.Fatalf("setup: a mod of type %T", m)
		}
	}
	// The Sluice attribute tests set a DeadLetterWebhook on this host.
	bcfg.WebhookHosts = exampleHooks{}
	front, err := broker.New(backend, bcfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg, front)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		if err := backend.Close(); err != nil {
			t.Errorf("backend Close: %v", err)
		}
	})
	url := "http://" + srv.Addr().String()
	client := awssqs.New(awssqs.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String(url),
		Credentials:      credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		HTTPClient:       &http.Client{Timeout: 40 * time.Second, Transport: sqssource.Transport(nil)},
		RetryMaxAttempts: 1,
	})
	return &env{t: t, srv: srv, URL: url, client: client}
}

// queue creates a queue and returns its URL.
func (e *env) queue(name string, attrs map[string]string) string {
	e.t.Helper()
	out, err := e.client.CreateQueue(context.Background(), &awssqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		e.t.Fatalf("CreateQueue %s: %v", name, err)
	}
	return *out.QueueUrl
}

// post sends a raw request and returns the status, headers and body.
func (e *env) post(path, contentType, target, body string) (*http.Response, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	if target != "" {
		req.Header.Set("X-Amz-Target", target)
	}
	return e.do(req)
}

func (e *env) do(req *http.Request) (*http.Response, string) {
	e.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp, sb.String()
}

// wrapped serves the SQS API (httptest, no server limits) over a fresh
// embedded backend that wrap changes (to hide or break some of its
// methods), and returns the front, an SDK client of it and its URL.
func wrapped(t *testing.T, wrap func(storage.Backend) storage.Backend, cfg sqs.Config) (*broker.Broker, *awssqs.Client, string) {
	t.Helper()
	b, err := embedded.Open(embedded.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	front, err := broker.New(wrap(b), broker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sqs.New(front, cfg))
	t.Cleanup(func() {
		srv.Close()
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return front, awssqs.New(awssqs.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		HTTPClient:  &http.Client{Timeout: 10 * time.Second, Transport: sqssource.Transport(nil)},
	}), srv.URL
}

// exampleHooks allows dead-letter webhooks to hooks.example.com (https).
type exampleHooks struct{}

func (exampleHooks) Allowed(host string) bool { return host == "hooks.example.com:443" }
