package worker_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/embedded"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/worker"
)

// brokerSource is a test-only worker.Source over the real broker front,
// in-process (the native source, NewSource, does the same over HTTP). It
// counts the leases the pool holds, so that tests can check bounds, and
// lets a test hold the heartbeat or set the backlog.
type brokerSource struct {
	b     *broker.Broker
	queue string

	receives   atomic.Int64 // Receive calls
	backlogs   atomic.Int64 // Backlog calls
	skipExtend atomic.Bool  // Extend answers success without extending
	// backlog, when set (>= 0), is what Backlog answers instead of the
	// queue's visible count.
	backlog atomic.Int64

	mu      sync.Mutex
	held    map[string]bool // receipts received and not settled
	maxHeld int
}

var (
	_ worker.Source     = (*brokerSource)(nil)
	_ worker.Backlogger = (*brokerSource)(nil)
)

func (s *brokerSource) Receive(ctx context.Context, req worker.ReceiveRequest) ([]*worker.Message, error) {
	s.receives.Add(1)
	lease, wait := req.Lease, req.Wait
	ds, err := s.b.Receive(ctx, model.ReceiveRequest{Queue: s.queue, MaxMessages: req.Max, Visibility: &lease, WaitTime: &wait})
	if err != nil {
		return nil, err
	}
	out := make([]*worker.Message, len(ds))
	s.mu.Lock()
	for i, d := range ds {
		out[i] = toMessage(s.queue, d)
		s.held[d.Receipt] = true
	}
	s.maxHeld = max(s.maxHeld, len(s.held))
	s.mu.Unlock()
	return out, nil
}

func toMessage(queue string, d model.Delivery) *worker.Message {
	attrs := map[string]worker.Attribute{}
	for k, a := range d.Attributes {
		attrs[k] = worker.Attribute{Type: a.DataType, Value: a.StringValue, Binary: a.BinaryValue}
	}
	return &worker.Message{
		ID: d.ID, Queue: queue, Body: []byte(d.Body), Attributes: attrs,
		ReceiveCount: d.ReceiveCount, Attempts: d.Attempts, MaxAttempts: d.MaxAttempts,
		Priority: d.Priority, GroupID: d.GroupID, SentAt: d.SentAt, FailureReason: d.FailureReason,
		CorrelationID: d.Attributes[model.MsgAttrCorrelationID].StringValue,
		TraceContext:  d.Attributes[model.MsgAttrTraceParent].StringValue,
		Receipt:       d.Receipt,
	}
}

func (s *brokerSource) Settle(ctx context.Context, m *worker.Message, o worker.Outcome) error {
	s.mu.Lock()
	delete(s.held, m.Receipt)
	s.mu.Unlock()
	var e model.LeaseEntry
	switch o.Kind {
	case worker.KindAck:
		errs, err := s.b.Delete(ctx, s.queue, []model.DeleteEntry{{Receipt: m.Receipt}})
		return leaseErr(errs, err)
	case worker.KindNack:
		e = model.LeaseEntry{Kind: model.Nack, Reason: o.Reason}
		if o.Delay > 0 {
			e.Delay = &o.Delay
		}
	case worker.KindSnooze:
		e = model.LeaseEntry{Kind: model.Snooze, Timeout: o.Delay}
	case worker.KindRelease:
		e = model.LeaseEntry{Kind: model.Snooze}
	case worker.KindDeadLetter:
		e = model.LeaseEntry{Kind: model.DeadLetterNow, Reason: o.Reason}
	default:
		return errors.New("unknown outcome")
	}
	e.Receipt = m.Receipt
	errs, err := s.b.ChangeLeases(ctx, s.queue, []model.LeaseEntry{e})
	return leaseErr(errs, err)
}

func (s *brokerSource) Extend(ctx context.Context, msgs []*worker.Message, lease time.Duration) ([]error, error) {
	if s.skipExtend.Load() {
		return make([]error, len(msgs)), nil
	}
	entries := make([]model.LeaseEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = model.LeaseEntry{ID: "e" + strconv.Itoa(i), Receipt: m.Receipt, Kind: model.ChangeTimeout, Timeout: lease}
	}
	errs, err := s.b.ChangeLeases(ctx, s.queue, entries)
	if err != nil {
		return nil, err
	}
	for i, e := range errs {
		errs[i] = lost(e)
		if errs[i] != nil {
			s.mu.Lock()
			delete(s.held, msgs[i].Receipt)
			s.mu.Unlock()
		}
	}
	return errs, nil
}

func (s *brokerSource) Backlog(ctx context.Context) (int64, error) {
	s.backlogs.Add(1)
	if n := s.backlog.Load(); n >= 0 {
		return n, nil
	}
	_, st, err := s.b.Stats(ctx, s.queue)
	return st.Visible, err
}

// maxLeases is the most leases the pool held at once.
func (s *brokerSource) maxLeases() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxHeld
}

func leaseErr(errs []error, err error) error {
	if err != nil {
		return err
	}
	return lost(errs[0])
}

// lost maps the broker's answers for an ended lease to worker.ErrLeaseLost.
func lost(err error) error {
	if errors.Is(err, model.ErrMessageNotInflight) || errors.Is(err, model.ErrInvalidParameterValue) {
		return worker.ErrLeaseLost
	}
	return err
}

// env is one test's broker: the embedded backend in a temporary directory.
type env struct {
	b *broker.Broker
}

func newEnv(t *testing.T) *env {
	t.Helper()
	backend, err := embedded.Open(embedded.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.New(backend, broker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return &env{b: b}
}

// queue creates a queue and returns a source over it.
func (e *env) queue(t *testing.T, name string, attrs map[string]string) *brokerSource {
	t.Helper()
	if _, err := e.b.CreateQueue(context.Background(), name, attrs, nil); err != nil {
		t.Fatal(err)
	}
	s := &brokerSource{b: e.b, queue: name, held: map[string]bool{}}
	s.backlog.Store(-1)
	return s
}

// withDLQ creates queue name with a dead-letter queue name+"-dlq" after
// maxReceives attempts.
func (e *env) withDLQ(t *testing.T, name string, maxReceives int) *brokerSource {
	t.Helper()
	e.queue(t, name+"-dlq", nil)
	policy := `{"deadLetterTargetArn":"` + model.ARN("us-east-1", "000000000000", name+"-dlq") + `","maxReceiveCount":` + strconv.Itoa(maxReceives) + `}`
	return e.queue(t, name, map[string]string{model.AttrRedrivePolicy: policy})
}

// send sends one message per body, with attrs.
func (e *env) send(t *testing.T, queue string, attrs map[string]string, bodies ...string) {
	t.Helper()
	for _, body := range bodies {
		a := map[string]model.MessageAttribute{}
		for k, v := range attrs {
			a[k] = model.MessageAttribute{DataType: "String", StringValue: v}
		}
		res, err := e.b.Send(context.Background(), queue, []model.SendEntry{{Body: body, Attributes: a}})
		if err == nil {
			err = res[0].Err
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func (e *env) stats(t *testing.T, queue string) model.QueueStats {
	t.Helper()
	_, st, err := e.b.Stats(context.Background(), queue)
	if err != nil {
		t.Fatal(err)
	}
	return st.QueueStats
}

// browse returns every message of queue, oldest first.
func (e *env) browse(t *testing.T, queue string) []model.BrowsedMessage {
	t.Helper()
	p, err := e.b.Browse(context.Background(), queue, model.BrowseRequest{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return p.Messages
}

// start makes a pool from cfg (Logger to the test's log unless set) and
// runs it; the test's cleanup shuts it down and checks that Run returned
// ErrPoolClosed.
func start(t *testing.T, cfg worker.Config) *worker.Pool {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testutil.Logger(t)
	}
	p, err := worker.NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- p.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-ran; !errors.Is(err, worker.ErrPoolClosed) {
			t.Errorf("Run returned %v, want ErrPoolClosed", err)
		}
	})
	return p
}

// gate blocks handlers until it is opened, and counts them.
type gate struct {
	open    chan struct{}
	once    sync.Once
	running atomic.Int64
	maxRun  atomic.Int64
	started atomic.Int64
}

func newGate() *gate { return &gate{open: make(chan struct{})} }

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

// handler runs until the gate opens (or its context ends), then acks.
func (g *gate) handler() worker.Handler {
	return worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
		g.started.Add(1)
		n := g.running.Add(1)
		defer g.running.Add(-1)
		for {
			old := g.maxRun.Load()
			if n <= old || g.maxRun.CompareAndSwap(old, n) {
				break
			}
		}
		select {
		case <-g.open:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
}
