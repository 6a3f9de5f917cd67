package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/testutil"
)

// flaky is an HTTP server in front of the real broker's handler: its first
// `failures` requests get fail's answer, the later ones the broker's.
type flaky struct {
	srv      *httptest.Server
	mu       sync.Mutex
	attempts int
	failures int
	fail     func(w http.ResponseWriter, r *http.Request)
}

func (e *env) flaky(failures int, fail func(w http.ResponseWriter, r *http.Request)) *flaky {
	f := &flaky{failures: failures, fail: fail}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.attempts++
		failing := f.attempts <= f.failures
		f.mu.Unlock()
		if failing {
			f.fail(w, r)
			return
		}
		e.srv.Handler().ServeHTTP(w, r)
	}))
	e.t.Cleanup(f.srv.Close)
	return f
}

func (f *flaky) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attempts
}

// answer is a fail function answering status with the API's error body.
func answer(status int, code string, header ...string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"code":%q,"message":"injected"}`, code)
	}
}

// hangUp is a fail function that closes the connection without an answer:
// the client cannot know whether the request was carried out.
func hangUp(w http.ResponseWriter, r *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}

// maxJitter makes the backoff deterministic: the longest wait allowed.
var maxJitter = client.WithJitter(func(n time.Duration) time.Duration { return n })

func TestRetryUnavailableThenSuccess(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.queue("q", nil)
	f := e.flaky(2, answer(503, "unavailable"))
	c := e.clientAt(f.srv.URL, maxJitter)
	if _, err := c.Send(context.Background(), "q", client.Message{Body: "once"}); err != nil {
		t.Fatal(err)
	}
	// Full jitter's ceiling doubles from the base: 100 ms, 200 ms.
	if f.count() != 3 || fmt.Sprint(e.waits.all()) != "[100ms 200ms]" {
		t.Fatalf("%d attempts, waits %v", f.count(), e.waits.all())
	}
	if st, err := e.c.Stats(context.Background(), "q"); err != nil || st.Visible != 1 {
		t.Fatalf("Stats = %+v, %v (503 means not done: one message)", st, err)
	}
}

func TestRetryHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.queue("q", nil)
	var agents sync.Map
	throttle := answer(429, "throttled", "Retry-After", "3")
	f := e.flaky(2, func(w http.ResponseWriter, r *http.Request) {
		agents.Store(r.UserAgent(), true)
		throttle(w, r)
	})
	c := e.clientAt(f.srv.URL, maxJitter, client.WithUserAgent("billing/2.1"))
	if _, err := c.Receive(context.Background(), "q", client.WaitTime(0)); err != nil {
		t.Fatal(err)
	}
	if _, ok := agents.Load("billing/2.1"); !ok {
		t.Fatal("WithUserAgent's User-Agent was not sent")
	}
	if f.count() != 3 || fmt.Sprint(e.waits.all()) != "[3s 3s]" {
		t.Fatalf("%d attempts, waits %v; want the Retry-After, 3 s", f.count(), e.waits.all())
	}
}

func TestRetryExhausted(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.queue("q", nil)
	f := e.flaky(100, answer(503, "unavailable", "Retry-After", "0"))
	c := e.clientAt(f.srv.URL, maxJitter, client.WithRetries(4), client.WithBackoff(100*time.Millisecond, 250*time.Millisecond))
	_, err := c.Send(context.Background(), "q", client.Message{Body: "x"})
	if ce := wantIs(t, err, client.ErrUnavailable); ce.Status != 503 || ce.Message != "injected" {
		t.Fatalf("%#v", ce)
	}
	// The cap bounds the backoff.
	if f.count() != 5 || fmt.Sprint(e.waits.all()) != "[100ms 200ms 250ms 250ms]" {
		t.Fatalf("%d attempts, waits %v", f.count(), e.waits.all())
	}

	none := e.clientAt(f.srv.URL, client.WithRetries(0))
	before := f.count()
	_, err = none.Send(context.Background(), "q", client.Message{Body: "x"})
	wantIs(t, err, client.ErrUnavailable)
	if f.count() != before+1 {
		t.Fatalf("WithRetries(0) made %d attempts", f.count()-before)
	}
}

// An ambiguous failure (a 500, a connection that breaks) is retried only
// for a request that is safe to repeat.
func TestRetryOnlySafeRequests(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		fail func(w http.ResponseWriter, r *http.Request)
		is   func(error) bool
	}{
		{"internal", answer(500, "internal"), func(err error) bool { return errors.Is(err, client.ErrInternal) }},
		{"hang up", hangUp, func(err error) bool { var ue *url.Error; return errors.As(err, &ue) }},
		{"proxy", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "bad gateway", http.StatusBadGateway) },
			func(err error) bool {
				var ce *client.Error
				return errors.Is(err, client.ErrUnavailable) && errors.As(err, &ce) && ce.Code == "" && ce.Message == "bad gateway"
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, nil)
			ctx := context.Background()
			e.queue("q", nil)
			e.send("q", "a", "b")
			ds := e.receive("q", 2, client.VisibilityTimeout(time.Minute))

			// Ack is safe to repeat: retried through one failure.
			f := e.flaky(1, tc.fail)
			c := e.clientAt(f.srv.URL, maxJitter)
			if err := c.Ack(ctx, "q", ds[0].Receipt); err != nil {
				t.Fatalf("Ack: %v", err)
			}
			if f.count() != 2 {
				t.Fatalf("Ack made %d attempts, want 2", f.count())
			}
			// Nack is not: its first failure is the answer.
			g := e.flaky(1, tc.fail)
			c = e.clientAt(g.srv.URL, maxJitter)
			err := c.Nack(ctx, "q", ds[1].Receipt, "x", 0)
			if !tc.is(err) || g.count() != 1 {
				t.Fatalf("Nack: %d attempts, error %v (%T)", g.count(), err, err)
			}
		})
	}
}

func TestContextStopsRetries(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.queue("q", nil)

	// Cancelled while waiting to retry (the injected sleep).
	f := e.flaky(100, answer(503, "unavailable"))
	ctx, cancel := context.WithCancel(context.Background())
	c := e.clientAt(f.srv.URL, client.WithSleep(func(ctx context.Context, d time.Duration) error {
		cancel()
		return ctx.Err()
	}))
	_, err := c.Send(ctx, "q", client.Message{Body: "x"})
	if !errors.Is(err, context.Canceled) || f.count() != 1 {
		t.Fatalf("%d attempts, error %v", f.count(), err)
	}

	// The default sleep: a 10 s backoff ends when the context does.
	g := e.flaky(100, answer(503, "unavailable"))
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	real, err := client.New(g.srv.URL, client.WithBackoff(10*time.Second, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer real.Close()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := real.Send(ctx, "q", client.Message{Body: "x"})
		done <- err
	}()
	testutil.Eventually(t, 5*time.Second, "the first attempt", func() bool { return g.count() >= 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second {
		t.Fatalf("after %v: %v", time.Since(start), err)
	}
}

func TestContextEndsLongPoll(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.queue("q", nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := e.c.Receive(ctx, "q", client.WaitTime(20*time.Second))
		done <- err
	}()
	testutil.Eventually(t, 5*time.Second, "the receive to wait", func() bool { return e.srv.WaitingReceives() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || time.Since(start) > 10*time.Second {
		t.Fatalf("after %v: %v", time.Since(start), err)
	}
	if len(e.waits.all()) != 0 {
		t.Fatalf("a cancelled receive was retried: %v", e.waits.all())
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url  string
		opts []client.Option
	}{
		{"127.0.0.1:9324", nil},
		{"ftp://host", nil},
		{"http://", nil},
		{"http://h", []client.Option{client.WithRetries(-1)}},
		{"http://h", []client.Option{client.WithBackoff(0, time.Second)}},
		{"http://h", []client.Option{client.WithBackoff(time.Second, time.Millisecond)}},
		{"http://h", []client.Option{client.WithSleep(nil)}},
	} {
		if _, err := client.New(tc.url, tc.opts...); err == nil {
			t.Errorf("New(%q, %d options) accepted", tc.url, len(tc.opts))
		}
	}
	// A base URL with /v1 reaches the same API.
	e := setup(t, nil)
	e.queue("q", nil)
	c := e.clientAt(e.URL+"/v1/", client.WithUserAgent("test-agent/1"))
	if _, err := c.GetQueue(context.Background(), "q"); err != nil {
		t.Fatal(err)
	}
}

// A 5xx without Sluice's JSON body (a proxy's) may come after the broker
// stored the message: a send without a DedupID is not retried then, one
// with a DedupID is; Sluice's own 503 is retried for both.
func TestRetryProxy5xxSend(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			t.Parallel()
			e := setup(t, nil)
			ctx := context.Background()
			e.queue("q", nil)
			e.queue("q.fifo", map[string]string{"FifoQueue": "true"})
			proxy := func(w http.ResponseWriter, r *http.Request) { http.Error(w, "upstream trouble", status) }

			f := e.flaky(100, proxy)
			c := e.clientAt(f.srv.URL, maxJitter)
			_, err := c.Send(ctx, "q", client.Message{Body: "plain"})
			var ce *client.Error
			if !errors.As(err, &ce) || ce.Status != status || ce.Code != "" || f.count() != 1 {
				t.Fatalf("send without DedupID: %d attempts, error %v; want 1 attempt and the proxy's answer", f.count(), err)
			}
			_, err = c.SendBatch(ctx, "q", []client.Message{{Body: "a", DedupID: "1"}, {Body: "b"}})
			if !errors.As(err, &ce) || f.count() != 2 {
				t.Fatalf("batch with a message without DedupID: %d attempts, error %v", f.count(), err)
			}

			g := e.flaky(1, proxy)
			c = e.clientAt(g.srv.URL, maxJitter)
			if _, err := c.Send(ctx, "q.fifo", client.Message{Body: "deduped", GroupID: "g", DedupID: "d1"}); err != nil || g.count() != 2 {
				t.Fatalf("send with DedupID: %d attempts, error %v; want a retry", g.count(), err)
			}

			h := e.flaky(1, answer(503, "unavailable"))
			c = e.clientAt(h.srv.URL, maxJitter)
			if _, err := c.Send(ctx, "q", client.Message{Body: "plain"}); err != nil || h.count() != 2 {
				t.Fatalf("send after Sluice's 503: %d attempts, error %v; want a retry", h.count(), err)
			}
		})
	}
}

// A proxy's 503 is ambiguous: a request that is not safe to repeat (a
// nack) is not retried; Sluice's own 503 is retried.
func TestRetryProxy503Nack(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	e.queue("q", nil)
	e.send("q", "a")
	ds := e.receive("q", 1, client.VisibilityTimeout(time.Minute))
	f := e.flaky(1, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no upstream", http.StatusServiceUnavailable)
	})
	c := e.clientAt(f.srv.URL, maxJitter)
	if err := c.Nack(ctx, "q", ds[0].Receipt, "x", 0); !errors.Is(err, client.ErrUnavailable) || f.count() != 1 {
		t.Fatalf("Nack after a proxy's 503: %d attempts, error %v; want 1 attempt", f.count(), err)
	}
	g := e.flaky(1, answer(503, "unavailable"))
	c = e.clientAt(g.srv.URL, maxJitter)
	if err := c.Nack(ctx, "q", ds[0].Receipt, "x", 0); err != nil || g.count() != 2 {
		t.Fatalf("Nack after Sluice's 503: %d attempts, error %v; want a retry", g.count(), err)
	}
}

// A connection that cannot be made sent nothing: even a request that is not
// safe to repeat after an ambiguous failure (a nack) is retried.
func TestRetryDialFailureEveryRequest(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: every dial is refused
	var mu sync.Mutex
	dials := 0
	tr := &http.Transport{DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
		mu.Lock()
		dials++
		mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, network, a)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := client.New("http://"+addr, client.WithHTTPClient(&http.Client{Transport: tr}),
		client.WithRetries(2), client.WithBackoff(time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Nack(context.Background(), "q", "receipt", "x", 0); err == nil {
		t.Fatal("Nack to a closed port succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	if dials != 3 {
		t.Fatalf("Nack to a closed port dialled %d times, want 3 (the first try and 2 retries)", dials)
	}
}
