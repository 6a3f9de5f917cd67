package metrics_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/testbroker"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/metrics"
	"github.com/sluicemq/sluice/server"
)

// env is a broker with metrics, a client, and the scrape URL.
type env struct {
	t   *testing.T
	b   *testbroker.Broker
	c   *client.Client
	log *testutil.Buffer
}

func setup(t *testing.T) *env {
	t.Helper()
	m := metrics.New()
	logs := &testutil.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	b := testbroker.Start(t, testbroker.Config{Observer: m, Logger: log, Server: func(c *server.Config) { c.Metrics = m }})
	m.Attach(b.Front)
	c, err := client.New(b.URL, client.WithRetries(0)) // a refused send is counted once
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &env{t: t, b: b, c: c, log: logs}
}

// scrape GETs /metrics and parses it.
func (e *env) scrape() map[string]*dto.MetricFamily {
	e.t.Helper()
	resp, err := http.Get(e.b.URL + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		e.t.Fatalf("GET /metrics: %s\n%s", resp.Status, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		e.t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	return fams
}

// value is the value of the series of family name whose labels include
// want ("k=v" pairs), and whether there is one.
func value(fams map[string]*dto.MetricFamily, name string, want ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		for _, w := range want {
			k, v, _ := strings.Cut(w, "=")
			if labels[k] != v {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

func (e *env) want(fams map[string]*dto.MetricFamily, name string, v float64, labels ...string) {
	e.t.Helper()
	got, ok := value(fams, name, labels...)
	if !ok {
		e.t.Errorf("%s%v: no series", name, labels)
		return
	}
	if got != v {
		e.t.Errorf("%s%v = %v, want %v", name, labels, got, v)
	}
}

func (e *env) absent(fams map[string]*dto.MetricFamily, name string, labels ...string) {
	e.t.Helper()
	if got, ok := value(fams, name, labels...); ok {
		e.t.Errorf("%s%v = %v, want no series", name, labels, got)
	}
}

// TestQueueSeries drives a queue through sends, receives, acks, nacks, a
// dead letter and a refused send, and checks every per-queue series; then
// deletes it and checks its series go.
func TestQueueSeries(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	dlq, err := e.c.CreateQueue(ctx, "jobs-dlq", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.CreateQueue(ctx, "jobs", map[string]string{
		"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":1}`, dlq.ARN),
		"MaxDepth":      "3",
	}); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"a", "b", "c"} {
		if _, err := e.c.Send(ctx, "jobs", client.Message{Body: b}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.c.Send(ctx, "jobs", client.Message{Body: "d"}); err == nil {
		t.Fatal("a send past MaxDepth 3 succeeded")
	}
	ds, err := e.c.Receive(ctx, "jobs", client.MaxMessages(2), client.WaitTime(0))
	if err != nil || len(ds) != 2 {
		t.Fatalf("Receive = %d, %v; want 2", len(ds), err)
	}
	if err := e.c.Ack(ctx, "jobs", ds[0].Receipt); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Nack(ctx, "jobs", ds[1].Receipt, "boom", 0); err != nil { // its last attempt: dead-lettered
		t.Fatal(err)
	}

	f := e.scrape()
	e.want(f, "sluice_queues", 2)
	e.want(f, "sluice_queue_visible_messages", 1, "queue=jobs")
	e.want(f, "sluice_queue_inflight_messages", 0, "queue=jobs")
	e.want(f, "sluice_queue_delayed_messages", 0, "queue=jobs")
	e.want(f, "sluice_queue_visible_messages", 1, "queue=jobs-dlq")
	e.want(f, "sluice_queue_dead_letters", 1, "queue=jobs")
	e.absent(f, "sluice_queue_dead_letters", "queue=jobs-dlq")
	e.want(f, "sluice_queue_max_depth", 3, "queue=jobs")
	e.want(f, "sluice_queue_paused", 0, "queue=jobs")
	e.want(f, "sluice_messages_sent_total", 3, "queue=jobs")
	e.want(f, "sluice_messages_received_total", 2, "queue=jobs")
	e.want(f, "sluice_messages_deleted_total", 1, "queue=jobs")
	e.want(f, "sluice_messages_nacked_total", 1, "queue=jobs")
	e.want(f, "sluice_messages_dead_lettered_total", 1, "queue=jobs")
	e.want(f, "sluice_sends_refused_total", 1, "queue=jobs", "reason=max_depth")
	if age, ok := value(f, "sluice_queue_oldest_message_age_seconds", "queue=jobs"); !ok || age < 0 || age > 60 {
		t.Errorf("oldest message age = %v, %v; want 0..60 s", age, ok)
	}
	if got, ok := value(f, "sluice_requests_total", "api=native", "action=POST /v1/queues/{queue}/messages", "code=201"); !ok || got != 3 {
		t.Errorf("native sends answered 201 = %v, %v; want 3", got, ok)
	}
	if _, ok := value(f, "sluice_request_duration_seconds", "api=native", "action=POST /v1/queues/{queue}/receive"); !ok {
		t.Error("no receive latency histogram")
	}
	if n, ok := value(f, "sluice_store_sync_duration_seconds"); !ok || n == 0 {
		t.Errorf("store syncs observed = %v, %v; want some", n, ok)
	}

	if err := e.c.DeleteQueue(ctx, "jobs"); err != nil {
		t.Fatal(err)
	}
	f = e.scrape()
	e.absent(f, "sluice_queue_visible_messages", "queue=jobs")
	e.want(f, "sluice_messages_sent_total", 3, "queue=jobs") // counters stay one scrape more
	f = e.scrape()
	e.absent(f, "sluice_messages_sent_total", "queue=jobs")
	e.absent(f, "sluice_sends_refused_total", "queue=jobs")
	e.want(f, "sluice_queue_visible_messages", 1, "queue=jobs-dlq")
}

// TestActionLabelBounded: an SQS action name the client makes up is
// counted as "other", so a client cannot grow the label set.
func TestActionLabelBounded(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, op := range []string{"Bogus1", "Bogus2", "ListQueues"} {
		req, _ := http.NewRequest(http.MethodPost, e.b.URL+"/", strings.NewReader("{}"))
		req.Header.Set("X-Amz-Target", "AmazonSQS."+op)
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	f := e.scrape()
	e.want(f, "sluice_requests_total", 2, "api=sqs", "action=other", "code=400")
	e.want(f, "sluice_requests_total", 1, "api=sqs", "action=ListQueues", "code=200")
	for _, m := range f["sluice_requests_total"].Metric {
		for _, l := range m.Label {
			if strings.HasPrefix(l.GetValue(), "Bogus") {
				t.Errorf("label %s=%s: a made-up action became a label", l.GetName(), l.GetValue())
			}
		}
	}
}

// BenchmarkScrape1000Queues: one /metrics scrape (gather and encode) with
// 1,000 queues that all have counters.
func BenchmarkScrape1000Queues(b *testing.B) {
	m := metrics.New()
	br := testbroker.Start(b, testbroker.Config{Observer: m, Server: func(c *server.Config) { c.Metrics = m }})
	m.Attach(br.Front)
	c, err := client.New(br.URL)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for i := range 1000 {
		name := fmt.Sprintf("q%04d", i)
		if _, err := c.CreateQueue(ctx, name, nil); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Send(ctx, name, client.Message{Body: "x"}); err != nil {
			b.Fatal(err)
		}
	}
	h := m.Handler()
	b.ReportAllocs()
	b.ResetTimer()
	var size int
	for b.Loop() {
		rec := &countWriter{h: http.Header{}}
		req, _ := http.NewRequest(http.MethodGet, "/metrics", nil)
		h.ServeHTTP(rec, req)
		size = rec.n
	}
	b.ReportMetric(float64(size), "bytes/scrape")
}

// countWriter is an http.ResponseWriter that counts the body's bytes.
type countWriter struct {
	h http.Header
	n int
}

func (w *countWriter) Header() http.Header { return w.h }
func (w *countWriter) WriteHeader(int)     {}
func (w *countWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	return len(p), nil
}
