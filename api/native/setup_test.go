package native

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/embedded"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/internal/testutil"
)

// epoch is where each test's fake clock starts.
var epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// env is one native API for one test: the handler over the embedded
// backend in a temporary directory, on a fake clock, behind an httptest
// server.
type env struct {
	t     *testing.T
	b     *broker.Broker
	clock *clocktest.FakeClock
	h     *Handler
	URL   string

	mu      sync.Mutex
	samples []sample // every answer, in order
}

func setup(t *testing.T, mod ...func(*Config)) *env {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	clock := clocktest.NewFakeClock(epoch)
	backend, err := embedded.Open(embedded.Config{Dir: t.TempDir(), Options: storage.Options{Logger: log, Clock: clock}})
	if err != nil {
		t.Fatal(err)
	}
	front, err := broker.New(backend, broker.Config{Logger: log, BackupDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Logger: log}
	for _, m := range mod {
		m(&cfg)
	}
	h := New(front, cfg)
	e := &env{t: t, b: front, clock: clock, h: h}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pattern := h.mux.Handler(r)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		e.mu.Lock()
		e.samples = append(e.samples, sample{route: pattern, status: rec.Code, body: rec.Body.Bytes()})
		e.mu.Unlock()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	e.URL = srv.URL
	t.Cleanup(func() {
		srv.Close()
		if err := front.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

// sample is one answer of the API, kept for TestOpenAPISamples.
type sample struct {
	// route is the answering route's pattern ("" for no route).
	route  string
	status int
	body   []byte
}

// response is one answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body as a JSON object.
func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("answer %d is not a JSON object: %v: %s", r.status, err, r.body)
	}
	return m
}

// do sends a request; body is a string (sent as is), nil (no body) or any
// other value (sent as JSON).
func (e *env) do(method, path string, body any) response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: raw}
}

// ok sends a request that must answer want, and returns the answer as a
// JSON object (nil for an empty answer).
func (e *env) ok(want int, method, path string, body any) map[string]any {
	e.t.Helper()
	r := e.do(method, path, body)
	if r.status != want {
		e.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, want, r.body)
	}
	if len(r.body) == 0 {
		return nil
	}
	return r.json(e.t)
}

// fails sends a request that must fail with status and code, and returns
// its message.
func (e *env) fails(status int, code, method, path string, body any) string {
	e.t.Helper()
	r := e.do(method, path, body)
	m := r.json(e.t)
	if r.status != status || m["code"] != code {
		e.t.Fatalf("%s %s: %d %v, want %d %s: %s", method, path, r.status, m["code"], status, code, r.body)
	}
	msg, _ := m["message"].(string)
	if msg == "" {
		e.t.Fatalf("%s %s: error without a message: %s", method, path, r.body)
	}
	return msg
}

// createQueue creates a queue with attributes.
func (e *env) createQueue(name string, attrs map[string]string) {
	e.t.Helper()
	e.ok(200, "POST", "/v1/queues", map[string]any{"name": name, "attributes": attrs})
}

// send sends one envelope and returns the message id.
func (e *env) send(queue string, env map[string]any) string {
	e.t.Helper()
	m := e.ok(201, "POST", "/v1/queues/"+queue+"/messages", env)
	id, _ := m["id"].(string)
	if id == "" {
		e.t.Fatalf("send answered no id: %v", m)
	}
	return id
}

// receive receives up to max messages without waiting.
func (e *env) receive(queue string, max int) []map[string]any {
	e.t.Helper()
	m := e.ok(200, "POST", "/v1/queues/"+queue+"/receive", map[string]any{"max": max, "waitSeconds": 0})
	return objects(e.t, m["messages"])
}

// receiveOne receives exactly one message.
func (e *env) receiveOne(queue string) map[string]any {
	e.t.Helper()
	ms := e.receive(queue, 1)
	if len(ms) != 1 {
		e.t.Fatalf("received %d messages, want 1", len(ms))
	}
	return ms[0]
}

// stats reads a queue's stats.
func (e *env) stats(queue string) map[string]any {
	e.t.Helper()
	return e.ok(200, "GET", "/v1/queues/"+queue+"/stats", nil)
}

// wantCounts checks a queue's visible, in-flight and delayed counts.
func (e *env) wantCounts(queue string, visible, inFlight, delayed int) {
	e.t.Helper()
	s := e.stats(queue)
	if s["visible"] != float64(visible) || s["inFlight"] != float64(inFlight) || s["delayed"] != float64(delayed) {
		e.t.Fatalf("stats of %s: %v, want visible %d, inFlight %d, delayed %d", queue, s, visible, inFlight, delayed)
	}
}

// eventually polls cond until it holds, for at most 10 s of real time.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, what, cond)
}

// objects reads a JSON array of objects.
func objects(t *testing.T, v any) []map[string]any {
	t.Helper()
	list, ok := v.([]any)
	if !ok {
		t.Fatalf("not an array: %v", v)
	}
	out := make([]map[string]any, len(list))
	for i, x := range list {
		if out[i], ok = x.(map[string]any); !ok {
			t.Fatalf("item %d is not an object: %v", i, x)
		}
	}
	return out
}
