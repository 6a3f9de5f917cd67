// Package stream is the Go client of Sluice's stream API (docs/streams.md):
// a Publisher pipelines sends on one gRPC stream and gets each confirmed
// once it is durable; a Consumer gets leased messages pushed while its
// credit allows, and settles them (ack, nack, extend, snooze, release,
// dead-letter) in batches on the same stream, while the broker keeps their
// leases alive.
//
// It is a package of its own so that package client stays standard-library
// only; it speaks the generated protocol (api/stream/streampb), whose types
// it uses for messages and envelopes.
//
//	c, _ := stream.Dial("http://127.0.0.1:9324", stream.Options{})
//	defer c.Close()
//	pub, _ := c.Publisher(ctx)
//	res, _ := pub.Publish(ctx, "emails", &streampb.Envelope{Body: "hello"})
//	con, _ := c.Consume(ctx, stream.ConsumeOptions{Queue: "emails", Credit: 16})
//	m, _ := con.Receive(ctx)
//	_ = con.Ack(ctx, m.Receipt)
package stream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"

	"github.com/sluicemq/sluice/api/stream/streampb"
)

// Options configures a Client.
type Options struct {
	// Token is the bearer token, "ACCESS_KEY_ID:SECRET_ACCESS_KEY", for a
	// broker with access keys ("" sends none).
	Token string
	// TLS configures an https endpoint (nil: the system's roots).
	TLS *tls.Config
	// UserAgent names the client in the broker's logs.
	UserAgent string
}

// Client is a connection to a broker's stream API (one HTTP/2 connection;
// any number of streams share it). Safe for concurrent use.
type Client struct {
	conn  *grpc.ClientConn
	api   streampb.StreamsClient
	token string
}

// Dial connects to the broker at endpoint: "http://host:port" (the
// broker's address; HTTP/2 without TLS), "https://host:port", or
// "host:port" (as http). It does not wait for the connection: the first
// stream does.
func Dial(endpoint string, opts Options) (*Client, error) {
	target, secure, err := parseEndpoint(endpoint)
	if err != nil {
		return nil, err
	}
	creds := insecure.NewCredentials()
	if secure {
		tc := opts.TLS
		if tc == nil {
			tc = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		creds = credentials.NewTLS(tc)
	}
	dopts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		// Pings on a quiet connection, as the broker's: a broker that is
		// gone is noticed within 10 s.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 5 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16 << 20)),
	}
	if opts.UserAgent != "" {
		dopts = append(dopts, grpc.WithUserAgent(opts.UserAgent))
	}
	conn, err := grpc.NewClient(target, dopts...)
	if err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	return &Client{conn: conn, api: streampb.NewStreamsClient(conn), token: opts.Token}, nil
}

// parseEndpoint turns an endpoint into a gRPC target.
func parseEndpoint(endpoint string) (target string, secure bool, err error) {
	if !strings.Contains(endpoint, "://") {
		endpoint = "http://" + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || (u.Path != "" && u.Path != "/") {
		return "", false, fmt.Errorf("stream: endpoint %q: want http://HOST:PORT or https://HOST:PORT (the broker's address)", endpoint)
	}
	host := u.Host
	if u.Port() == "" {
		if u.Scheme == "https" {
			host += ":443"
		} else {
			host += ":80"
		}
	}
	return "passthrough:///" + host, u.Scheme == "https", nil
}

// Close closes the connection and every stream on it.
func (c *Client) Close() error { return c.conn.Close() }

// streamContext adds the bearer token to a stream's context.
func (c *Client) streamContext(ctx context.Context) context.Context {
	if c.token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.token)
}

// Error is an error the broker answered for one send or settlement: a
// native API code ("queue_not_found", "invalid_parameter", ...) and its
// message.
type Error struct {
	Code, Message string
}

func (e *Error) Error() string { return "sluice: " + e.Code + ": " + e.Message }

// errorOf converts an answer's error (nil when there is none).
func errorOf(e *streampb.Error) error {
	if e == nil {
		return nil
	}
	return &Error{Code: e.GetCode(), Message: e.GetMessage()}
}

// ErrClosed is the error of a call on a stream that has ended without an
// error of its own (Close, or the broker closed it cleanly).
var ErrClosed = errors.New("stream: the stream is closed")

// Publisher is a producer's stream. Publish and PublishAsync are safe for
// concurrent use; sends are pipelined: many can wait for their confirms at
// once, and the broker syncs them together.
type Publisher struct {
	st     grpc.BidiStreamingClient[streampb.PublishRequest, streampb.PublishConfirm]
	cancel context.CancelFunc

	sendMu sync.Mutex // one Send at a time
	mu     sync.Mutex
	seq    uint64
	wait   map[uint64]*Confirm
	err    error // set once the stream has ended
	done   chan struct{}
}

// Publisher opens a Publish stream. It lives until Close (ctx's values
// are the stream's; its end does not end the stream).
func (c *Client) Publisher(ctx context.Context) (*Publisher, error) {
	sctx, cancel := context.WithCancel(c.streamContext(context.WithoutCancel(ctx)))
	st, err := c.api.Publish(sctx)
	if err != nil {
		cancel()
		return nil, err
	}
	p := &Publisher{st: st, cancel: cancel, wait: map[uint64]*Confirm{}, done: make(chan struct{})}
	go p.read()
	return p, nil
}

// Confirm is a send's confirm to come (PublishAsync).
type Confirm struct {
	done    chan struct{}
	results []SendResult
	err     error
}

// SendResult is one message's outcome: its id (and a FIFO message's
// sequence number), or the error that refused it.
type SendResult struct {
	MessageID, SequenceNumber string
	Err                       error
}

// Wait returns the send's results (one per message, in order) once the
// broker confirmed it, or the error that refused the whole send (or ended
// the stream before its confirm).
func (f *Confirm) Wait(ctx context.Context) ([]SendResult, error) {
	select {
	case <-f.done:
		return f.results, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Done is closed when the confirm has come.
func (f *Confirm) Done() <-chan struct{} { return f.done }

// PublishAsync sends up to 10 messages to queue as one send (one sync)
// without waiting for the confirm.
func (p *Publisher) PublishAsync(queue string, msgs ...*streampb.Envelope) *Confirm {
	f := &Confirm{done: make(chan struct{})}
	p.mu.Lock()
	if p.err != nil {
		f.err = p.err
		p.mu.Unlock()
		close(f.done)
		return f
	}
	p.seq++
	seq := p.seq
	p.wait[seq] = f
	p.mu.Unlock()
	p.sendMu.Lock()
	err := p.st.Send(&streampb.PublishRequest{Seq: seq, Queue: queue, Messages: msgs})
	p.sendMu.Unlock()
	if err != nil {
		// The stream has ended: read's end fails every waiting send with
		// the stream's error.
		p.fail(err)
	}
	return f
}

// Publish sends up to 10 messages to queue as one send and waits for its
// confirm: each result's MessageID is durable in the broker's store.
func (p *Publisher) Publish(ctx context.Context, queue string, msgs ...*streampb.Envelope) ([]SendResult, error) {
	return p.PublishAsync(queue, msgs...).Wait(ctx)
}

// read resolves confirms until the stream ends.
func (p *Publisher) read() {
	defer close(p.done)
	for {
		c, err := p.st.Recv()
		if err != nil {
			if err == io.EOF {
				err = ErrClosed
			}
			p.fail(err)
			return
		}
		p.mu.Lock()
		f := p.wait[c.GetSeq()]
		delete(p.wait, c.GetSeq())
		p.mu.Unlock()
		if f == nil {
			continue
		}
		if c.GetError() != nil {
			f.err = errorOf(c.GetError())
		} else {
			f.results = make([]SendResult, len(c.GetResults()))
			for i, r := range c.GetResults() {
				f.results[i] = SendResult{MessageID: r.GetMessageId(), SequenceNumber: r.GetSequenceNumber(), Err: errorOf(r.GetError())}
			}
		}
		close(f.done)
	}
}

// fail ends the stream's waiting sends with err (the first error wins).
func (p *Publisher) fail(err error) {
	p.mu.Lock()
	if p.err == nil {
		p.err = err
	}
	err = p.err
	waiting := p.wait
	p.wait = map[uint64]*Confirm{}
	p.mu.Unlock()
	for _, f := range waiting {
		f.err = err
		close(f.done)
	}
}

// Close ends the stream after the sends already made are confirmed (or
// ctx ends), and returns the stream's error, if it had one.
func (p *Publisher) Close(ctx context.Context) error {
	p.sendMu.Lock()
	_ = p.st.CloseSend()
	p.sendMu.Unlock()
	select {
	case <-p.done:
	case <-ctx.Done():
	}
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if errors.Is(p.err, ErrClosed) {
		return nil
	}
	return p.err
}
