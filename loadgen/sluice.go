package loadgen

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Protocols a Sluice driver speaks.
const (
	ProtocolJSON   = "json"   // SQS AWS JSON 1.0, lean client
	ProtocolQuery  = "query"  // SQS query/XML, lean client
	ProtocolSDK    = "sdk"    // SQS through aws-sdk-go-v2's sqs client
	ProtocolNative = "native" // Sluice's /v1/ API through the client package
)

// SQSConfig reaches an SQS endpoint (Sluice, the null server or another)
// or Sluice's native API.
type SQSConfig struct {
	// Endpoint is the base URL, e.g. http://127.0.0.1:9324.
	Endpoint string
	// Protocol is json, query, sdk or native. Default json.
	Protocol string
	// Queue is the queue's name; Setup creates it (an existing queue of
	// that name is used as it is) and Close deletes it unless Keep.
	Queue string
	Keep  bool
	// Region and the static credentials sign requests (SigV4). Default
	// region us-east-1. The lean SQS clients (json, query) sign only
	// when an access key is given: a broker without keys (Sluice's default
	// on loopback) reads no signature, and signing is a quarter of the
	// lean client's CPU per request. The SDK always signs (test/test when
	// no key is given), as it does against any endpoint. The native
	// protocol sends the key as a bearer token.
	Region, AccessKey, SecretKey string
	// Conns is the most pooled connections kept to the endpoint: set it to
	// producers + consumers so no request waits for a connection.
	Conns int
	// Credit is each stream consumer's credit (the stream protocol);
	// 0 means DefaultStreamCredit.
	Credit int
}

// NewSQS returns the driver for cfg.
func NewSQS(cfg SQSConfig) (Driver, error) {
	if cfg.Protocol == "" {
		cfg.Protocol = ProtocolJSON
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.Queue == "" {
		return nil, fmt.Errorf("queue: a name is required")
	}
	if !strings.HasPrefix(cfg.Endpoint, "http://") && !strings.HasPrefix(cfg.Endpoint, "https://") {
		return nil, fmt.Errorf("endpoint %q: want an http:// or https:// URL", cfg.Endpoint)
	}
	cfg.Endpoint = strings.TrimRight(cfg.Endpoint, "/")
	hc := pooledClient(max(cfg.Conns, 2))
	switch cfg.Protocol {
	case ProtocolJSON:
		return &jsonDriver{lean: newLean(cfg, hc)}, nil
	case ProtocolQuery:
		return &queryDriver{lean: newLean(cfg, hc)}, nil
	case ProtocolSDK:
		return newSDKDriver(cfg, hc), nil
	case ProtocolNative:
		return newNativeDriver(cfg, hc)
	case ProtocolStream:
		native, err := newNativeDriver(cfg, hc)
		if err != nil {
			return nil, err
		}
		return newStreamDriver(cfg, native)
	}
	return nil, fmt.Errorf("protocol %q: want json, query, sdk, native or stream", cfg.Protocol)
}

// pooledClient keeps up to conns idle keep-alive connections to one host,
// so every producer and consumer reuses its connection.
func pooledClient(conns int) *http.Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}
}

// lean is what the lean SQS clients share: the pooled HTTP client and the
// SigV4 signer.
type lean struct {
	cfg      SQSConfig
	hc       *http.Client
	raw      *rawTransport // plain http:// endpoints (rawhttp.go); nil for https
	signer   *v4.Signer
	creds    aws.Credentials
	queueURL string
}

func newLean(cfg SQSConfig, hc *http.Client) *lean {
	l := &lean{cfg: cfg, hc: hc, signer: v4.NewSigner(),
		creds: aws.Credentials{AccessKeyID: cfg.AccessKey, SecretAccessKey: cfg.SecretKey}}
	if u, err := url.Parse(cfg.Endpoint); err == nil && u.Scheme == "http" && u.Host != "" {
		l.raw = newRawTransport(u.Host, max(cfg.Conns, 2))
	}
	return l
}

func (l *lean) sign(ctx context.Context, req *http.Request, body []byte) error {
	if l.creds.AccessKeyID == "" {
		return nil // no keys given: the broker reads no signature
	}
	sum := sha256.Sum256(body)
	return l.signer.SignHTTP(ctx, l.creds, req, hex.EncodeToString(sum[:]), "sqs", l.cfg.Region, time.Now())
}

// do signs req (whose body is body), sends it and reads the whole answer:
// the round trip both lean SQS clients share; the caller decodes b in its
// protocol.
func (l *lean) do(ctx context.Context, req *http.Request, body []byte) (status int, b []byte, err error) {
	if err := l.sign(ctx, req, body); err != nil {
		return 0, nil, err
	}
	if l.raw != nil && req.URL.Scheme == "http" && req.URL.Host == l.raw.host {
		return l.raw.do(ctx, req, body)
	}
	resp, err := l.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err = io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func (l *lean) close() {
	l.hc.CloseIdleConnections()
	if l.raw != nil {
		l.raw.close()
	}
}

// describe names the endpoint for the summary.
func (l *lean) describe(proto string) string {
	return fmt.Sprintf("SQS %s (lean client) at %s", proto, l.cfg.Endpoint)
}

// okAll is a batch all of whose entries were accepted.
func okAll(n int) []bool {
	b := make([]bool, n)
	for i := range b {
		b[i] = true
	}
	return b
}

// nopCloser is a producer's or consumer's Close when the driver owns the
// connections.
type nopCloser struct{}

func (nopCloser) Close() error { return nil }
