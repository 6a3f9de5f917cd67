package live

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// The routes Live answers (server mounts them; docs/api.md and
// docs/dashboard.md describe them).
const (
	StatsPath   = "GET /v1/stats"
	EventsPath  = "GET /v1/events"
	HistoryPath = "GET /v1/queues/{queue}/history"
)

// Register mounts the three routes on mux. done ends every open event
// stream when it is closed, beside Stop (server passes its drain, so that
// http.Server.Shutdown never waits on a stream).
func (l *Live) Register(mux *http.ServeMux, done <-chan struct{}) {
	mux.HandleFunc(StatsPath, l.serveStats)
	mux.HandleFunc(EventsPath, func(w http.ResponseWriter, r *http.Request) { l.serveEvents(w, r, done) })
	mux.HandleFunc(HistoryPath, l.serveHistory)
}

// writeError answers the native API's error shape {"code","message"}.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"code": code, "message": msg})
}

// queryParams checks that r has no query parameter but the allowed ones.
func queryParams(w http.ResponseWriter, r *http.Request, allowed ...string) bool {
	q := r.URL.Query()
next:
	for k := range q {
		for _, a := range allowed {
			if k == a {
				continue next
			}
		}
		writeError(w, http.StatusBadRequest, "unknown_field", fmt.Sprintf("Unknown query parameter %q: this route takes %v.", k, allowed))
		return false
	}
	return true
}

// serveStats answers GET /v1/stats: the latest snapshot's JSON, encoded
// once per tick for every client.
func (l *Live) serveStats(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r) {
		return
	}
	s, err := l.latestSnapshot(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "internal_error", "The queues could not be read: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(s.body)
}

// serveHistory answers GET /v1/queues/{queue}/history.
func (l *Live) serveHistory(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r) {
		return
	}
	name := r.PathValue("queue")
	h, ok := l.QueueHistory(name)
	if !ok {
		// Not sampled yet: a queue created since the last sample has a
		// history, an empty one (a 404 would tell a dashboard that has just
		// created it that it does not exist).
		b := l.front.Load()
		if b == nil {
			writeError(w, http.StatusServiceUnavailable, "unavailable", "The broker is starting: try again in a second.")
			return
		}
		if _, err := b.GetQueue(r.Context(), name); errors.Is(err, model.ErrQueueDoesNotExist) {
			writeError(w, http.StatusNotFound, "queue_not_found",
				fmt.Sprintf("Queue %q does not exist. List the queues with GET /v1/stats.", name))
			return
		} else if err != nil {
			l.log.Warn("live: history: reading the queue failed", "queue", name, "err", err)
			writeError(w, http.StatusServiceUnavailable, "unavailable",
				"The broker could not read the queue: try again; if it persists, the broker's log says why.")
			return
		}
		h = History{Queue: name, StepSeconds: l.cfg.HistoryStep.Seconds(), Points: []Point{}}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_ = json.NewEncoder(w).Encode(h)
}

// streamWriteTimeout bounds the write of one event: a client that reads
// nothing for this long is dropped (its connection is closed).
const streamWriteTimeout = 10 * time.Second

// serveEvents answers GET /v1/events: a server-sent event "stats" with the
// latest snapshot at once, then one per sample; a comment line after
// KeepAlive without one. ?queue=NAME keeps that queue only. The stream
// ends when the client goes, when done is closed or at Stop. A client that
// reads slowly holds at most one pending snapshot (it skips ticks), so its
// memory stays bounded.
func (l *Live) serveEvents(w http.ResponseWriter, r *http.Request, done <-chan struct{}) {
	if !queryParams(w, r, "queue") {
		return
	}
	queue := r.URL.Query().Get("queue")
	rc := http.NewResponseController(w)
	ch, unsubscribe := l.subscribe()
	defer unsubscribe()
	first, err := l.latestSnapshot(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "internal_error", "The queues could not be read: "+err.Error())
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	// The server's WriteTimeout would cut a stream after 45 s: each write
	// sets its own deadline instead. The read deadline (ReadTimeout) is
	// cleared too, so that its passing cannot end the request's context
	// (TestEventsOutliveServerTimeouts).
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	var buf bytes.Buffer
	event := func(s *snapshot) bool {
		buf.Reset()
		buf.WriteString("event: stats\ndata: ")
		if queue == "" {
			buf.Write(s.body)
		} else {
			one := s.Snapshot
			one.Queues = []QueueStats{}
			if i, ok := s.index[queue]; ok {
				one.Queues = s.Queues[i : i+1]
			}
			b, err := json.Marshal(one)
			if err != nil {
				return false
			}
			buf.Write(b)
		}
		buf.WriteString("\n\n")
		return write(buf.Bytes())
	}
	if !event(first) {
		return
	}
	keep := time.NewTicker(l.cfg.KeepAlive)
	defer keep.Stop()
	last := first
	for {
		select {
		case <-r.Context().Done():
			return
		case <-done:
			return
		case <-l.done:
			return
		case s := <-ch:
			if s == last {
				continue
			}
			last = s
			if !event(s) {
				return
			}
			keep.Reset(l.cfg.KeepAlive)
		case <-keep.C:
			if !write([]byte(": keep-alive\n\n")) {
				return
			}
		}
	}
}
