package broker

import (
	"fmt"
	"net"
	"net/url"
	"strings"
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
// webhooks may call (Options.WebhookHosts).
type WebhookHosts interface {
	// Allowed reports whether a webhook may call host, given as WebhookHost
	// gives it ("host:port", lower case, the port explicit).
	Allowed(host string) bool
}

// checkWebhook refuses a DeadLetterWebhook (raw, as given) that the
// operator does not allow: every URL when webhooks are off
// (Options.WebhookHosts nil), else one whose host is not allowed.
// "" (no webhook) is always accepted.
func (b *Broker) checkWebhook(raw string) error {
	if raw == "" {
		return nil
	}
	bad := func(reason string) error {
		return Errorf(ErrInvalidAttributeValue, "Invalid value for the parameter DeadLetterWebhook. Reason: %s", reason)
	}
	if b.opts.WebhookHosts == nil {
		return bad("dead-letter webhooks are off on this broker: the operator must start it with --webhook-secret and allow the host with --webhook-allow-host.")
	}
	host, err := WebhookHost(raw)
	if err != nil {
		return bad("must be an http or https URL.")
	}
	if !b.opts.WebhookHosts.Allowed(host) {
		return bad(fmt.Sprintf("host %s is not allowed on this broker: the operator allows hosts with --webhook-allow-host.", host))
	}
	return nil
}
