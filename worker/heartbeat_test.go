package worker_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/worker"
)

// orderSource wraps a brokerSource and records the order of its extends and
// settles; the first extend blocks until the test unblocks it.
type orderSource struct {
	*brokerSource
	started chan struct{} // closed when the first extend began
	unblock chan struct{} // the first extend returns once closed (open)
	once    sync.Once
	opened  sync.Once

	mu     sync.Mutex
	events []string
}

func (s *orderSource) record(ev string) {
	s.mu.Lock()
	s.events = append(s.events, ev)
	s.mu.Unlock()
}

func (s *orderSource) log() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.events...)
}

func (s *orderSource) open() { s.opened.Do(func() { close(s.unblock) }) }

func (s *orderSource) Extend(ctx context.Context, msgs []*worker.Message, lease time.Duration) ([]error, error) {
	first := false
	s.once.Do(func() { first = true })
	if first {
		close(s.started)
		<-s.unblock
	}
	errs, err := s.brokerSource.Extend(context.WithoutCancel(ctx), msgs, lease)
	s.record("extend")
	return errs, err
}

func (s *orderSource) Settle(ctx context.Context, m *worker.Message, o worker.Outcome) error {
	err := s.brokerSource.Settle(ctx, m, o)
	s.record("settle " + o.Kind.String())
	return err
}

// A handler that returns while the heartbeat extends its lease is settled
// only after that extend returned: a late extend never follows the ack,
// and its answer is not taken for a lost lease.
func TestHeartbeatStopsBeforeOutcome(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := &orderSource{brokerSource: e.queue(t, "q", nil), started: make(chan struct{}), unblock: make(chan struct{})}
	e.send(t, "q", nil, "m")
	returned := make(chan struct{})
	h := worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
		<-src.started // the heartbeat's extend is in flight
		close(returned)
		return nil
	})
	cfg := config(src, h)
	cfg.Concurrency = 1
	cfg.Lease, cfg.HeartbeatInterval = 10*time.Second, 20*time.Millisecond
	var buf testutil.Buffer
	cfg.Logger = testLogger(t, &buf)
	p := start(t, cfg)
	t.Cleanup(src.open) // runs before the pool's shutdown, even on a failure
	<-returned
	// While the extend is held, the outcome must wait (a short watch for
	// something that must not happen).
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if ev := src.log(); len(ev) > 0 {
			t.Fatalf("events %q while the extend is in flight: the outcome was sent before the heartbeat stopped", ev)
		}
	}
	src.open()
	testutil.Eventually(t, wait, "handled", func() bool { return p.Stats().Handled == 1 })
	testutil.Eventually(t, wait, "settled", func() bool {
		for _, ev := range src.log() {
			if strings.HasPrefix(ev, "settle") {
				return true
			}
		}
		return false
	})
	ev := src.log()
	if len(ev) < 2 || ev[0] != "extend" || ev[1] != "settle ack" {
		t.Fatalf("events %q, want the extend, then the ack", ev)
	}
	for _, later := range ev[2:] {
		if later == "extend" {
			t.Fatalf("events %q: an extend followed the ack", ev)
		}
	}
	if strings.Contains(buf.String(), "lease was lost") {
		t.Fatalf("a lost lease was reported:\n%s", buf.String())
	}
	if st := e.stats(t, "q"); st.Depth() != 0 {
		t.Fatalf("stats %+v, want the message acked", st)
	}
}
