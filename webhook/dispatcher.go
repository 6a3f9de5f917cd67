// Package webhook delivers dead-letter webhooks: when a message of a queue
// whose DeadLetterWebhook attribute is set moves to its dead-letter queue,
// the URL is called with the event, signed, at least once.
//
// The events wait in a durable outbox: an internal queue that no client can
// name, which the front hands the dispatcher a handle on
// (broker.Broker.WebhookOutbox). The backends write an event into it in the
// same atomic step as the move (the rule: broker/internal/plan/webhook.go), so
// an event exists if and only if its move happened, and survives restarts.
// A Dispatcher drains the outbox:
//
//  1. it long-polls the outbox; once an event arrives it gathers more for
//     up to Config.Window (1 s), or until it has Config.MaxBatch (100), so
//     a burst of dead letters costs few calls;
//  2. it groups the events by the current DeadLetterWebhook URL of their
//     source queue (an event whose source queue is gone, has no webhook any
//     more, or whose URL's host the operator no longer allows is dropped,
//     with a log line);
//  3. it POSTs each group as one JSON payload, {"events":[...]}, signed
//     with an HMAC (SignatureHeader), with a timeout, following no
//     redirect, the groups concurrently;
//  4. a 2xx answer deletes the group's events; anything else (an error, a
//     timeout, a 3xx, 4xx or 5xx) nacks them: the outbox's RetryPolicy
//     backs each one off (2 s doubling to 5 minutes, full jitter) before
//     it is delivered again. An event is kept for 14 days at most.
//
// Delivery is at least once: a call whose answer is lost, a broker that
// stops between the call and the delete, and, on PostgreSQL, several
// brokers each running a dispatcher over the one shared outbox, can all
// deliver an event twice. A receiver deduplicates by the event's messageId
// and at. Events are not ordered.
//
// Only hosts the operator allows are ever called (Config.AllowedHosts, the
// --webhook-allow-host flag): the front refuses a URL of another host when
// it is set (broker.Config.WebhookHosts, which a *HostList implements), and
// the dispatcher checks again before each call.
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	neturl "net/url"
	"sync"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
)

// Payload is the body of a webhook call.
type Payload struct {
	Events []model.DeadLetterEvent `json:"events"`
}

// errorPause is how long the dispatcher waits after a failed receive before
// it tries again.
const errorPause = time.Second

// Dispatcher drains the webhook outbox of one broker (see the package
// comment). Start starts its goroutine, Stop ends it; stop it before the
// broker closes its backend.
type Dispatcher struct {
	cfg    Config
	b      *broker.Broker
	outbox broker.WebhookOutbox
	hosts  *HostList
	client *http.Client
	secret []byte
	log    *slog.Logger

	// mu guards the lifecycle fields.
	mu      sync.Mutex
	started bool
	stopped bool
	cancel  context.CancelFunc
	done    chan struct{} // closed when the loop returns
}

// New returns a dispatcher of the broker b's dead-letter events. It
// validates cfg (zero fields take their defaults); it does not start.
func New(cfg Config, b *broker.Broker) (*Dispatcher, error) {
	if b == nil {
		return nil, errors.New("webhook: broker is nil")
	}
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	hosts, _ := ParseHosts(cfg.AllowedHosts...) // Validate parsed them
	client := &http.Client{}
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient
		client = &c
	}
	// Never follow a redirect: the Location could name any host.
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Dispatcher{cfg: cfg, b: b, outbox: b.WebhookOutbox(), hosts: hosts, client: client,
		secret: []byte(cfg.Secret), log: cfg.Logger, done: make(chan struct{})}, nil
}

// Start creates the outbox queue if it does not exist and starts the
// dispatcher's goroutine. Starting a started dispatcher does nothing;
// starting a stopped one is an error.
func (d *Dispatcher) Start(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return errors.New("webhook: Start after Stop")
	}
	if d.started {
		return nil
	}
	if err := d.createOutbox(ctx); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	d.cancel, d.started = cancel, true
	go func() {
		defer close(d.done)
		d.run(runCtx)
	}()
	d.log.Info("dead-letter webhooks on", "allowed_hosts", d.hosts.Len())
	return nil
}

// Stop ends the goroutine: a receive waiting on the outbox ends at once,
// calls in progress are cut (their events are nacked: delivered again
// later). It waits for the goroutine until ctx is done and returns ctx's
// error then. Idempotent, and safe on a dispatcher never started.
func (d *Dispatcher) Stop(ctx context.Context) error {
	d.mu.Lock()
	d.stopped = true
	started, cancel := d.started, d.cancel
	d.mu.Unlock()
	if !started {
		return nil
	}
	cancel()
	select {
	case <-d.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *Dispatcher) createOutbox(ctx context.Context) error {
	if err := d.outbox.Create(ctx); err != nil {
		return fmt.Errorf("webhook: create the outbox queue: %w", err)
	}
	return nil
}

// run is the dispatcher's loop: gather a batch, deliver it, again, until
// ctx is cancelled. It owns everything it touches but the lifecycle fields.
func (d *Dispatcher) run(ctx context.Context) {
	for ctx.Err() == nil {
		batch, err := d.gather(ctx)
		if len(batch) > 0 {
			d.deliver(ctx, batch)
		}
		if err == nil || ctx.Err() != nil {
			continue
		}
		if errors.Is(err, model.ErrQueueDoesNotExist) {
			// The outbox is gone (a store restored from before it
			// existed): make it again.
			if err := d.createOutbox(ctx); err == nil {
				continue
			}
		}
		d.log.Error("dead-letter webhooks: receive from the outbox failed", "err", err)
		t := d.cfg.Clock.NewTimer(errorPause)
		select {
		case <-t.C():
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// lease is how long a gathered event stays leased: the gathering, the
// call, and a margin. An event whose delivery outlasts it is received
// again (a duplicate, never a loss).
func (d *Dispatcher) lease() time.Duration {
	return d.cfg.Window + d.cfg.Timeout + 30*time.Second
}

// gather long-polls the outbox for a first event, then gathers more until
// Window has passed since it or MaxBatch are in hand.
func (d *Dispatcher) gather(ctx context.Context) ([]model.Delivery, error) {
	vis := d.lease()
	receive := func(wait time.Duration, max int) ([]model.Delivery, error) {
		return d.outbox.Receive(ctx, min(max, model.MaxReceiveMessages), vis, wait)
	}
	batch, err := receive(model.MaxWaitTime, d.cfg.MaxBatch)
	if err != nil || len(batch) == 0 {
		return batch, err
	}
	end := d.cfg.Clock.Now().Add(d.cfg.Window)
	for len(batch) < d.cfg.MaxBatch {
		left := end.Sub(d.cfg.Clock.Now())
		if left <= 0 {
			break
		}
		more, err := receive(min(left, model.MaxWaitTime), d.cfg.MaxBatch-len(batch))
		batch = append(batch, more...)
		if err != nil {
			return batch, err
		}
	}
	return batch, nil
}

// pending is one gathered event.
type pending struct {
	ev      model.DeadLetterEvent
	receipt string // its receipt handle
}

// deliver groups a batch by URL and calls each URL once, concurrently;
// then it deletes the delivered and dropped events and nacks the others.
func (d *Dispatcher) deliver(ctx context.Context, batch []model.Delivery) {
	groups := map[string][]pending{}
	var drop []string
	urls := map[string]string{} // source queue -> its webhook ("" = none)
	for _, m := range batch {
		r := m.Receipt
		if err := d.outbox.CheckReceipt(r); err != nil {
			d.log.Error("dead-letter webhooks: an outbox receipt does not decode", "message_id", m.ID, "err", err)
			continue
		}
		ev, err := model.ParseDeadLetterEvent(m.Body)
		if err != nil {
			d.log.Error("dead-letter webhooks: dropped an event that does not decode", "message_id", m.ID, "err", err)
			drop = append(drop, r)
			continue
		}
		url, ok := urls[ev.Queue]
		if !ok {
			q, err := d.b.GetQueue(ctx, ev.Queue)
			switch {
			case errors.Is(err, model.ErrQueueDoesNotExist):
				url = ""
			case err != nil:
				// Cannot tell now: leave the event leased; it comes back
				// when its lease ends.
				d.log.Warn("dead-letter webhooks: read the source queue", "queue", ev.Queue, "err", err)
				continue
			default:
				url = q.Config.DeadLetterWebhook
			}
			urls[ev.Queue] = url
			switch {
			case url == "":
				d.log.Info("dead-letter webhooks: dropped the events of a queue that is gone or has no webhook any more", "queue", ev.Queue)
			case d.hosts.AllowedURL(url) != nil:
				d.log.Error("dead-letter webhooks: dropped the events of a webhook whose host is not allowed",
					"queue", ev.Queue, "err", d.hosts.AllowedURL(url))
			}
		}
		if url == "" || d.hosts.AllowedURL(url) != nil {
			drop = append(drop, r)
			continue
		}
		groups[url] = append(groups[url], pending{ev, r})
	}

	var mu sync.Mutex
	done, failed := drop, []string(nil)
	var wg sync.WaitGroup
	for url, ps := range groups {
		wg.Go(func() {
			ok := d.call(ctx, url, ps)
			mu.Lock()
			defer mu.Unlock()
			for _, p := range ps {
				if ok {
					done = append(done, p.receipt)
				} else {
					failed = append(failed, p.receipt)
				}
			}
		})
	}
	wg.Wait()
	d.settle(done, failed)
}

// settle deletes the events in done and nacks those in failed, in batches.
// It runs even when the dispatcher is stopping (the calls were made; what
// they did must be recorded), bounded by its own timeout.
func (d *Dispatcher) settle(done, failed []string) {
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.Timeout)
	defer cancel()
	for len(done) > 0 {
		n := min(len(done), model.MaxBatchEntries)
		if err := d.outbox.Delete(ctx, done[:n]); err != nil {
			d.log.Warn("dead-letter webhooks: delete delivered events (they will be delivered again)", "err", err)
		}
		done = done[n:]
	}
	for len(failed) > 0 {
		n := min(len(failed), model.MaxBatchEntries)
		if err := d.outbox.Nack(ctx, failed[:n], "webhook call failed"); err != nil {
			d.log.Warn("dead-letter webhooks: nack failed events (they come back when their lease ends)", "err", err)
		}
		failed = failed[n:]
	}
}

// call POSTs the events to url and reports whether the receiver answered
// 2xx.
func (d *Dispatcher) call(ctx context.Context, url string, ps []pending) bool {
	p := Payload{Events: make([]model.DeadLetterEvent, len(ps))}
	for i := range ps {
		p.Events[i] = ps[i].ev
	}
	body, err := json.Marshal(p)
	if err != nil {
		d.log.Error("dead-letter webhooks: encode the payload", "err", err)
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		d.log.Error("dead-letter webhooks: build the request", "host", hostOf(url), "err", err)
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "sluice-dead-letter-webhook")
	req.Header.Set(SignatureHeader, signatureValue(d.secret, d.cfg.Clock.Now().Unix(), body))
	resp, err := d.client.Do(req)
	var uerr *neturl.Error
	if errors.As(err, &uerr) {
		err = uerr.Err // its text would hold the whole URL
	}
	if err != nil {
		d.log.Warn("dead-letter webhooks: call failed; the events will be retried", "host", hostOf(url), "events", len(ps), "err", err)
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		d.log.Warn("dead-letter webhooks: the receiver refused the call; the events will be retried",
			"host", hostOf(url), "events", len(ps), "status", resp.StatusCode)
		return false
	}
	d.log.Debug("dead-letter webhooks: delivered", "host", hostOf(url), "events", len(ps))
	return true
}

// hostOf is a webhook URL's host, for logs (its path and query may hold a
// token: they are not logged).
func hostOf(rawURL string) string {
	h, err := broker.WebhookHost(rawURL)
	if err != nil {
		return "?"
	}
	return h
}
