// Package native serves Sluice's own JSON API over HTTP under /v1/: queues
// (create, list with stats, get, update settings, delete, purge, pause,
// resume, stats, the consumer streams open on one), messages (send single and batch, receive with long
// polling, the consumer controls ack, nack, extend, snooze, release and
// dead-letter now, browse, delete by id) and dead letters (browse, replay,
// edit-and-replay, delete). docs/api.md describes it for users, and
// openapi.json (served at GET /v1/openapi.json) for machines; the tests check
// both against the handlers.
//
// Like api/sqs, it decodes a request, calls the broker's front
// (broker.Broker) and encodes the answer; it never calls a backend and never
// decides queue semantics. Every error answer is {"code","message"} with the
// status that one table (errors.go) gives the error.
//
// The message envelope's fields that SQS has no place for (priority,
// maxAttempts, ttlSeconds, correlationId, traceContext) are stored as the
// message attributes broker/model/msgopts.go names (Sluice.Priority,
// Sluice.MaxAttempts, Sluice.TimeToLive, Sluice.CorrelationId, traceparent),
// so that SQS clients see them too; on the way out they are lifted from the
// attributes back into the fields.
package native

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/sluicemq/sluice/api/apicommon"
	"github.com/sluicemq/sluice/broker"
)

// Config configures a Handler (apicommon.Config: the account, region,
// logger, body cap and waiting-receive gate that both protocols share). A
// receive that would wait past the gate's cap is answered 429 throttled with
// Retry-After; one that asks for waitSeconds 0 is still served.
type Config = apicommon.Config

// Handler is the native API as an http.Handler for the paths under /v1/.
// Safe for concurrent use.
type Handler struct {
	broker *broker.Broker
	cfg    Config
	mux    *http.ServeMux
}

// New returns a Handler serving b. Zero Config fields take their defaults.
func New(b *broker.Broker, cfg Config) *Handler {
	h := &Handler{broker: b, cfg: cfg.WithDefaults(), mux: http.NewServeMux()}
	for _, rt := range routes {
		h.mux.HandleFunc(rt.method+" "+rt.path, func(w http.ResponseWriter, r *http.Request) {
			h.serve(w, r, rt)
		})
	}
	return h
}

// route is one operation of the API: a method and a path pattern
// (net/http's ServeMux syntax, which is also OpenAPI's path template syntax
// for these paths) and the function that answers it.
type route struct {
	method, path string
	handle       func(h *Handler, c *call) (any, error)
}

// routes is every operation of the API. openapi.json documents each one,
// and the test TestOpenAPIMatchesRoutes checks that the two agree.
var routes = []route{
	{http.MethodGet, "/v1/openapi.json", (*Handler).openAPI},
	{http.MethodGet, "/v1/overview", (*Handler).overview},

	{http.MethodGet, "/v1/queues", (*Handler).listQueues},
	{http.MethodPost, "/v1/queues", (*Handler).createQueue},
	{http.MethodGet, "/v1/queues/{queue}", (*Handler).getQueue},
	{http.MethodPatch, "/v1/queues/{queue}", (*Handler).updateQueue},
	{http.MethodDelete, "/v1/queues/{queue}", (*Handler).deleteQueue},
	{http.MethodPost, "/v1/queues/{queue}/purge", (*Handler).purgeQueue},
	{http.MethodPost, "/v1/queues/{queue}/pause", (*Handler).pauseQueue},
	{http.MethodPost, "/v1/queues/{queue}/resume", (*Handler).resumeQueue},
	{http.MethodGet, "/v1/queues/{queue}/stats", (*Handler).queueStats},
	{http.MethodGet, "/v1/queues/{queue}/consumers", (*Handler).listConsumers},
	{http.MethodGet, "/v1/queues/{queue}/receivers", (*Handler).listReceivers},

	{http.MethodPost, "/v1/queues/{queue}/messages", (*Handler).sendMessage},
	{http.MethodPost, "/v1/queues/{queue}/messages/batch", (*Handler).sendBatch},
	{http.MethodGet, "/v1/queues/{queue}/messages", (*Handler).browseMessages},
	{http.MethodGet, "/v1/queues/{queue}/messages/{id}", (*Handler).messageStatus},
	{http.MethodDelete, "/v1/queues/{queue}/messages/{id}", (*Handler).deleteMessage},
	{http.MethodPost, "/v1/queues/{queue}/messages/delete", (*Handler).deleteMessages},
	{http.MethodPost, "/v1/queues/{queue}/receive", (*Handler).receive},

	{http.MethodPost, "/v1/queues/{queue}/ack", (*Handler).ack},
	{http.MethodPost, "/v1/queues/{queue}/nack", (*Handler).nack},
	{http.MethodPost, "/v1/queues/{queue}/extend", (*Handler).extend},
	{http.MethodPost, "/v1/queues/{queue}/snooze", (*Handler).snooze},
	{http.MethodPost, "/v1/queues/{queue}/release", (*Handler).release},
	{http.MethodPost, "/v1/queues/{queue}/dead-letter", (*Handler).deadLetterNow},

	{http.MethodGet, "/v1/queues/{queue}/dead-letters", (*Handler).browseDeadLetters},
	{http.MethodPost, "/v1/queues/{queue}/dead-letters/replay", (*Handler).replayDeadLetters},
	{http.MethodPost, "/v1/queues/{queue}/dead-letters/delete", (*Handler).deleteDeadLetters},
	{http.MethodGet, "/v1/queues/{queue}/dead-letters/replays", (*Handler).listReplays},

	{http.MethodGet, "/v1/schedules", (*Handler).listSchedules},
	{http.MethodPost, "/v1/schedules", (*Handler).createSchedule},
	{http.MethodGet, "/v1/schedules/{schedule}", (*Handler).getSchedule},
	{http.MethodDelete, "/v1/schedules/{schedule}", (*Handler).deleteSchedule},
	{http.MethodPost, "/v1/schedules/{schedule}/pause", (*Handler).pauseSchedule},
	{http.MethodPost, "/v1/schedules/{schedule}/resume", (*Handler).resumeSchedule},

	{http.MethodPost, "/v1/backups", (*Handler).createBackup},
}

// served is the answer of a route that wrote its answer itself.
type served struct{}

// call is one request in flight.
type call struct {
	ctx context.Context
	w   *apicommon.StatusWriter
	r   *http.Request
	// queue is the request's {queue} ("" on routes without one).
	queue string
	// status is the success status (0: 200 OK, or 204 for a nil answer).
	status int
	// err is the error the request was answered with, for the log.
	err error
}

// ServeHTTP answers a request under /v1/. A path no route has is 404
// no_such_route; a route asked with another method is 405
// method_not_allowed with an Allow header.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := h.mux.Handler(r); pattern != "" {
		h.mux.ServeHTTP(w, r)
		return
	}
	// No route: the mux's own answer (404, 405 with Allow, or a redirect to
	// the clean path) is recorded, and a 404 or 405 is rewritten as this
	// API's error shape.
	rec := &recorder{header: http.Header{}}
	h.mux.ServeHTTP(rec, r)
	start := time.Now()
	c := &call{ctx: r.Context(), w: &apicommon.StatusWriter{ResponseWriter: w}, r: r}
	defer h.logRequest(c, "", start)
	switch rec.status {
	case http.StatusNotFound:
		h.writeError(c, errorf(errNoSuchRoute, "No route %s %s: see GET /v1/openapi.json for the routes.", r.Method, r.URL.Path))
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", rec.header.Get("Allow"))
		h.writeError(c, errorf(errMethodNotAllowed, "Route %s does not take method %s; it takes %s.", r.URL.Path, r.Method, rec.header.Get("Allow")))
	default:
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		c.w.WriteHeader(rec.status)
		_, _ = w.Write(rec.body)
	}
}

// serve runs one route: it answers the route's result as JSON (204 when
// there is none) or its error.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, rt route) {
	start := time.Now()
	c := &call{ctx: r.Context(), w: &apicommon.StatusWriter{ResponseWriter: w}, r: r, queue: r.PathValue("queue")}
	defer h.logRequest(c, rt.method+" "+rt.path, start)
	defer func() {
		// A bug in a handler must not take the connection down with a
		// half-written answer and no log: it is an internal error.
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			h.cfg.Logger.Error("native API handler panicked", "route", rt.method+" "+rt.path, "panic", p)
			if c.w.Status == 0 {
				h.writeError(c, errorf(errInternal, "panic: %v", p))
			}
		}
	}()
	out, err := rt.handle(h, c)
	if err != nil {
		h.writeError(c, err)
		return
	}
	if _, ok := out.(served); ok {
		return
	}
	status := c.status
	if out == nil {
		if status == 0 {
			status = http.StatusNoContent
		}
		c.w.WriteHeader(status)
		return
	}
	if status == 0 {
		status = http.StatusOK
	}
	h.writeJSON(c, status, out)
}

// logRequest writes the request's log record: debug level, or error level
// with the cause for a 5xx answer (debug again when the client went away).
func (h *Handler) logRequest(c *call, route string, start time.Time) {
	status := c.w.Status
	if status == 0 {
		status = http.StatusOK
	}
	if h.cfg.Requests != nil {
		h.cfg.Requests.Request("native", route, status, time.Since(start))
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
	attrs := []slog.Attr{
		slog.String("api", "native"), slog.String("method", c.r.Method), slog.String("route", route),
		slog.String("queue", c.queue), slog.Int("status", status), slog.Duration("duration", time.Since(start)),
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

// recorder keeps what the mux answers to a request no route matches.
type recorder struct {
	header http.Header
	status int
	body   []byte
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.body = append(r.body, b...)
	return len(b), nil
}
