package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/embedded"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/server"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type env struct {
	t       *testing.T
	srv     *server.Server
	backend *embedded.Backend
	URL     string
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
	e := &env{t: t, srv: srv, backend: backend, URL: "http://" + srv.Addr().String()}
	t.Cleanup(func() {
		if err := srv.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
		if err := backend.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

// call posts a JSON 1.0 request and returns the status and body.
func (e *env) call(client *http.Client, op, body string) (int, string, http.Header) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.URL+"/", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "AmazonSQS."+op)
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
		defer client.CloseIdleConnections()
	}
	resp, err := client.Do(req)
	if err != nil {
		e.t.Fatalf("%s: %v", op, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func (e *env) queue(name string) string {
	e.t.Helper()
	status, body, _ := e.call(nil, "CreateQueue", `{"QueueName":"`+name+`"}`)
	if status != 200 {
		e.t.Fatalf("CreateQueue: %d %s", status, body)
	}
	var out struct{ QueueUrl string }
	_ = json.Unmarshal([]byte(body), &out)
	return out.QueueUrl
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	if err := server.DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	cases := []struct {
		field string
		mod   func(*server.Config)
	}{
		{"Addr", func(c *server.Config) { c.Addr = "nonsense" }},
		{"Region", func(c *server.Config) { c.Region = "" }},
		{"MaxHeaderBytes", func(c *server.Config) { c.MaxHeaderBytes = 10 }},
		{"MaxBodyBytes", func(c *server.Config) { c.MaxBodyBytes = 1000 }},
		{"ReadHeaderTimeout", func(c *server.Config) { c.ReadHeaderTimeout = 0 }},
		{"ReadTimeout", func(c *server.Config) { c.ReadTimeout = time.Second }},
		{"WriteTimeout", func(c *server.Config) { c.WriteTimeout = 20 * time.Second }},
		{"IdleTimeout", func(c *server.Config) { c.IdleTimeout = 0 }},
		{"ShutdownTimeout", func(c *server.Config) { c.ShutdownTimeout = -1 }},
		{"MaxWaitingReceives", func(c *server.Config) { c.MaxWaitingReceives = 0 }},
	}
	for _, c := range cases {
		cfg := server.DefaultConfig()
		c.mod(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: Validate() = %v", c.field, err)
		}
	}
}

// TestAccountIDRefusals: the broker's account id (its one owner,
// broker.Config.AccountID) is checked by the broker for its characters and
// by the server for its routes: "v1" would put queue URLs under the native
// API's paths.
func TestAccountIDRefusals(t *testing.T) {
	t.Parallel()
	if err := (broker.Config{AccountID: "a/b"}).Validate(); err == nil || !strings.Contains(err.Error(), "AccountID") {
		t.Errorf("AccountID a/b: %v, want an AccountID error", err)
	}
	backend, err := embedded.Open(embedded.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	front, err := broker.New(backend, broker.Config{AccountID: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := server.New(server.DefaultConfig(), front); err == nil || !strings.Contains(err.Error(), "AccountID") {
		t.Errorf("server over a broker of account v1: %v, want an AccountID error", err)
	}
}

func TestLifecycleIdempotent(t *testing.T) {
	t.Parallel()
	backend, err := embedded.Open(embedded.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	cfg := server.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	front, err := broker.New(backend, broker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	never, err := server.New(cfg, front)
	if err != nil {
		t.Fatal(err)
	}
	if err := never.Stop(context.Background()); err != nil {
		t.Fatalf("Stop of a never-started server: %v", err)
	}
	if err := never.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := never.Start(context.Background()); err == nil {
		t.Fatal("Start after Stop succeeded")
	}

	s, err := server.New(cfg, front)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	addr := s.Addr()
	if err := s.Start(ctx); err != nil || s.Addr() != addr {
		t.Fatalf("second Start: %v", err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := s.Wait(); err != nil {
		t.Fatalf("Wait after Stop: %v", err)
	}
	if _, err := net.DialTimeout("tcp", addr.String(), time.Second); err == nil {
		t.Fatal("still accepting after Stop")
	}
}

func TestOversizedBodyRejected(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *server.Config) { c.MaxBodyBytes = 2 << 20 })
	url := e.queue("big")
	big := strings.Repeat("x", 2<<20)
	status, body, h := e.call(nil, "SendMessage", `{"QueueUrl":"`+url+`","MessageBody":"`+big+`"}`)
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(body, "RequestEntityTooLarge") || !strings.HasPrefix(h.Get("X-Amzn-Query-Error"), "RequestEntityTooLarge;") {
		t.Fatalf("JSON: %d %.200s", status, body)
	}
	req, _ := http.NewRequest(http.MethodPost, e.URL+"/", strings.NewReader("Action=SendMessage&QueueUrl="+url+"&MessageBody="+big))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "<Code>RequestEntityTooLarge</Code>") {
		t.Fatalf("query: %d %.300s", resp.StatusCode, b)
	}
	// Just under the limit still works (the broker then judges the size).
	status, body, _ = e.call(nil, "SendMessage", `{"QueueUrl":"`+url+`","MessageBody":"`+strings.Repeat("y", 1<<20)+`"}`)
	if status != 200 {
		t.Fatalf("1 MiB body: %d %.200s", status, body)
	}
}

func TestTooManyHeadersRejected(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *server.Config) { c.MaxHeaderBytes = 8 << 10 })
	req, _ := http.NewRequest(http.MethodPost, e.URL+"/", strings.NewReader("Action=ListQueues"))
	for i := 0; i < 200; i++ {
		req.Header.Set(fmt.Sprintf("X-Filler-%d", i), strings.Repeat("z", 100))
	}
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("status %d, want 431", resp.StatusCode)
	}
}

func TestShutdownAnswersWaitingReceive(t *testing.T) {
	t.Parallel()
	e := setup(t)
	url := e.queue("drain")
	type result struct {
		status int
		body   string
	}
	done := make(chan result, 1)
	go func() {
		status, body, _ := e.call(nil, "ReceiveMessage", `{"QueueUrl":"`+url+`","WaitTimeSeconds":20}`)
		done <- result{status, body}
	}()
	testutil.Eventually(t, 10*time.Second, "the receive to wait", func() bool { return e.srv.WaitingReceives() == 1 })
	start := time.Now()
	stopped := make(chan error, 1)
	go func() { stopped <- e.srv.Stop(context.Background()) }()
	select {
	case r := <-done:
		if r.status != 200 || strings.TrimSpace(r.body) != "{}" {
			t.Fatalf("drained receive: %d %s", r.status, r.body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiting receive not answered at shutdown")
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Stop: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not return")
	}
	// The 5 s bounds above show that shutdown does not wait for the long
	// poll's 20 s; a tighter bound on wall time fails on a loaded machine.
	t.Logf("shutdown took %v", time.Since(start))
}

func TestWaitingReceiveCap(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *server.Config) { c.MaxWaitingReceives = 1 })
	url := e.queue("cap")
	done := make(chan int, 1)
	go func() {
		status, _, _ := e.call(nil, "ReceiveMessage", `{"QueueUrl":"`+url+`","WaitTimeSeconds":20}`)
		done <- status
	}()
	testutil.Eventually(t, 10*time.Second, "the receive to wait", func() bool { return e.srv.WaitingReceives() == 1 })
	status, body, h := e.call(nil, "ReceiveMessage", `{"QueueUrl":"`+url+`","WaitTimeSeconds":5}`)
	if status != 403 || h.Get("X-Amzn-Query-Error") != "RequestThrottled;Sender" {
		t.Fatalf("over the cap: %d %s", status, body)
	}
	status, body, _ = e.call(nil, "ReceiveMessage", `{"QueueUrl":"`+url+`","WaitTimeSeconds":0}`)
	if status != 200 {
		t.Fatalf("short poll over the cap: %d %s", status, body)
	}
	// Wake the waiter so the test ends quickly.
	if status, body, _ := e.call(nil, "SendMessage", `{"QueueUrl":"`+url+`","MessageBody":"x"}`); status != 200 {
		t.Fatalf("send: %d %s", status, body)
	}
	if s := <-done; s != 200 {
		t.Fatalf("waiter: %d", s)
	}
}

// TestNativeAPIMounted: /v1/ is the native API, the same queues as SQS's;
// every other path, /v1 itself included, is the SQS API's.
func TestNativeAPIMounted(t *testing.T) {
	t.Parallel()
	e := setup(t)
	url := e.queue("both")
	resp, err := http.Post(e.URL+"/v1/queues/both/messages", "application/json", strings.NewReader(`{"body":"native","priority":3}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("native send: %d %s", resp.StatusCode, b)
	}
	status, body, _ := e.call(nil, "ReceiveMessage", `{"QueueUrl":"`+url+`","MessageAttributeNames":["All"]}`)
	if status != 200 || !strings.Contains(body, `"native"`) || !strings.Contains(body, `"Sluice.Priority"`) {
		t.Fatalf("SQS receive of a native send: %d %s", status, body)
	}
	resp, err = http.Get(e.URL + "/v1/nothing")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), `"no_such_route"`) {
		t.Fatalf("unknown native route: %d %s", resp.StatusCode, b)
	}
	// /v1 without the slash is not the native API's (no redirect to /v1/).
	status, body, _ = e.call(nil, "ListQueues", `{}`)
	if status != 200 {
		t.Fatalf("ListQueues: %d %s", status, body)
	}
	req, _ := http.NewRequest(http.MethodPost, e.URL+"/v1", strings.NewReader(`{}`))
	req.Header.Set("X-Amz-Target", "AmazonSQS.ListQueues")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "QueueUrls") {
		t.Fatalf("SQS on /v1: %d %s", resp.StatusCode, b)
	}
}

// TestShutdownAnswersWaitingNativeReceive: the drain reaches the native
// API's long polls too.
func TestShutdownAnswersWaitingNativeReceive(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.queue("drain")
	done := make(chan string, 1)
	go func() {
		resp, err := http.Post(e.URL+"/v1/queues/drain/receive", "application/json", strings.NewReader(`{"waitSeconds":20}`))
		if err != nil {
			done <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}()
	testutil.Eventually(t, 10*time.Second, "the receive to wait", func() bool { return e.srv.WaitingReceives() == 1 })
	go func() { _ = e.srv.Stop(context.Background()) }()
	select {
	case r := <-done:
		if r != `200 {"messages":[]}` {
			t.Fatalf("drained native receive: %s", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiting native receive not answered at shutdown")
	}
}
