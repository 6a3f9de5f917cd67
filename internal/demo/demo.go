// Package demo is the scenario of `sluice demo`: a broker in-process on a
// temporary embedded store with the dashboard on, and traffic that shows
// the producer-consumer pattern at work, each part on its own queue:
//
//   - orders: a producer sends orders; two worker pools (the worker
//     library, as two services would run it) compete for them. Now and then
//     a poison pill arrives: its handler panics at every attempt, and after
//     maxReceiveCount (3) attempts the message lands in orders-dlq with the
//     panic as its failure reason.
//   - reports: a consumer without heartbeats (a plain receive loop, as a
//     legacy service would be) takes a slow report whose work outlives its
//     2 s visibility timeout: the message is delivered again while the
//     first worker still runs (the first worker's late ack is a stale
//     receipt's, without effect).
//   - payments: a RetryPolicy backs off (1 s, 2 s, 4 s, no jitter) while
//     the payment service is "unavailable" for each payment's first two
//     attempts; the third succeeds.
//   - thumbnails: MaxDepth 50 and a slow worker; every burst sends 120
//     messages at once, and the sends past the depth are refused
//     (queue_full, 429) and counted.
//
// Start starts it all and returns; Stop stops it in order (traffic,
// workers, server, store) and removes the temporary store. Report counts
// what happened, for the narration and for tests.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/embedded"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/live"
	"github.com/sluicemq/sluice/metrics"
	"github.com/sluicemq/sluice/server"
	"github.com/sluicemq/sluice/worker"
)

// Config configures a demo.
type Config struct {
	// Addr is the address the broker listens on. Default "127.0.0.1:9324";
	// port 0 picks a free one.
	Addr string
	// Logger receives the broker's and the workers' logs. Nil discards.
	Logger *slog.Logger
	// Out receives the narration: what each scenario just did. Nil
	// discards.
	Out io.Writer
	// Hello, when set, is called with Out and the broker's URL once the
	// broker serves and before any traffic, to print the greeting first.
	Hello func(out io.Writer, url string)
	// Interval is the dashboard's sampling interval (live.Config.Interval).
	// Default 1 s.
	Interval time.Duration
}

// The demo's queues.
const (
	QueueOrders     = "orders"
	QueueOrdersDLQ  = "orders-dlq"
	QueueReports    = "reports"
	QueuePayments   = "payments"
	QueueThumbnails = "thumbnails"
)

// Timings of the scenarios.
const (
	orderEvery      = 100 * time.Millisecond // the order producer's pace
	poisonEvery     = PoisonEvery            // a poison pill (the first at once)
	reportEvery     = 12 * time.Second       // a slow report (the first at once)
	reportLease     = 2 * time.Second        // the reports queue's visibility timeout
	reportWork      = 3 * time.Second        // the slow report's work: past its lease
	paymentEvery    = 700 * time.Millisecond // a payment
	paymentFailures = 2                      // failed attempts before a payment succeeds
	burstEvery      = BurstEvery             // a thumbnail burst (the first at once)
	burstSize       = 120                    // messages per burst
	thumbnailsDepth = 50                     // the thumbnails queue's MaxDepth
)

// PoisonEvery and BurstEvery are the periods of the poison pill and of
// the thumbnail burst (each happens once at the start too).
const (
	PoisonEvery = 15 * time.Second
	BurstEvery  = 20 * time.Second
)

// Report counts what the scenarios did so far.
type Report struct {
	// OrdersSent and OrdersHandled: orders sent, and acked by either pool.
	OrdersSent, OrdersHandled int64
	// PoisonPills sent, and their panicking attempts.
	PoisonPills, PoisonAttempts int64
	// Redeliveries: slow reports delivered again after their lease ended.
	Redeliveries int64
	// Retries: payment attempts after a failed one; MinRetryGap is the
	// shortest time seen between a failed attempt and the next (the
	// backoff), 0 before the first retry.
	Retries     int64
	MinRetryGap time.Duration
	// Refused: thumbnail sends refused by MaxDepth.
	Refused int64
}

// Demo is a running demo.
type Demo struct {
	// URL is the broker's base URL; the dashboard is at URL + "/ui/".
	URL string

	cfg    Config
	log    *slog.Logger
	out    io.Writer
	dir    string
	front  *broker.Broker
	srv    *server.Server
	client *client.Client
	// burst is a client that does not retry a refused send.
	burst *client.Client
	pools []*worker.Pool
	stop  context.CancelFunc
	wg    sync.WaitGroup

	ordersSent, ordersHandled   atomic.Int64
	poisonPills, poisonAttempts atomic.Int64
	redeliveries                atomic.Int64
	retries, refused            atomic.Int64
	mu                          sync.Mutex
	minRetryGap                 time.Duration
	lastFailure                 map[string]time.Time // payment id -> its last failed attempt's end
	outMu                       sync.Mutex
	stopOnce                    sync.Once
	stopErr                     error
}

// Start starts the broker and the scenarios. The demo runs until Stop.
func Start(ctx context.Context, cfg Config) (*Demo, error) {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:9324"
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	out := cfg.Out
	if out == nil {
		out = io.Discard
	}
	dir, err := os.MkdirTemp("", "sluice-demo-")
	if err != nil {
		return nil, fmt.Errorf("demo: create a temporary data directory: %w", err)
	}
	d := &Demo{cfg: cfg, log: log, out: out, dir: dir, lastFailure: map[string]time.Time{}}
	if err := d.startBroker(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := d.createQueues(ctx); err != nil {
		d.stopBroker()
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d.stop = cancel
	if err := d.startWorkers(runCtx); err != nil {
		cancel()
		d.stopBroker()
		return nil, err
	}
	if cfg.Hello != nil {
		cfg.Hello(out, d.URL)
	}
	d.startProducers(runCtx)
	return d, nil
}

func (d *Demo) startBroker(ctx context.Context) error {
	lcfg := live.DefaultConfig()
	if d.cfg.Interval > 0 {
		lcfg.Interval = d.cfg.Interval
	}
	lcfg.Logger = d.log
	lv, err := live.New(lcfg)
	if err != nil {
		return fmt.Errorf("demo: start the live statistics: %w", err)
	}
	m := metrics.New()
	obs := model.Observers(m, lv)
	backend, err := embedded.Open(embedded.Config{Dir: d.dir, Options: storage.Options{Logger: d.log, Observer: obs}})
	if err != nil {
		return fmt.Errorf("demo: open the store in %s: %w", d.dir, err)
	}
	front, err := broker.New(backend, broker.Config{Logger: d.log, Observer: obs})
	if err != nil {
		_ = backend.Close()
		return fmt.Errorf("demo: start the broker: %w", err)
	}
	m.Attach(front)
	scfg := server.DefaultConfig()
	scfg.Addr, scfg.Logger, scfg.Metrics, scfg.Live, scfg.Dashboard = d.cfg.Addr, d.log, m, lv, true
	srv, err := server.New(scfg, front)
	if err == nil {
		err = srv.Start(ctx)
	}
	if err != nil {
		_ = front.Close()
		return fmt.Errorf("demo: start the server: %w", err)
	}
	d.front, d.srv = front, srv
	d.URL = "http://" + srv.Addr().String()
	if d.client, err = client.New(d.URL); err == nil {
		d.burst, err = client.New(d.URL, client.WithRetries(0))
	}
	if err != nil {
		d.stopBroker()
		return fmt.Errorf("demo: connect a client: %w", err)
	}
	return nil
}

// createQueues creates the scenario's queues.
func (d *Demo) createQueues(ctx context.Context) error {
	redrive := func(dlq string, max int) string {
		return fmt.Sprintf(`{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:%s","maxReceiveCount":"%d"}`, dlq, max)
	}
	queues := []struct {
		name  string
		attrs map[string]string
	}{
		{QueueOrdersDLQ, nil},
		{QueueOrders, map[string]string{"RedrivePolicy": redrive(QueueOrdersDLQ, 3)}},
		{QueueReports, map[string]string{"VisibilityTimeout": fmt.Sprint(int(reportLease / time.Second))}},
		{"payments-dlq", nil},
		{QueuePayments, map[string]string{
			"RetryPolicy":   `{"baseSeconds":1,"maxSeconds":8,"jitter":"none"}`,
			"RedrivePolicy": redrive("payments-dlq", 5),
		}},
		{QueueThumbnails, map[string]string{"MaxDepth": fmt.Sprint(thumbnailsDepth)}},
	}
	for _, q := range queues {
		if _, err := d.client.CreateQueue(ctx, q.name, q.attrs); err != nil {
			return fmt.Errorf("demo: create queue %s: %w", q.name, err)
		}
	}
	return nil
}

// startWorkers starts the worker pools and the reports consumer.
func (d *Demo) startWorkers(ctx context.Context) error {
	// The pools log a panic's stack at error level: the narration tells of
	// the poison pill instead, unless the logger is at debug.
	wlog := slog.New(slog.DiscardHandler)
	if d.log.Enabled(ctx, slog.LevelDebug) {
		wlog = d.log
	}
	pool := func(queue string, concurrency int, h worker.HandlerFunc) error {
		p, err := worker.NewPool(worker.Config{
			Source:      worker.NewSource(d.client, queue),
			Handler:     h,
			Concurrency: concurrency,
			WaitTime:    time.Second,
			Logger:      wlog,
		})
		if err != nil {
			return fmt.Errorf("demo: worker pool for %s: %w", queue, err)
		}
		d.pools = append(d.pools, p)
		d.wg.Go(func() { _ = p.Run(ctx) })
		return nil
	}
	// Two pools compete for orders, as two instances of a service would.
	for range 2 {
		if err := pool(QueueOrders, 3, d.handleOrder); err != nil {
			return err
		}
	}
	if err := pool(QueuePayments, 4, d.handlePayment); err != nil {
		return err
	}
	if err := pool(QueueThumbnails, 1, func(ctx context.Context, m *worker.Message) error {
		return sleep(ctx, 150*time.Millisecond)
	}); err != nil {
		return err
	}
	// The reports consumer: two goroutines of a plain receive loop with no
	// heartbeat, so that a slow report outlives its lease.
	for range 2 {
		d.wg.Go(func() { d.reportsConsumer(ctx) })
	}
	return nil
}

func (d *Demo) handleOrder(ctx context.Context, m *worker.Message) error {
	if strings.HasPrefix(string(m.Body), "poison") {
		d.poisonAttempts.Add(1)
		d.say("orders: the poison pill %s made its handler panic (attempt %d of 3)", short(m.ID), m.Attempts)
		panic("cannot parse order: unexpected token in " + string(m.Body))
	}
	if err := sleep(ctx, 50*time.Millisecond); err != nil {
		return err
	}
	d.ordersHandled.Add(1)
	return nil
}

func (d *Demo) handlePayment(ctx context.Context, m *worker.Message) error {
	now := time.Now()
	d.mu.Lock()
	if last, ok := d.lastFailure[m.ID]; ok {
		gap := now.Sub(last)
		if d.minRetryGap == 0 || gap < d.minRetryGap {
			d.minRetryGap = gap
		}
		d.retries.Add(1)
	}
	d.mu.Unlock()
	if m.Attempts <= paymentFailures {
		d.mu.Lock()
		d.lastFailure[m.ID] = time.Now()
		d.mu.Unlock()
		return errors.New("payment service unavailable (HTTP 503)")
	}
	d.mu.Lock()
	delete(d.lastFailure, m.ID)
	d.mu.Unlock()
	return nil
}

// reportsConsumer receives reports one at a time and never extends a
// lease. A slow report takes reportWork, past its lease.
func (d *Demo) reportsConsumer(ctx context.Context) {
	for ctx.Err() == nil {
		ds, err := d.client.Receive(ctx, QueueReports, client.MaxMessages(1), client.WaitTime(time.Second))
		if err != nil || len(ds) == 0 {
			if err != nil && ctx.Err() == nil {
				_ = sleep(ctx, 200*time.Millisecond)
			}
			continue
		}
		m := ds[0]
		work := 100 * time.Millisecond
		if m.Body == "slow report" && m.ReceiveCount == 1 {
			work = reportWork
			d.say("reports: a slow report (%s) started: its work takes %v, its lease %v", short(m.ID), reportWork, reportLease)
		}
		if m.ReceiveCount > 1 {
			d.redeliveries.Add(1)
			d.say("reports: %s delivered again (receive count %d): its lease ended while the first worker still ran", short(m.ID), m.ReceiveCount)
		}
		if sleep(ctx, work) != nil {
			return
		}
		// The slow report's ack comes after its lease ended: a stale
		// receipt, which the broker accepts without effect (the message is
		// the second delivery's now).
		_ = d.client.Ack(ctx, QueueReports, m.Receipt)
	}
}

// startProducers starts the producers.
func (d *Demo) startProducers(ctx context.Context) {
	every := func(period time.Duration, first bool, fn func(context.Context)) {
		d.wg.Go(func() {
			if first {
				fn(ctx)
			}
			t := time.NewTicker(period)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					fn(ctx)
				}
			}
		})
	}
	n := 0
	every(orderEvery, false, func(ctx context.Context) {
		n++
		if _, err := d.client.Send(ctx, QueueOrders, client.Message{Body: fmt.Sprintf(`{"order":%d}`, n)}); err == nil {
			d.ordersSent.Add(1)
		}
	})
	every(poisonEvery, true, func(ctx context.Context) {
		if _, err := d.client.Send(ctx, QueueOrders, client.Message{Body: "poison pill {order: ???"}); err == nil {
			d.poisonPills.Add(1)
			d.say("orders: sent a poison pill: watch orders-dlq once its 3 attempts have failed")
		}
	})
	every(reportEvery, true, func(ctx context.Context) {
		if _, err := d.client.Send(ctx, QueueReports, client.Message{Body: "slow report"}); err == nil {
			d.say("reports: sent a slow report")
		}
	})
	p := 0
	every(paymentEvery, true, func(ctx context.Context) {
		p++
		_, _ = d.client.Send(ctx, QueuePayments, client.Message{Body: fmt.Sprintf(`{"payment":%d}`, p)})
	})
	every(burstEvery, true, func(ctx context.Context) { d.sendBurst(ctx) })
}

// sendBurst sends burstSize thumbnails in batches of 10, without retrying
// refusals.
func (d *Demo) sendBurst(ctx context.Context) {
	var refused int64
	for i := 0; i < burstSize; i += 10 {
		batch := make([]client.Message, 10)
		for j := range batch {
			batch[j] = client.Message{Body: fmt.Sprintf("thumbnail %d", i+j)}
		}
		res, err := d.burst.SendBatch(ctx, QueueThumbnails, batch)
		if err != nil {
			if errors.Is(err, client.ErrQueueFull) {
				refused += int64(len(batch))
			}
			continue
		}
		for _, r := range res {
			if r.Err != nil && errors.Is(r.Err, client.ErrQueueFull) {
				refused++
			}
		}
	}
	d.refused.Add(refused)
	d.say("thumbnails: a burst of %d sends hit MaxDepth %d: %d refused (queue_full)", burstSize, thumbnailsDepth, refused)
}

// Report returns what happened so far.
func (d *Demo) Report() Report {
	d.mu.Lock()
	gap := d.minRetryGap
	d.mu.Unlock()
	return Report{
		OrdersSent: d.ordersSent.Load(), OrdersHandled: d.ordersHandled.Load(),
		PoisonPills: d.poisonPills.Load(), PoisonAttempts: d.poisonAttempts.Load(),
		Redeliveries: d.redeliveries.Load(),
		Retries:      d.retries.Load(), MinRetryGap: gap, Refused: d.refused.Load(),
	}
}

// Client is a native API client of the demo's broker.
func (d *Demo) Client() *client.Client { return d.client }

// Stop stops the producers and consumers, then the server and the store,
// and removes the temporary store. ctx bounds the wait for the workers and
// the server. Idempotent.
func (d *Demo) Stop(ctx context.Context) error {
	d.stopOnce.Do(func() {
		d.stop()
		for _, p := range d.pools {
			_ = p.Shutdown(ctx)
		}
		d.wg.Wait()
		d.stopErr = d.stopBroker()
	})
	return d.stopErr
}

func (d *Demo) stopBroker() error {
	var err error
	if d.srv != nil {
		// A connection the workers' clients opened as they were stopped
		// can hold the server's shutdown until the deadline, which then
		// closes it: harmless here, so only logged.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if serr := d.srv.Stop(ctx); serr != nil {
			d.log.Warn("demo: connections still open at the shutdown deadline were closed", "err", serr)
		}
		cancel()
	}
	if d.client != nil {
		d.client.Close()
		d.burst.Close()
	}
	if d.front != nil {
		err = errors.Join(err, d.front.Close())
	}
	return errors.Join(err, os.RemoveAll(d.dir))
}

// say writes one line of narration.
func (d *Demo) say(format string, args ...any) {
	d.outMu.Lock()
	defer d.outMu.Unlock()
	fmt.Fprintf(d.out, time.Now().Format("15:04:05")+"  "+format+"\n", args...)
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
