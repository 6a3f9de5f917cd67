package webhook

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
)

// Config configures a Dispatcher. Use DefaultConfig and change fields;
// Validate reports the first field out of range. New fills the zero fields
// (but Secret and AllowedHosts) with their defaults.
type Config struct {
	// Secret is the key of every payload's HMAC-SHA256 signature (the
	// Sluice-Signature header; see Sign). Required: at least 16 bytes.
	// Without one, dead-letter webhooks are off: sluice serve does not
	// start a dispatcher, and the front refuses the attribute.
	Secret string
	// AllowedHosts are the hosts webhooks may call (see ParseHosts): "host"
	// allows it on the default ports (80 for http, 443 for https),
	// "host:port" on that port only; entries may also be comma-separated
	// lists. No other host is ever called: a queue cannot make the broker
	// an open proxy. Default none (every URL is refused).
	AllowedHosts []string
	// HTTPClient sends the calls. Default: a client of the dispatcher's own
	// (http.DefaultTransport). Whatever the client, redirects are never
	// followed (a 3xx answer is a failed delivery) and each call is bounded
	// by Timeout.
	HTTPClient *http.Client
	// Timeout bounds one call, from connecting to reading the answer's
	// status, in real time (it is I/O, not queue time). Default 10 s;
	// 1 s..60 s.
	Timeout time.Duration
	// MaxBatch is the most events one call carries: the dispatcher gathers
	// events for up to Window after the first one, or until it has
	// MaxBatch, whichever comes first. Default 100; 1..1000.
	MaxBatch int
	// Window is how long the dispatcher gathers events after the first one
	// before it calls (coalescing a burst into few calls). Default 1 s (0
	// means the default); at most 10 s.
	Window time.Duration
	// Clock drives the gathering window, the signature's timestamp and the
	// pause after an error. Default model.RealClock; use the broker's own.
	Clock model.Clock
	// Logger receives the dispatcher's logs. Default: discard.
	Logger *slog.Logger
}

// The defaults and limits of Config.
const (
	DefaultTimeout  = 10 * time.Second
	DefaultMaxBatch = 100
	DefaultWindow   = time.Second
	// MinSecretBytes is the shortest Secret.
	MinSecretBytes = 16
)

// DefaultConfig returns the default configuration (without a Secret or
// hosts: set them).
func DefaultConfig() Config {
	return Config{Timeout: DefaultTimeout, MaxBatch: DefaultMaxBatch, Window: DefaultWindow}
}

// withDefaults fills the zero fields that have a default.
func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.Clock == nil {
		c.Clock = model.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports the first field out of its allowed range (a zero field
// stands for its default).
func (c Config) Validate() error {
	c = c.withDefaults()
	if len(c.Secret) < MinSecretBytes {
		return fmt.Errorf("webhook: Secret must be at least %d bytes (got %d); generate one with `openssl rand -hex 32`", MinSecretBytes, len(c.Secret))
	}
	if _, err := ParseHosts(c.AllowedHosts...); err != nil {
		return err
	}
	switch {
	case c.Timeout < time.Second || c.Timeout > time.Minute:
		return fmt.Errorf("webhook: Timeout %v out of range [1s, 1m0s]", c.Timeout)
	case c.MaxBatch < 1 || c.MaxBatch > 1000:
		return fmt.Errorf("webhook: MaxBatch %d out of range [1, 1000]", c.MaxBatch)
	case c.Window < 0 || c.Window > 10*time.Second:
		return fmt.Errorf("webhook: Window %v out of range (0s, 10s] (0 means the default, %v)", c.Window, DefaultWindow)
	}
	return nil
}

// HostList is an operator's list of the hosts webhooks may call. It
// implements broker.WebhookHosts (broker.Config.WebhookHosts), so the front
// refuses a URL of another host when it is set, and the dispatcher drops
// the events of a URL whose host was removed from the list since.
//
// Entries are matched exactly, after lower-casing: no wildcards, no
// resolution. An entry names the host as the URL does: a name allows that
// name (not the addresses it resolves to: point it only at hosts you
// trust), an IP address that address.
type HostList struct {
	hosts map[string]bool // "host:port"
}

// ParseHosts parses allowed-host entries: "host" (ports 80 and 443),
// "host:port", "[v6]" or "[v6]:port"; each entry may be a comma-separated
// list, and blank items are ignored. A URL, a path or a bad port is refused.
func ParseHosts(entries ...string) (*HostList, error) {
	l := &HostList{hosts: map[string]bool{}}
	for _, entry := range entries {
		for _, h := range strings.Split(entry, ",") {
			h = strings.ToLower(strings.TrimSpace(h))
			if h == "" {
				continue
			}
			if err := l.add(h); err != nil {
				return nil, err
			}
		}
	}
	return l, nil
}

func (l *HostList) add(h string) error {
	bad := func(reason string) error {
		return fmt.Errorf("webhook: allowed host %q: %s (give host or host:port, e.g. hooks.example.com or hooks.example.com:8443)", h, reason)
	}
	if strings.ContainsAny(h, "/?#@ ") {
		return bad("not a host")
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		// No port: "host", "[v6]" or a bare v6 address.
		port = ""
		if strings.HasPrefix(h, "[") != strings.HasSuffix(h, "]") {
			return bad("not a host")
		}
		host = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
		if strings.ContainsAny(host, "[]") || (strings.Contains(host, ":") && net.ParseIP(host) == nil) {
			return bad("not a host")
		}
	}
	if host == "" {
		return bad("no host")
	}
	if port == "" {
		l.hosts[net.JoinHostPort(host, "80")] = true
		l.hosts[net.JoinHostPort(host, "443")] = true
		return nil
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return bad("the port must be 1..65535")
	}
	l.hosts[net.JoinHostPort(host, port)] = true
	return nil
}

// Allowed reports whether a webhook may call host ("host:port", as
// broker.WebhookHost gives it). Safe for concurrent use; a nil list allows
// nothing.
func (l *HostList) Allowed(host string) bool {
	return l != nil && l.hosts[strings.ToLower(host)]
}

// Len is the number of host:port pairs allowed.
func (l *HostList) Len() int {
	if l == nil {
		return 0
	}
	return len(l.hosts)
}

// AllowedURL reports whether a webhook URL's host is allowed, with the
// reason when it is not.
func (l *HostList) AllowedURL(rawURL string) error {
	host, err := broker.WebhookHost(rawURL)
	if err != nil {
		return err
	}
	if !l.Allowed(host) {
		return errors.New("host " + host + " is not allowed (--webhook-allow-host)")
	}
	return nil
}

var _ broker.WebhookHosts = (*HostList)(nil)
