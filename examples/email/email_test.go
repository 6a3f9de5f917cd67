package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/testbroker"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/worker"
)

// gatedMailer is a mail server that takes as long as the test wants: each
// Send announces itself on started, then waits for release before it writes
// the email to the sink.
type gatedMailer struct {
	sink    *LogMailer
	started chan string
	release chan struct{}

	mu   sync.Mutex
	sent map[string]int
}

func (m *gatedMailer) Send(ctx context.Context, to, subject, body string) error {
	select {
	case m.started <- to:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	select {
	case <-m.release:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	if err := m.sink.Send(ctx, to, subject, body); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent[to]++
	return nil
}

func (m *gatedMailer) count(to string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sent[to]
}

// The signup answers before the email is sent, and the email is sent
// exactly once. The mailer cannot finish before the test releases it, and
// the test releases it only after the HTTP answer: a handler that sent the
// email itself (or waited for the worker) would never answer.
func TestSignupAnswersBeforeTheEmailIsSent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := client.New(testbroker.Start(t, testbroker.Config{}).URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if _, err := c.CreateQueue(ctx, Queue, nil); err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(Signup{Client: c})
	t.Cleanup(web.Close)

	var out testutil.Buffer
	mailer := &gatedMailer{sink: &LogMailer{W: &out}, started: make(chan string, 1),
		release: make(chan struct{}), sent: map[string]int{}}
	cfg := worker.DefaultConfig()
	cfg.Source = worker.NewSource(c, Queue)
	cfg.Handler = SendWelcome(mailer)
	cfg.Logger = testutil.Logger(t)
	pool, err := worker.NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- pool.Run(ctx) }()
	t.Cleanup(func() {
		close(mailer.release)
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = pool.Shutdown(sctx)
		if err := <-ran; !errors.Is(err, worker.ErrPoolClosed) {
			t.Errorf("Run: %v", err)
		}
	})

	hc := &http.Client{Timeout: 10 * time.Second}
	start := time.Now()
	resp, err := hc.PostForm(web.URL, url.Values{"email": {"Ada <ada@example.com>"}})
	if err != nil {
		t.Fatalf("signup: %v (a handler that waits for the email never answers)", err)
	}
	answered := time.Since(start)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("signup answered %d, want 202", resp.StatusCode)
	}
	if n := mailer.count("ada@example.com"); n != 0 {
		t.Fatalf("%d emails sent before the answer, want 0", n)
	}

	// The worker takes the message and starts sending; the mail server is
	// slow (it waits for the gate).
	select {
	case to := <-mailer.started:
		if to != "ada@example.com" {
			t.Fatalf("sending to %q, want ada@example.com", to)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not start sending within 10 s")
	}
	mailer.release <- struct{}{}
	testutil.Eventually(t, 10*time.Second, "the email sent and acked", func() bool {
		st, err := c.Stats(ctx, Queue)
		if err != nil {
			t.Fatal(err)
		}
		return mailer.count("ada@example.com") == 1 && st.Depth == 0
	})
	sent := time.Since(start)
	t.Logf("signup answered in %v; email sent %v after the request", answered, sent)
	if answered >= sent {
		t.Fatalf("answered after %v, email sent after %v: the answer must come first", answered, sent)
	}
	if n := mailer.count("ada@example.com"); n != 1 {
		t.Fatalf("%d emails sent, want 1", n)
	}
	if got := strings.Count(out.String(), "to=ada@example.com "); got != 1 {
		t.Fatalf("the sink holds %d emails, want 1:\n%s", got, out.String())
	}
}

// Bad requests are refused with the reason, and enqueue nothing.
func TestSignupRefusesBadRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := client.New(testbroker.Start(t, testbroker.Config{}).URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if _, err := c.CreateQueue(ctx, Queue, nil); err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(Signup{Client: c})
	t.Cleanup(web.Close)

	for _, tc := range []struct {
		method, body string
		status       int
		says         string
	}{
		{"GET", "", http.StatusMethodNotAllowed, "use POST"},
		{"POST", "email=not-an-address", http.StatusBadRequest, "not an email address"},
		{"POST", "", http.StatusBadRequest, "not an email address"},
	} {
		req, _ := http.NewRequest(tc.method, web.URL, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(b.String(), tc.says) {
			t.Errorf("%s %q: %d %q, want %d saying %q", tc.method, tc.body, resp.StatusCode, b.String(), tc.status, tc.says)
		}
	}
	st, err := c.Stats(ctx, Queue)
	if err != nil {
		t.Fatal(err)
	}
	if st.Depth != 0 {
		t.Fatalf("queue depth %d after refused signups, want 0", st.Depth)
	}
}
