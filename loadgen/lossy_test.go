package loadgen

import (
	"context"
	"sync"
	"testing"
	"time"
)

// lossyQueue is an in-memory queue that drops every tenth message it
// accepts: a broker that loses messages, which no real one here does on
// demand. It checks that lost messages are counted and that drain ends.
type lossyQueue struct {
	mu   sync.Mutex
	n    int
	msgs []string
	ch   chan struct{}
}

func (q *lossyQueue) Describe() string                                   { return "lossy in-memory queue" }
func (q *lossyQueue) Setup(context.Context) error                        { q.ch = make(chan struct{}, 1); return nil }
func (q *lossyQueue) Close() error                                       { return nil }
func (q *lossyQueue) NewProducer(context.Context, int) (Producer, error) { return lossyConn{q}, nil }
func (q *lossyQueue) NewConsumer(context.Context, int) (Consumer, error) { return lossyConn{q}, nil }

type lossyConn struct{ q *lossyQueue }

func (c lossyConn) Close() error { return nil }

func (c lossyConn) Send(_ context.Context, bodies [][]byte) ([]bool, error) {
	c.q.mu.Lock()
	defer c.q.mu.Unlock()
	for _, b := range bodies {
		c.q.n++
		if c.q.n%10 != 0 {
			c.q.msgs = append(c.q.msgs, string(b))
		}
	}
	return okAll(len(bodies)), nil
}

func (c lossyConn) Receive(ctx context.Context, max int, wait time.Duration) ([]Received, error) {
	c.q.mu.Lock()
	defer c.q.mu.Unlock()
	n := min(max, len(c.q.msgs))
	out := make([]Received, n)
	for i := range out {
		out[i] = Received{Body: c.q.msgs[i]}
	}
	c.q.msgs = c.q.msgs[n:]
	return out, nil
}

func (c lossyConn) Delete(context.Context, []Received) error { return nil }

func TestDrainCountsLostMessages(t *testing.T) {
	cfg := quick(ModeDrain)
	cfg.Messages, cfg.Batch, cfg.TailTimeout = 1000, 1, 300*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Run(ctx, &lossyQueue{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s.Missing != 100 || !s.TailTimedOut || s.Duplicates != 0 || s.Deleted != 900 {
		t.Errorf("missing %d (want 100), tail timed out %v, duplicates %d, deleted %d", s.Missing, s.TailTimedOut, s.Duplicates, s.Deleted)
	}
}
