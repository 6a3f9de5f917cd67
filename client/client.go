package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/api/native/wire"
)

// Defaults of a Client (New's options change them).
const (
	// DefaultTimeout bounds one HTTP attempt of the default HTTP client: longer
	// than the longest long poll (20 s) plus the broker's answer time.
	DefaultTimeout = 60 * time.Second
	// DefaultRetries is how many times a failed request is retried (so up to
	// 4 attempts).
	DefaultRetries = 3
	// DefaultBackoffBase and DefaultBackoffCap shape the retry backoff: the
	// n-th retry waits a random time in [0, min(cap, base*2^(n-1))) (full
	// jitter).
	DefaultBackoffBase = 100 * time.Millisecond
	DefaultBackoffCap  = 5 * time.Second
	// DefaultUserAgent is the User-Agent header sent unless WithUserAgent
	// says otherwise.
	DefaultUserAgent = "sluice-go-client"
	// maxRetryAfter caps the wait a Retry-After header asks for, so that a
	// wrong header cannot stall a caller for hours (the context still rules).
	maxRetryAfter = time.Minute
	// maxErrorBody is how much of a non-JSON error answer is kept as the
	// Error's Message.
	maxErrorBody = 512
)

// Client calls one broker's native API. It is safe for concurrent use by
// several goroutines; make one per broker and share it.
//
// # Retries
//
// A request that fails with 429 (queue_full, throttled, over_limit), or
// with Sluice's own 503 (unavailable, with the API's JSON error body), was
// not carried out: the broker says so. Every request is retried then,
// waiting the Retry-After the broker gives (1 s), or else the backoff.
// So was a request whose connection could not be made (connection refused
// while the broker restarts): nothing was sent, and every request is
// retried with the backoff. Other failures are ambiguous: a connection that breaks, the broker's 500
// (internal), or a 5xx that does not carry Sluice's JSON error body (a
// proxy's or load balancer's 502, 503 or 504) may come after the broker
// did the work and before its answer arrived. Those are retried only for
// the requests that are safe to repeat:
//
//   - reads: GetQueue, ListQueues, Stats, Browse, DeadLetters, Replays;
//   - settings that converge: CreateQueue (a create of an existing queue
//     with the same attributes answers it), UpdateQueue, Pause, Resume;
//   - Ack and AckBatch (an ack of a stale receipt succeeds without effect),
//     Extend and ExtendBatch (they set the lease's end, from now);
//   - Receive: the messages of a lost answer are leased to nobody and come
//     back when their visibility timeout ends (a delay, not a loss);
//   - Send and SendBatch whose messages all carry a DedupID: the queue's
//     deduplication drops a second copy within its window (5 minutes on a
//     FIFO queue; a standard queue's DeduplicationWindowSeconds, 5 minutes
//     by default);
//   - Send and SendBatch without a DedupID, after a broken connection
//     only, knowingly: the repeat may store the message twice on a standard
//     queue (consumers must be idempotent, as at-least-once delivery asks
//     anyway). After an ambiguous 5xx answer (the broker's 500, a proxy's
//     502/503/504) they are not retried: the error is returned, and the
//     caller decides (set a DedupID to make sends safe to repeat).
//
// Not retried on an ambiguous failure, because a repeat would answer a
// misleading error (or act twice): Nack, Snooze, Release, DeadLetter and
// their batch forms (the first attempt may have ended the lease: the repeat
// fails with ErrInvalidParameter), DeleteMessage and DeleteMessages (the
// repeat says "not found"), DeleteQueue, PurgeQueue, Replay and
// DeleteDeadLetters.
//
// A context that ends stops the retries at once; the error is then the
// context's (errors.Is(err, context.Canceled)).
type Client struct {
	base      *url.URL
	hc        *http.Client
	retries   int
	backoff   time.Duration
	cap       time.Duration
	userAgent string
	// token is the Authorization header's value ("" none): WithToken.
	token string
	// jitter answers a random duration in [0, n) (n > 0).
	jitter func(n time.Duration) time.Duration
	// sleep waits d or until ctx ends (then it answers ctx's error).
	sleep func(ctx context.Context, d time.Duration) error
}

// Option configures a Client (New).
type Option func(*Client)

// WithHTTPClient makes the Client send its requests with hc instead of its
// own (an http.Client with DefaultTimeout and a clone of
// http.DefaultTransport). hc's Timeout, when set, must outlast the longest
// receive wait (20 s) plus the answer time: 30 s or more.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithRetries sets how many times a failed request is retried (0: never;
// default DefaultRetries). Which failures are retried: see Client.
func WithRetries(n int) Option { return func(c *Client) { c.retries = n } }

// WithBackoff sets the retry backoff: the n-th retry waits a random time in
// [0, min(max, base*2^(n-1))) ("full jitter"), unless the broker's
// Retry-After asks for a given wait. Defaults DefaultBackoffBase and
// DefaultBackoffCap.
func WithBackoff(base, max time.Duration) Option {
	return func(c *Client) { c.backoff, c.cap = base, max }
}

// WithUserAgent sets the User-Agent header (default DefaultUserAgent).
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// WithToken authenticates every request with an access key of the
// broker's keys file, as "Authorization: Bearer ID:SECRET" (docs/security.md).
// The secret travels in each request: use https:// to a broker on another
// machine. Without it, a broker with keys answers ErrUnauthenticated.
func WithToken(accessKeyID, secretAccessKey string) Option {
	return func(c *Client) { c.token = "Bearer " + accessKeyID + ":" + secretAccessKey }
}

// WithJitter replaces the random source of the backoff: jitter(n) answers
// a duration in [0, n). For tests; the default is math/rand/v2.
func WithJitter(jitter func(n time.Duration) time.Duration) Option {
	return func(c *Client) { c.jitter = jitter }
}

// WithSleep replaces how the Client waits between two attempts: sleep(ctx,
// d) waits d, or answers ctx.Err() as soon as ctx ends. For tests (to
// record the waits and not take them); the default uses a time.Timer.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(c *Client) { c.sleep = sleep }
}

// New returns a Client for the broker at baseURL, the address the broker
// serves both APIs on ("http://127.0.0.1:9324"; a trailing "/v1" may be
// given or not).
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("client: base URL %q does not parse: %w", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q must be http:// or https:// with a host, as in http://127.0.0.1:9324", baseURL)
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/v1")
	u.RawQuery, u.Fragment = "", ""
	c := &Client{
		base: u, retries: DefaultRetries, backoff: DefaultBackoffBase, cap: DefaultBackoffCap,
		userAgent: DefaultUserAgent,
		jitter:    func(n time.Duration) time.Duration { return rand.N(n) },
		sleep:     sleepCtx,
	}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		c.hc = &http.Client{Timeout: DefaultTimeout, Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	switch {
	case c.retries < 0:
		return nil, fmt.Errorf("client: WithRetries(%d): give 0 or more", c.retries)
	case c.backoff <= 0 || c.cap < c.backoff:
		return nil, fmt.Errorf("client: WithBackoff(%v, %v): base must be positive and max at least base", c.backoff, c.cap)
	case c.jitter == nil || c.sleep == nil:
		return nil, errors.New("client: WithJitter and WithSleep need a function, not nil")
	}
	return c, nil
}

// Close closes the idle keep-alive connections of the Client's HTTP
// client. The Client stays usable (a later call opens a new connection);
// call Close when done with it, so that no connection goroutine outlives
// it.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// request is one API call.
type request struct {
	method string
	// path is under /v1 ("/queues/orders/ack"), with its segments escaped.
	path  string
	query url.Values
	// body is marshalled as JSON when not nil.
	body any
	// idempotent says the request is safe to repeat after an ambiguous
	// failure (see Client).
	idempotent bool
	// duplicates says a repeat after the broker did the work stores a
	// second copy: a send with a message that has no DedupID. Such a
	// request is not retried after an ambiguous 5xx answer (see Client).
	duplicates bool
}

// queuePath is /queues/{queue} followed by the rest of the path.
func queuePath(queue string, rest ...string) string {
	p := "/queues/" + url.PathEscape(queue)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

// do sends r, retrying as Client says, and decodes a 2xx answer's JSON into
// out (when not nil). A non-2xx answer is an *Error.
func (c *Client) do(ctx context.Context, r request, out any) error {
	var body []byte
	if r.body != nil {
		var err error
		if body, err = json.Marshal(r.body); err != nil {
			return fmt.Errorf("client: %s %s: encoding the request: %w", r.method, r.path, err)
		}
	}
	for attempt := 0; ; attempt++ {
		err := c.once(ctx, r, body, out)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("client: %s %s: %w", r.method, r.path, ctx.Err())
		}
		retry, wait := c.retryable(r, err)
		if !retry || attempt >= c.retries {
			return err
		}
		// Full jitter (a random wait in [0, min(cap, base*2^attempt))) keeps
		// clients that failed together from retrying together; a
		// Retry-After from the broker is taken as is.
		if wait <= 0 {
			wait = c.jitter(c.ceiling(attempt))
		}
		if err := c.sleep(ctx, wait); err != nil {
			return fmt.Errorf("client: %s %s: %w", r.method, r.path, err)
		}
	}
}

// ceiling is the backoff's bound before retry n+1: min(cap, base*2^n),
// doubled step by step so that it cannot overflow.
func (c *Client) ceiling(n int) time.Duration {
	d := c.backoff
	for range n {
		if d >= c.cap/2 {
			return c.cap
		}
		d *= 2
	}
	return min(d, c.cap)
}

// retryable reports whether err may be retried for r, and the wait the
// broker asked for (0: the backoff's).
func (c *Client) retryable(r request, err error) (bool, time.Duration) {
	var e *Error
	if !errors.As(err, &e) {
		// A connection that could not be made (the broker restarting,
		// say): nothing was sent, so every request may be repeated.
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "dial" {
			return true, 0
		}
		// No answer: the request may or may not have been carried out.
		var ue *url.Error
		return r.idempotent && errors.As(err, &ue), 0
	}
	switch {
	case e.Status == http.StatusTooManyRequests,
		e.Status == http.StatusServiceUnavailable && e.Code != "":
		// Not carried out: the broker refused it before doing anything
		// (Sluice's own 503 carries its JSON body, hence a Code).
		return true, min(e.RetryAfter, maxRetryAfter)
	case e.Status >= 500 && e.Status != http.StatusNotImplemented:
		// Ambiguous: the broker's 500 (internal), or a 5xx that is not
		// Sluice's (a proxy's 502, 503 or 504), may come after the work.
		return r.idempotent && !r.duplicates, min(e.RetryAfter, maxRetryAfter)
	}
	return false, 0
}

// once makes one attempt.
func (c *Client) once(ctx context.Context, r request, body []byte, out any) error {
	// r.path's segments are escaped already (queuePath).
	u := c.base.String() + "/v1" + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, rd)
	if err != nil {
		return fmt.Errorf("client: %s %s: %w", r.method, r.path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if c.token != "" {
		req.Header.Set("Authorization", c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err // a *url.Error
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return errorFromResponse(resp)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("client: %s %s: the broker's answer (%s) does not decode: %w", r.method, r.path, resp.Status, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

// errorFromResponse reads a non-2xx answer as an *Error: the API's
// {"code","message"}, or for an answer of something else (a proxy's), the
// status and the start of the body.
func errorFromResponse(resp *http.Response) *Error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &Error{Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After"))}
	var body wire.ErrorBody
	if json.Unmarshal(raw, &body) == nil && body.Code != "" {
		e.Code, e.Message = body.Code, body.Message
		return e
	}
	msg := strings.TrimSpace(string(raw))
	if len(msg) > maxErrorBody {
		msg = msg[:maxErrorBody] + "..."
	}
	if msg == "" {
		msg = resp.Status
	}
	e.Message = msg
	return e
}

// retryAfter parses a Retry-After header: delay-seconds or an HTTP date (0
// when absent or unparsable).
func retryAfter(h string) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(h)); err == nil {
		return max(time.Duration(s)*time.Second, 0)
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// seconds is d in whole seconds, rounded up (a delay is never shortened).
func seconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return s
}
