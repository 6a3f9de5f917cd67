// Package apicommon holds what the protocols under api/ share: the
// configuration of a protocol handler and the waiting-receive gate (the cap on
// receives that may wait, and the drain that ends them at shutdown). Several
// handlers of one server share one Gate, so the cap is the server's.
package apicommon

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
)

// Config configures a protocol handler (api/sqs, api/native). The account
// in queue URLs and ARNs is the broker's own (broker.Broker.AccountID).
type Config struct {
	// Region is the region in queue ARNs. Default DefaultRegion.
	Region string
	// Logger receives one record per request: at debug level (the action or
	// route, queue, HTTP status, duration), or at error level for a 5xx
	// answer (with the error). Nil discards.
	Logger *slog.Logger
	// MaxBodyBytes caps a request body; larger bodies get 413. Default
	// DefaultMaxBodyBytes: a 1 MiB batch can grow up to 3x when
	// form-encoded (%XX) or JSON-escaped (\uXXXX for a 2-byte character),
	// and base64 binary attributes by 4/3, so the default leaves room.
	MaxBodyBytes int64
	// Gate is the waiting-receive gate. Nil: the handler makes its own with
	// DefaultMaxWaitingReceives and no drain.
	Gate *Gate
	// Requests, when not nil, is told every request's API, action, status
	// and duration (for metrics). Nil: nothing is told.
	Requests RequestObserver
}

// RequestObserver is told each answered request: its api ("sqs" or
// "native"), its action (an SQS action name, "other" for a name SQS does
// not have, "" for none; a native route as "METHOD /v1/path/{param}", or
// "" when no route matched), its HTTP status and how long it took. The
// action is always one of a fixed set, so it can be a metric label. It is
// called from every request's goroutine and must not block.
type RequestObserver interface {
	Request(api, action string, status int, d time.Duration)
}

// Defaults of Config.
const (
	DefaultRegion             = "us-east-1"
	DefaultMaxBodyBytes       = 3<<20 + 64<<10
	DefaultMaxWaitingReceives = 10000
)

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Region == "" {
		c.Region = DefaultRegion
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.Gate == nil {
		c.Gate = NewGate(DefaultMaxWaitingReceives, nil)
	}
	return c
}

// Gate caps the receives that may wait at once (a long poll holds a slot
// while it waits) and drains them: once drain is cancelled, every waiting
// receive answers at once with no messages, and new receives answer without
// waiting (the first step of a graceful shutdown). Safe for concurrent use.
type Gate struct {
	// waiting holds one token per receive that may wait.
	waiting chan struct{}
	drain   context.Context
}

// NewGate returns a gate of max waiting receives (<= 0:
// DefaultMaxWaitingReceives) ended by drain (nil: never).
func NewGate(max int, drain context.Context) *Gate {
	if max <= 0 {
		max = DefaultMaxWaitingReceives
	}
	if drain == nil {
		drain = context.Background()
	}
	return &Gate{waiting: make(chan struct{}, max), drain: drain}
}

// Waiting is the number of receives holding a slot right now.
func (g *Gate) Waiting() int { return len(g.waiting) }

// Cap is the most receives that may wait at once.
func (g *Gate) Cap() int { return cap(g.waiting) }

// Receive runs b.Receive(ctx, req) under the gate. A receive that may wait
// (no WaitTime, which takes the queue's default, or one above 0) holds a slot
// while it runs; with none free it fails with full(g.Cap()) (the protocol's
// throttling error). While draining, or once the drain ends its wait, it
// answers no messages and no error: the backend returns without claiming.
func (g *Gate) Receive(ctx context.Context, b *broker.Broker, req model.ReceiveRequest, full func(cap int) error) ([]model.Delivery, error) {
	if g.drain.Err() != nil {
		return nil, nil
	}
	if req.WaitTime == nil || *req.WaitTime > 0 {
		select {
		case g.waiting <- struct{}{}:
			defer func() { <-g.waiting }()
		default:
			return nil, full(cap(g.waiting))
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(g.drain, cancel)
	defer stop()
	ds, err := b.Receive(ctx, req)
	if err != nil && g.drain.Err() != nil && errors.Is(err, context.Canceled) {
		return nil, nil
	}
	return ds, err
}

// StatusWriter is an http.ResponseWriter that notes the status a handler
// answers with (for the request log).
type StatusWriter struct {
	http.ResponseWriter
	// Status is the first status written (200 on a Write without one; 0
	// before anything is written).
	Status int
}

// WriteHeader notes status and passes it on.
func (w *StatusWriter) WriteHeader(status int) {
	if w.Status == 0 {
		w.Status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

// Write notes 200 when nothing was written before, and passes b on.
func (w *StatusWriter) Write(b []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController the server's writer.
func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
