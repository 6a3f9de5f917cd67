package client

import (
	"crypto/tls"
	"net/http"
	"strings"
)

// Connection is how a Client reaches its broker: what a client of the
// broker's other APIs on the same address needs to connect as this one
// does (package worker opens its consumer streams with it).
type Connection struct {
	// BaseURL is the broker's address, as New was given it without a
	// trailing "/v1" ("http://127.0.0.1:9324").
	BaseURL string
	// Token is the access key WithToken gave, "ACCESS_KEY_ID:SECRET_ACCESS_KEY"
	// ("" without one).
	Token string
	// TLS is the TLS configuration of the HTTP client's transport, when it
	// is an *http.Transport that has one (nil otherwise: the system's
	// roots).
	TLS *tls.Config
	// UserAgent is the User-Agent the Client sends.
	UserAgent string
}

// Connection answers how c reaches its broker.
func (c *Client) Connection() Connection {
	conn := Connection{BaseURL: c.base.String(), Token: strings.TrimPrefix(c.token, "Bearer "), UserAgent: c.userAgent}
	if t, ok := c.hc.Transport.(*http.Transport); ok && t.TLSClientConfig != nil {
		conn.TLS = t.TLSClientConfig.Clone()
	}
	return conn
}
