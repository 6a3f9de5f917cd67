package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/client/stream"
	"github.com/sluicemq/sluice/internal/pgtest"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/metrics"
	"github.com/sluicemq/sluice/server"
)

// TestStreamSeries: sluice_queue_streams counts the consumer streams real
// stream clients (client/stream) open on a queue, and
// sluice_queue_consumer_lag_messages is the queue's visible messages while
// one is open, 0 before and after; a queue without a stream has both at 0.
func TestStreamSeries(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, q := range []string{"jobs", "idle"} {
		if _, err := e.c.CreateQueue(ctx, q, nil); err != nil {
			t.Fatal(err)
		}
	}
	send := func(q string, n int) {
		t.Helper()
		for range n {
			if _, err := e.c.Send(ctx, q, client.Message{Body: "m"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	send("jobs", 5)
	send("idle", 2)
	fams := e.scrape()
	for _, q := range []string{"jobs", "idle"} {
		e.want(fams, "sluice_queue_streams", 0, "queue="+q)
		e.want(fams, "sluice_queue_consumer_lag_messages", 0, "queue="+q)
	}

	// Two streams of one credit each: they hold two messages, three stay
	// visible, and the lag is those three.
	sc, err := stream.Dial(e.b.URL, stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	var cons []*stream.Consumer
	for range 2 {
		con, err := sc.Consume(ctx, stream.ConsumeOptions{Queue: "jobs", Credit: 1, ClientName: "metrics-test"})
		if err != nil {
			t.Fatal(err)
		}
		defer con.Close()
		if _, err := con.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		cons = append(cons, con)
	}
	fams = e.scrape()
	e.want(fams, "sluice_queue_streams", 2, "queue=jobs")
	e.want(fams, "sluice_queue_visible_messages", 3, "queue=jobs")
	e.want(fams, "sluice_queue_consumer_lag_messages", 3, "queue=jobs")
	e.want(fams, "sluice_queue_streams", 0, "queue=idle")
	e.want(fams, "sluice_queue_consumer_lag_messages", 0, "queue=idle")

	// One closes: one stream; its message is back, so four wait.
	if err := cons[0].Close(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "one stream, a lag of 4", func() bool {
		fams := e.scrape()
		n, _ := value(fams, "sluice_queue_streams", "queue=jobs")
		lag, _ := value(fams, "sluice_queue_consumer_lag_messages", "queue=jobs")
		return n == 1 && lag == 4
	})
	// The last closes: no stream, no lag, though messages wait.
	if err := cons[1].Close(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "no stream, no lag", func() bool {
		fams := e.scrape()
		n, _ := value(fams, "sluice_queue_streams", "queue=jobs")
		lag, _ := value(fams, "sluice_queue_consumer_lag_messages", "queue=jobs")
		visible, _ := value(fams, "sluice_queue_visible_messages", "queue=jobs")
		return n == 0 && lag == 0 && visible == 5
	})
}

// TestPostgresStreamSeriesAreEachBrokers: two brokers on one PostgreSQL
// schema, a real stream client's stream open on the first: the first
// reports one stream and a lag of the visible messages, the second (same
// visible gauge) no stream and no lag, as docs/metrics.md says.
func TestPostgresStreamSeriesAreEachBrokers(t *testing.T) {
	t.Parallel()
	url, schema := pgtest.Schema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := func() (*broker.Broker, *metrics.Metrics, string) {
		m := metrics.New()
		cfg := postgres.DefaultConfig()
		cfg.URL, cfg.Schema, cfg.MaxConns = url, schema, 4
		cfg.Options.Observer = m
		be, err := postgres.Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		front, err := broker.New(be, broker.Config{Logger: cfg.Options.Logger, Observer: m})
		if err != nil {
			_ = be.Close()
			t.Fatal(err)
		}
		m.Attach(front)
		scfg := server.DefaultConfig()
		scfg.Addr, scfg.Metrics = "127.0.0.1:0", m
		srv, err := server.New(scfg, front)
		if err != nil {
			_ = front.Close()
			t.Fatal(err)
		}
		if err := srv.Start(ctx); err != nil {
			_ = front.Close()
			t.Fatal(err)
		}
		t.Cleanup(func() {
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer scancel()
			if err := srv.Stop(sctx); err != nil {
				t.Errorf("server Stop: %v", err)
			}
			if err := front.Close(); err != nil {
				t.Errorf("broker Close: %v", err)
			}
		})
		return front, m, "http://" + srv.Addr().String()
	}
	a, ma, urlA := start()
	_, mb, _ := start()
	if _, err := a.CreateQueue(ctx, "pg-stream-jobs", nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(ctx, "pg-stream-jobs", []model.SendEntry{{ID: "1", Body: "a"}, {ID: "2", Body: "b"}, {ID: "3", Body: "c"}}); err != nil {
		t.Fatal(err)
	}
	sc, err := stream.Dial(urlA, stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	con, err := sc.Consume(ctx, stream.ConsumeOptions{Queue: "pg-stream-jobs", Credit: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	if _, err := con.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	gauge := func(m *metrics.Metrics, name string) float64 {
		t.Helper()
		fams, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() != name {
				continue
			}
			for _, mt := range f.GetMetric() {
				for _, l := range mt.GetLabel() {
					if l.GetName() == "queue" && l.GetValue() == "pg-stream-jobs" {
						return mt.GetGauge().GetValue()
					}
				}
			}
		}
		t.Fatalf("%s{queue=pg-stream-jobs}: no series", name)
		return 0
	}
	for _, c := range []struct {
		m                        *metrics.Metrics
		who                      string
		visible, streams, lagged float64
	}{{ma, "the stream's broker", 2, 1, 2}, {mb, "the other broker", 2, 0, 0}} {
		if v, n, l := gauge(c.m, "sluice_queue_visible_messages"), gauge(c.m, "sluice_queue_streams"), gauge(c.m, "sluice_queue_consumer_lag_messages"); v != c.visible || n != c.streams || l != c.lagged {
			t.Errorf("%s: visible %v, streams %v, lag %v; want %v, %v, %v", c.who, v, n, l, c.visible, c.streams, c.lagged)
		}
	}
}
