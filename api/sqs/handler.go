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
	// baseURL is scheme://host as the client addressed us; queue URLs echo it.
	baseURL string
	// pathAccount and pathQueue are the account and queue of a
	// /<account>/<queue> request path ("" on /).
	pathAccount, pathQueue string
	// account is the one account this broker serves (Config.AccountID).
	account  string
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
	c := &call{ctx: r.Context(), r: r, requestID: broker.NewMessageID()}
	c.sw.ResponseWriter = w
	c.w = &c.sw
	defer h.logRequest(c, start)
	c.baseURL = baseURL(r)
	c.pathAccount, c.pathQueue = queueFromPath(r.URL.Path)
	c.account = h.cfg.AccountID
	c.senderID = senderID(r, h.cfg.AccountID)
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
	body, err := io.ReadAll(http.MaxBytesReader(c.sw.ResponseWriter, c.r.Body, h.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, normalize(err)
		}
		return nil, broker.Errorf(broker.ErrInvalidParameterValue, "Could not read the request body: %v", err)
	}
	return body, nil
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
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return "", ""
	}
	return parts[0], parts[1]
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
	parts := strings.Split(strings.Trim(u, "/"), "/")
	if len(parts) < 2 || parts[len(parts)-1] == "" || parts[len(parts)-2] == "" {
		return "", "", false
	}
	return parts[len(parts)-2], parts[len(parts)-1], true
}

// senderID is the access key id of the request's SigV4 credential (header or
// presigned query), else the account id.
func senderID(r *http.Request, account string) string {
	cred := ""
	if auth := r.Header.Get("Authorization"); auth != "" {
		if _, after, ok := strings.Cut(auth, "Credential="); ok {
			cred = after
		}
	} else {
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
// or a bare queue name) wins over the request path. A URL or path naming
// another account than the one this broker serves names no queue here.
func (c *call) queueName(ref queueRef) (string, error) {
	if ref.QueueUrl != "" {
		account, name, ok := queueFromURL(ref.QueueUrl)
		c.queue = ref.QueueUrl
		if ok {
			c.queue = name
		}
		if !ok {
			return "", broker.Errorf(broker.ErrQueueDoesNotExist, "The specified queue does not exist.")
		}
		if otherAccount(account, c.account) {
			return "", broker.OtherAccountError(account, c.account)
		}
		return name, nil
	}
	if c.pathQueue != "" {
		c.queue = c.pathQueue
		if otherAccount(c.pathAccount, c.account) {
			return "", broker.OtherAccountError(c.pathAccount, c.account)
		}
		return c.pathQueue, nil
	}
	return "", missing("QueueUrl")
}

// otherAccount reports whether the account segment of a queue URL or path
// names an AWS account (12 digits) other than served. A segment that is no
// account id (ElasticMQ's /queue/<name>, other emulators' URL forms) names
// the broker's own queues, as it did before accounts were checked.
func otherAccount(segment, served string) bool {
	if segment == "" || segment == served || len(segment) != 12 {
		return false
	}
	for i := 0; i < len(segment); i++ {
		if segment[i] < '0' || segment[i] > '9' {
			return false
		}
	}
	return true
}

// queueURL is the URL of queue name as this client addresses the broker.
func (h *Handler) queueURL(c *call, name string) string {
	return c.baseURL + "/" + h.cfg.AccountID + "/" + name
}

// arn is the ARN of queue name.
func (h *Handler) arn(name string) string { return broker.ARN(h.cfg.Region, h.cfg.AccountID, name) }

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
	return &broker.Error{Kind: errInternal, Message: fmt.Sprint(err)}
}
