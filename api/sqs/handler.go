// Package sqs serves the Amazon SQS wire API over the broker's front (broker.Broker): the AWS
// JSON 1.0 protocol (X-Amz-Target: AmazonSQS.<Op>) and the query protocol
// (form-encoded Action=, XML replies) on one http.Handler. It decodes a
// request, calls the backend, and encodes the answer; it never decides queue
// semantics. Every broker error is mapped to its SQS code and HTTP status in
// one table (errors.go).
package sqs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/sluicemq/sluice/api/apicommon"
	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
)

// Config configures a Handler (apicommon.Config: the account, region,
// logger, body cap and waiting-receive gate that both protocols share).
type Config = apicommon.Config

// Handler is the SQS API as an http.Handler. Safe for concurrent use.
type Handler struct {
	broker *broker.Broker
	cfg    Config
}

// New returns a Handler serving b. Zero Config fields take their defaults.
func New(b *broker.Broker, cfg Config) *Handler {
	return &Handler{broker: b, cfg: cfg.WithDefaults()}
}

// protocol is the wire protocol of one request.
type protocol int

const (
	protoJSON protocol = iota
	protoQuery
)

// call is one request in flight.
type call struct {
	ctx context.Context
	// w is the response writer, which notes the status for the request log
	// (&sw; sw.ResponseWriter is the server's own, for http.MaxBytesReader).
	w         http.ResponseWriter
	sw        apicommon.StatusWriter
	r         *http.Request
	proto     protocol
	action    string
	requestID string
	// pathAccount and pathQueue are the account and queue of a
	// /<account>/<queue> request path ("" on /).
	pathAccount, pathQueue string
	// account is the broker's own account (broker.Broker.AccountID).
	account string
	// owner is the account the request's queue URL, path or ARN names
	// ("" when none: the caller's own), also on ctx (broker.WithQueueOwner).
	owner    string
	senderID string
	// queue is the queue the request named, for the log ("" when none).
	queue string
	// err is the error the request was answered with, for the log.
	err error
}

// logRequest writes the request's log record: debug level, or error level
// for a 5xx answer (debug again when the client went away).
func (h *Handler) logRequest(c *call, start time.Time) {
	status := c.sw.Status
	if status == 0 {
		status = http.StatusOK
	}
	if h.cfg.Requests != nil {
		action := c.action
		if _, known := operations[action]; !known && action != "" {
			action = "other" // a label from a fixed set, whatever a client sends
		}
		h.cfg.Requests.Request("sqs", action, status, time.Since(start))
	}
	level := slog.LevelDebug
	// A client that went away (its request's context cancelled: a
	// disconnect, a cancelled long poll) gets a 503 nobody reads: that is
	// the client's doing, not the broker's failure, so it is logged at
	// debug level, saying so, rather than as an error.
	gone := status >= 500 && c.r.Context().Err() != nil
	if status >= 500 && !gone {
		level = slog.LevelError
	}
	if !h.cfg.Logger.Enabled(c.ctx, level) {
		return
	}
	proto := "json"
	if c.proto == protoQuery {
		proto = "query"
	}
	attrs := []slog.Attr{
		slog.String("action", c.action), slog.String("queue", c.queue), slog.Int("status", status),
		slog.Duration("duration", time.Since(start)), slog.String("protocol", proto), slog.String("request_id", c.requestID),
	}
	if gone {
		h.cfg.Logger.LogAttrs(c.ctx, level, "request abandoned: the client went away", attrs...)
		return
	}
	if c.err != nil && status >= 500 {
		attrs = append(attrs, slog.String("err", c.err.Error()))
		h.cfg.Logger.LogAttrs(c.ctx, level, "request failed", attrs...)
		return
	}
	h.cfg.Logger.LogAttrs(c.ctx, level, "request", attrs...)
}

// ServeHTTP dispatches on X-Amz-Target (JSON) or Action (query).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	c := &call{ctx: r.Context(), r: r, requestID: model.NewMessageID()}
	c.sw.ResponseWriter = w
	c.w = &c.sw
	defer h.logRequest(c, start)
	c.pathAccount, c.pathQueue = queueFromPath(r.URL.Path)
	c.account = h.broker.AccountID()
	c.senderID = senderID(r, c.account)
	// A form body is query protocol even with an X-Amz-Target header: Perl's
	// Amazon::SQS::Simple sends "AmazonSQSv20121105.<Action>" beside a form.
	if target := r.Header.Get("X-Amz-Target"); target != "" && !isForm(r) {
		c.proto = protoJSON
		if op, ok := strings.CutPrefix(target, stsTargetPrefix); ok {
			h.serveSTSJSON(c, op)
			return
		}
		h.serveJSON(c, target)
		return
	}
	c.proto = protoQuery
	h.serveQuery(c)
}

func isForm(r *http.Request) bool {
	ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	return strings.EqualFold(strings.TrimSpace(ct), "application/x-www-form-urlencoded")
}

// readBody reads the whole body, at most MaxBodyBytes.
func (h *Handler) readBody(c *call) ([]byte, error) {
	if c.r.Body == nil {
		return nil, nil
	}
	body, err := readAll(http.MaxBytesReader(c.sw.ResponseWriter, c.r.Body, h.cfg.MaxBodyBytes), c.r.ContentLength, h.cfg.MaxBodyBytes)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, normalize(err)
		}
		return nil, model.Errorf(model.ErrInvalidParameterValue, "Could not read the request body: %v", err)
	}
	return body, nil
}

// readAll is io.ReadAll with its first buffer sized for a body of size
// bytes (the request's Content-Length, -1 when unknown) when that is at most
// limit, so that a body of known length is read into one allocation instead
// of a buffer grown from 512 bytes.
func readAll(r io.Reader, size, limit int64) ([]byte, error) {
	n := 512
	if size >= 0 && size <= limit {
		// Room for the read that meets the end, up to 64 KiB before any of
		// the body has come: a client's declared length alone does not
		// hold megabytes of memory while it trickles the body.
		n = int(min(size+1, 64<<10))
	}
	b := make([]byte, 0, n)
	for {
		m, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	host := r.Host
	if host == "" {
		host = "localhost"
	}
	return scheme + "://" + host
}

// queueFromPath returns the account and queue of a /<account>/<queue> path,
// or "", "".
func queueFromPath(path string) (account, queue string) {
	account, queue, ok := strings.Cut(strings.Trim(path, "/"), "/")
	if !ok || account == "" || queue == "" || strings.IndexByte(queue, '/') >= 0 {
		return "", ""
	}
	return account, queue
}

// queueFromURL returns the account and queue a QueueUrl names: the last two
// segments of its path (<account>/<queue>), whatever the host. A bare queue
// name (no scheme, no slash: "emails"), which SQS accepts too, names a queue
// of the broker's own account: account is "" then.
func queueFromURL(u string) (account, queue string, ok bool) {
	if !strings.Contains(u, "://") && !strings.ContainsAny(u, "/?#") {
		return "", u, u != ""
	}
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
		j := strings.IndexByte(u, '/')
		if j < 0 {
			return "", "", false
		}
		u = u[j:]
	}
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		u = u[:i]
	}
	// The last two segments, without splitting the whole path.
	rest := strings.Trim(u, "/")
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return "", "", false
	}
	rest, queue = rest[:i], rest[i+1:]
	account = rest[strings.LastIndexByte(rest, '/')+1:]
	if account == "" || queue == "" {
		return "", "", false
	}
	return account, queue, true
}

// senderID is the access key id of the request's SigV4 credential (header or
// presigned query), else the account id.
func senderID(r *http.Request, account string) string {
	cred := ""
	if auth := r.Header.Get("Authorization"); auth != "" {
		if _, after, ok := strings.Cut(auth, "Credential="); ok {
			cred = after
		}
	} else if r.URL.RawQuery != "" {
		cred = r.URL.Query().Get("X-Amz-Credential")
	}
	if i := strings.IndexAny(cred, "/, "); i >= 0 {
		cred = cred[:i]
	}
	if cred == "" || len(cred) > 128 {
		return account
	}
	return cred
}

// queueName resolves the queue of an action: the QueueUrl parameter (a URL
// or a bare queue name) wins over the request path. The URL's or path's
// account goes to the broker (setOwner), which decides whether the caller
// may act on that account's queue.
func (c *call) queueName(ref queueRef) (string, error) {
	if ref.QueueUrl != "" {
		account, name, ok := queueFromURL(ref.QueueUrl)
		c.queue = ref.QueueUrl
		if ok {
			c.queue = name
		}
		if !ok {
			return "", model.Errorf(model.ErrQueueDoesNotExist, "The specified queue does not exist.")
		}
		c.setOwner(account)
		return name, nil
	}
	if c.pathQueue != "" {
		c.queue = c.pathQueue
		c.setOwner(c.pathAccount)
		return c.pathQueue, nil
	}
	return "", missing("QueueUrl")
}

// setOwner names the account segment of a queue URL, path or ARN as the
// owner of the queue the request names (broker.WithQueueOwner), when it is
// an account id: the broker's own, or 12 digits. A segment that is no
// account id (ElasticMQ's /queue/<name>, other emulators' URL forms) names
// the caller's own queues, as it did before accounts came.
func (c *call) setOwner(segment string) {
	if segment != c.account && !isAccountID(segment) {
		return
	}
	c.owner = segment
	c.ctx = broker.WithQueueOwner(c.ctx, segment)
}

// isAccountID reports whether s is an AWS account id (12 digits).
func isAccountID(s string) bool {
	if len(s) != 12 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// queueURL is the URL of queue name of account as this client addresses
// the broker.
func (h *Handler) queueURL(c *call, account, name string) string {
	return baseURL(c.r) + "/" + account + "/" + name
}

// arn is the ARN of queue name of account.
func (h *Handler) arn(account, name string) string { return model.ARN(h.cfg.Region, account, name) }

// ownerOf is the account that owns the queue the request names: the one
// its URL names, else the caller's own.
func (h *Handler) ownerOf(c *call) string {
	if c.owner != "" {
		return c.owner
	}
	return h.broker.CallerAccount(c.ctx)
}

// fail writes err in the request's protocol.
func (h *Handler) fail(c *call, err error) {
	err = normalize(err)
	c.err = err // logRequest logs it with a 5xx
	k := kindOf(err)
	msg := wireMessage(err, k)
	if c.proto == protoJSON {
		writeJSONError(c, k, msg)
		return
	}
	if k.queryMessage != "" {
		msg = k.queryMessage
	}
	writeQueryError(c, k, msg)
}

func internal(err error) error {
	return &model.Error{Kind: errInternal, Message: fmt.Sprint(err)}
}
