package broker

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
)

// WebhookHost is the host a webhook URL calls, as "host:port" in lower
// case, the port made explicit (80 for http, 443 for https): what an
// operator's allowed hosts are matched against (WebhookHosts).
func WebhookHost(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("webhook URL %q has no host", rawURL)
	}
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		default:
			return "", fmt.Errorf("webhook URL %q is not http or https", rawURL)
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port), nil
}

// WebhookHosts is the operator's list of the hosts that dead-letter
// webhooks may call (Config.WebhookHosts).
type WebhookHosts interface {
	// Allowed reports whether a webhook may call host, given as WebhookHost
	// gives it ("host:port", lower case, the port explicit).
	Allowed(host string) bool
}

// checkWebhook refuses a DeadLetterWebhook (raw, as given) that the
// operator does not allow: every URL when webhooks are off
// (Config.WebhookHosts nil), else one whose host is not allowed.
// "" (no webhook) is always accepted.
func (b *Broker) checkWebhook(raw string) error {
	if raw == "" {
		return nil
	}
	bad := func(reason string) error {
		return model.Errorf(model.ErrInvalidAttributeValue, "Invalid value for the parameter DeadLetterWebhook. Reason: %s", reason)
	}
	if b.cfg.WebhookHosts == nil {
		return bad("dead-letter webhooks are off on this broker: the operator must start it with --webhook-secret and allow the host with --webhook-allow-host.")
	}
	host, err := WebhookHost(raw)
	if err != nil {
		return bad("must be an http or https URL.")
	}
	if !b.cfg.WebhookHosts.Allowed(host) {
		return bad(fmt.Sprintf("host %s is not allowed on this broker: the operator allows hosts with --webhook-allow-host.", host))
	}
	return nil
}

// WebhookOutbox is the dead-letter webhooks' outbox as the dispatcher
// (package webhook) sees it: an internal queue that no client can name,
// which the backends write one event message into in each dead-letter
// move's atomic step. The handle does only what the dispatcher needs:
// create the queue, long-poll it, delete the delivered events and nack the
// others (the outbox's RetryPolicy backs them off).
type WebhookOutbox struct{ b *Broker }

// WebhookOutbox returns the handle on the outbox queue.
func (b *Broker) WebhookOutbox() WebhookOutbox { return WebhookOutbox{b} }

// Create creates the outbox queue with its settings, or finds it.
func (o WebhookOutbox) Create(ctx context.Context) error {
	_, _, err := o.b.backend.CreateQueue(ctx, storage.QueueSpec{QueueRef: plan.WebhookOutbox(), Config: plan.WebhookOutboxConfig()})
	return err
}

// Receive leases up to max events (1..10) for lease, waiting up to wait
// (0..20 s) for a first one; a missing outbox is ErrQueueDoesNotExist.
func (o WebhookOutbox) Receive(ctx context.Context, max int, lease, wait time.Duration) ([]model.Delivery, error) {
	ref := plan.WebhookOutbox()
	return o.b.backend.Receive(ctx, model.ReceiveRequest{Queue: ref.Name, Account: ref.Account,
		MaxMessages: max, Visibility: &lease, WaitTime: &wait})
}

// Delete deletes delivered events by their receipt handles (at most
// MaxBatchEntries). A handle that does not decode is skipped and reported
// in the error; the others are deleted.
func (o WebhookOutbox) Delete(ctx context.Context, handles []string) error {
	receipts, bad := o.decode(handles)
	if len(receipts) > 0 {
		if _, err := o.b.backend.Delete(ctx, plan.WebhookOutbox(), receipts, nil); err != nil {
			return err
		}
	}
	return bad
}

// Nack hands events back as failed, with reason: each comes back after the
// outbox's backoff. Handles as for Delete.
func (o WebhookOutbox) Nack(ctx context.Context, handles []string, reason string) error {
	receipts, bad := o.decode(handles)
	changes := make([]model.VisibilityChange, len(receipts))
	for i, r := range receipts {
		changes[i] = model.VisibilityChange{Receipt: r, Kind: model.Nack, Reason: reason}
	}
	if len(changes) > 0 {
		if _, err := o.b.backend.ChangeVisibility(ctx, plan.WebhookOutbox(), changes); err != nil {
			return err
		}
	}
	return bad
}

// CheckReceipt reports whether handle, a delivered event's receipt handle,
// decodes (an error when it does not: the event can be neither deleted nor
// nacked, and comes back when its lease ends).
func (o WebhookOutbox) CheckReceipt(handle string) error {
	_, err := o.b.receipts.Decode(handle)
	return err
}

// decode decodes handles, leaving out (and returning the error of) those
// that do not decode.
func (o WebhookOutbox) decode(handles []string) ([]model.Receipt, error) {
	var out []model.Receipt
	var bad error
	for _, h := range handles {
		r, err := o.b.receipts.Decode(h)
		if err != nil {
			bad = err
			continue
		}
		out = append(out, r)
	}
	return out, bad
}

// Stats returns the outbox's counts (events waiting, leased, backing off);
// a missing outbox is ErrQueueDoesNotExist.
func (o WebhookOutbox) Stats(ctx context.Context) (model.QueueStats, error) {
	q, err := o.b.backend.GetQueue(ctx, plan.WebhookOutbox())
	return q.Stats, err
}
