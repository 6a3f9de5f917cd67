package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/testbroker"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is one test's broker (internal/testbroker: embedded backend behind a
// real server on 127.0.0.1:0) and a client for it whose retry
// waits are recorded, not taken.
type env struct {
	t   *testing.T
	srv *server.Server
	URL string
	c   *client.Client
	// waits records the client's retry waits.
	waits *waits
}

// waits is an injected client sleep: it records each wait and returns at
// once (or the context's error).
type waits struct {
	mu sync.Mutex
	ds []time.Duration
}

func (w *waits) sleep(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	w.ds = append(w.ds, d)
	w.mu.Unlock()
	return ctx.Err()
}

func (w *waits) all() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.ds...)
}

// setup starts a broker and a client; mod changes the server's config
// before it starts, opts add client options.
func setup(t *testing.T, mod func(*server.Config), opts ...client.Option) *env {
	t.Helper()
	b := testbroker.Start(t, testbroker.Config{Server: mod})
	e := &env{t: t, srv: b.Server, URL: b.URL, waits: &waits{}}
	e.c = e.client(opts...)
	return e
}

// client makes another client of the broker (or of url, when given with
// WithURL), with the recorded sleep; it is closed at cleanup.
func (e *env) client(opts ...client.Option) *client.Client {
	return e.clientAt(e.URL, opts...)
}

func (e *env) clientAt(url string, opts ...client.Option) *client.Client {
	e.t.Helper()
	all := append([]client.Option{client.WithSleep(e.waits.sleep)}, opts...)
	c, err := client.New(url, all...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(c.Close)
	return c
}

// queue creates a queue with attrs.
func (e *env) queue(name string, attrs map[string]string) client.Queue {
	e.t.Helper()
	q, err := e.c.CreateQueue(context.Background(), name, attrs)
	if err != nil {
		e.t.Fatalf("CreateQueue %s: %v", name, err)
	}
	return q
}

// redriven creates queue name with a dead-letter queue name-dlq after
// maxReceive attempts.
func (e *env) redriven(name string, maxReceive int, attrs map[string]string) client.Queue {
	e.t.Helper()
	dlq := e.queue(name+"-dlq", nil)
	all := map[string]string{"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":%d}`, dlq.ARN, maxReceive)}
	for k, v := range attrs {
		all[k] = v
	}
	return e.queue(name, all)
}

// send sends bodies and answers their ids.
func (e *env) send(queue string, bodies ...string) []string {
	e.t.Helper()
	ids := make([]string, len(bodies))
	for i, b := range bodies {
		r, err := e.c.Send(context.Background(), queue, client.Message{Body: b})
		if err != nil {
			e.t.Fatalf("Send %q: %v", b, err)
		}
		ids[i] = r.ID
	}
	return ids
}

// receive receives exactly n messages (short polls until they come).
func (e *env) receive(queue string, n int, opts ...client.ReceiveOption) []client.Delivery {
	e.t.Helper()
	var got []client.Delivery
	testutil.Eventually(e.t, 10*time.Second, fmt.Sprintf("%d messages on %s", n, queue), func() bool {
		ds, err := e.c.Receive(context.Background(), queue, append([]client.ReceiveOption{client.MaxMessages(n - len(got)), client.WaitTime(0)}, opts...)...)
		if err != nil {
			e.t.Fatalf("Receive: %v", err)
		}
		got = append(got, ds...)
		return len(got) >= n
	})
	return got
}

// wantIs fails the test unless err matches target (and is an *Error).
func wantIs(t *testing.T, err, target error) *client.Error {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v: want errors.Is %v", err, target)
	}
	var ce *client.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is no *client.Error", err, err)
	}
	return ce
}
