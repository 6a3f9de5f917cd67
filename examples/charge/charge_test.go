package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/testbroker"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/worker"
	"github.com/sluicemq/sluice/worker/idempotency"
)

// loseFirstAnswer is a proxy in front of the broker that loses the answer
// to the first send it forwards: the broker stores the message, and the
// producer gets a 502 instead of the answer, as from a load balancer whose
// upstream timed out. Every other request passes.
type loseFirstAnswer struct {
	broker string
	lost   atomic.Bool
	sends  atomic.Int64
}

func (p *loseFirstAnswer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.broker+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/messages") {
		p.sends.Add(1)
		if p.lost.CompareAndSwap(false, true) {
			http.Error(w, "upstream timed out", http.StatusBadGateway) // the broker stored it
			return
		}
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

// The producer's half: the answer to the first send of the charge is lost
// after the broker stored it, and the client sends it again (a send whose
// messages carry a DedupID is safe to repeat). The queue holds one message,
// and both sends are answered with its id. The same lost answer without a
// DedupID, sent again by the producer, stores the charge twice: the $200
// the key prevents.
func TestChargeSentTwiceIsStoredOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := testbroker.Start(t, testbroker.Config{})
	direct, err := client.New(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(direct.Close)
	for _, q := range []string{Queue, "charges-without-keys"} {
		if _, err := direct.CreateQueue(ctx, q, nil); err != nil {
			t.Fatal(err)
		}
	}
	charge := Charge{PaymentID: "pay-1001", Customer: "ada", Cents: 10000}

	proxy := &loseFirstAnswer{broker: b.URL}
	ps := httptest.NewServer(proxy)
	t.Cleanup(ps.Close)
	c, err := client.New(ps.URL, client.WithBackoff(time.Millisecond, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	id, err := Enqueue(ctx, c, charge)
	if err != nil {
		t.Fatalf("Enqueue through a lost answer: %v (a send with a DedupID is retried)", err)
	}
	if n := proxy.sends.Load(); n != 2 {
		t.Fatalf("%d sends reached the broker, want 2 (the lost one and the retry)", n)
	}
	// The producer's own retry (say, after a restart) is answered the same.
	again, err := Enqueue(ctx, direct, charge)
	if err != nil || again != id {
		t.Fatalf("Enqueue again: %s, %v; want the first message id %s", again, err, id)
	}
	st, err := direct.Stats(ctx, Queue)
	if err != nil || st.Depth != 1 {
		t.Fatalf("the queue holds %d messages (%v), want the one charge", st.Depth, err)
	}
	ms, err := direct.Receive(ctx, Queue, client.MaxMessages(10))
	if err != nil || len(ms) != 1 || ms[0].ID != id || ms[0].DedupID != "charge/pay-1001" {
		t.Fatalf("received %+v, %v; want the one message %s", ms, err, id)
	}

	// Without a key: the client does not repeat a send it cannot tell was
	// stored (a 502 may come after the broker stored it), and a producer
	// that sends it again stores a second charge.
	proxy.lost.Store(false)
	plain := client.Message{Body: `{"paymentId":"pay-1002","customer":"bob","cents":10000}`}
	if _, err := c.Send(ctx, "charges-without-keys", plain); err == nil {
		t.Fatal("a send without a DedupID was retried after an ambiguous 502")
	}
	if _, err := c.Send(ctx, "charges-without-keys", plain); err != nil {
		t.Fatal(err)
	}
	if st, err := direct.Stats(ctx, "charges-without-keys"); err != nil || st.Depth != 2 {
		t.Fatalf("without a key the queue holds %d messages (%v); want the 2 copies that charge $200", st.Depth, err)
	}
}

// crashBeforeAck makes the first message a worker handles fail after its
// handler succeeded: the charge was made, the ack never sent, as when the
// worker dies between the two. The queue delivers the message again.
func crashBeforeAck(crashed *atomic.Int64) worker.Middleware {
	var once sync.Once
	return func(next worker.Handler) worker.Handler {
		return worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
			if err := next.HandleMessage(ctx, m); err != nil {
				return err
			}
			crash := false
			once.Do(func() { crash = true })
			if crash {
				crashed.Add(1)
				return errors.New("the worker died before its ack")
			}
			return nil
		})
	}
}

// The consumer's half: the worker charges, then dies before its ack; the
// message comes back, and the recorded payment id makes the worker ack it
// without charging again. Ada is charged $100, once.
func TestChargeRedeliveredIsChargedOnce(t *testing.T) {
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
	if _, err := Enqueue(ctx, c, Charge{PaymentID: "pay-1001", Customer: "ada", Cents: 10000}); err != nil {
		t.Fatal(err)
	}
	ledger := NewLedger()
	var crashed, handled atomic.Int64
	count := func(next worker.Handler) worker.Handler {
		return worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
			handled.Add(1)
			return next.HandleMessage(ctx, m)
		})
	}
	cfg := worker.DefaultConfig()
	cfg.Source = worker.NewSource(c, Queue)
	cfg.Handler = worker.Chain(Handler(ledger, idempotency.NewMemoryStore()), count, crashBeforeAck(&crashed))
	cfg.Logger = testutil.Logger(t)
	pool, err := worker.NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- pool.Run(ctx) }()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = pool.Shutdown(sctx)
		if err := <-ran; !errors.Is(err, worker.ErrPoolClosed) {
			t.Errorf("Run: %v", err)
		}
	})
	testutil.Eventually(t, 10*time.Second, "the charge made, delivered again and acked", func() bool {
		st, err := c.Stats(ctx, Queue)
		if err != nil {
			t.Fatal(err)
		}
		return st.Depth == 0 && handled.Load() >= 2
	})
	if got := ledger.Charges("ada"); len(got) != 1 || got[0] != 10000 {
		t.Fatalf("ada was charged %v, want $100 once", got)
	}
	if crashed.Load() != 1 || handled.Load() != 2 {
		t.Fatalf("%d crashes, %d deliveries; want the crash and one redelivery", crashed.Load(), handled.Load())
	}
	if dollars(10000) != "$100.00" {
		t.Fatalf("dollars(10000) = %s", dollars(10000))
	}
}
