package sqssource

import (
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"io"
	"net/http"
)

// Transport returns base for the http.Client of an aws-sdk-go-v2 client,
// without the SDK's lost answers: set it as sqs.Options.HTTPClient's
// Transport. A nil base is the transport the SDK builds by default
// (awshttp.NewBuildableClient: 10 idle connections a host, TLS 1.2 at
// least), not http.DefaultTransport.
//
//	HTTPClient: &http.Client{Timeout: 30 * time.Second, Transport: sqssource.Transport(nil)},
//
// With sqs.NewFromConfig, wrap the transport the configuration built, which
// holds AWS_CA_BUNDLE's certificates when that is set:
//
//	bc := cfg.HTTPClient.(*awshttp.BuildableClient)
//	client := sqs.NewFromConfig(cfg, func(o *sqs.Options) {
//		o.HTTPClient = &http.Client{Timeout: 30 * time.Second, Transport: sqssource.Transport(bc.GetTransport())}
//	})
//
// Why: aws-sdk-go-v2 (smithy-go up to v1.28.9 at least) closes a request's
// body as soon as the answer's headers arrive, and its body then answers
// WriteTo with io.EOF. net/http, after sending a body, copies what is left
// of it to check that nothing is (with WriteTo when the body has it) and
// takes that io.EOF for a failed write: it closes the connection while the
// caller still reads the answer. On a fast endpoint the answer can arrive
// before that last step, and the SDK then fails to read it ("deserialization
// failed, ... use of closed network connection") and sends the request
// again. For ReceiveMessage the lost answer's messages stay leased, unseen,
// until their visibility timeout ends (SQS delivers at least once, so they
// come back, late); this was one lost answer in a few thousand receives on a
// local broker. Transport hides the body's WriteTo, so that net/http reads
// it with Read, which answers a closed body with io.EOF and no error.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = awshttp.NewBuildableClient().GetTransport()
	}
	return bodyTransport{base: base}
}

type bodyTransport struct{ base http.RoundTripper }

// RoundTrip implements http.RoundTripper. It hands base a shallow copy of r
// whose body (and GetBody's) is the same reader without WriteTo; r itself is
// not changed, as RoundTrip's contract asks.
func (t bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return t.base.RoundTrip(r)
	}
	r2 := new(http.Request)
	*r2 = *r
	r2.Body = readOnly{r.Body}
	if get := r.GetBody; get != nil {
		r2.GetBody = func() (io.ReadCloser, error) {
			b, err := get()
			if err != nil || b == nil || b == http.NoBody {
				return b, err
			}
			return readOnly{b}, nil
		}
	}
	return t.base.RoundTrip(r2)
}

// CloseIdleConnections closes base's idle connections when base can (as
// http.Client.CloseIdleConnections asks of its Transport).
func (t bodyTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// readOnly is a request body with only Read and Close: io.Copy then never
// takes a WriteTo of it.
type readOnly struct{ rc io.ReadCloser }

func (b readOnly) Read(p []byte) (int, error) { return b.rc.Read(p) }
func (b readOnly) Close() error               { return b.rc.Close() }
