package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/internal/pgtest"
	"github.com/sluicemq/sluice/metrics"
)

// TestPostgresBrokersShareGauges: two brokers on one PostgreSQL schema
// report the same per-queue gauges (the alert rules' max() relies on it),
// both drop a queue's series once another broker deletes it, and each
// reports its pool.
func TestPostgresBrokersShareGauges(t *testing.T) {
	t.Parallel()
	url, schema := pgtest.Schema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func() (*broker.Broker, *metrics.Metrics) {
		m := metrics.New()
		cfg := postgres.DefaultConfig()
		cfg.URL, cfg.Schema, cfg.MaxConns = url, schema, 4
		cfg.Options.Observer = m
		be, err := postgres.Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = be.Close() })
		f, err := broker.New(be, broker.Config{Logger: cfg.Options.Logger, Observer: cfg.Options.Observer})
		if err != nil {
			t.Fatal(err)
		}
		m.Attach(f)
		return f, m
	}
	a, ma := open()
	_, mb := open()

	gauge := func(m *metrics.Metrics, name, queue string) (float64, bool) {
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
				ok := queue == ""
				for _, l := range mt.GetLabel() {
					if l.GetName() == "queue" && l.GetValue() == queue {
						ok = true
					}
				}
				if ok {
					return mt.GetGauge().GetValue(), true
				}
			}
		}
		return 0, false
	}

	if _, err := a.CreateQueue(ctx, "pg-orders-dlq", nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateQueue(ctx, "pg-orders", map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:pg-orders-dlq","maxReceiveCount":"3"}`,
	}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(ctx, "pg-orders", []model.SendEntry{{ID: "1", Body: "a"}, {ID: "2", Body: "b"}, {ID: "3", Body: "c"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(ctx, "pg-orders-dlq", []model.SendEntry{{ID: "1", Body: "dead"}}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*metrics.Metrics{ma, mb} {
		if v, ok := gauge(m, "sluice_queue_visible_messages", "pg-orders"); !ok || v != 3 {
			t.Errorf("visible of pg-orders: %v (present %v), want 3 on both brokers", v, ok)
		}
		if v, ok := gauge(m, "sluice_queue_dead_letters", "pg-orders"); !ok || v != 1 {
			t.Errorf("dead letters of pg-orders: %v (present %v), want 1 on both brokers", v, ok)
		}
		if _, ok := gauge(m, "sluice_pg_pool_max_connections", ""); !ok {
			t.Errorf("no sluice_pg_pool_max_connections")
		}
	}
	if err := a.DeleteQueue(ctx, "pg-orders"); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*metrics.Metrics{ma, mb} {
		if v, ok := gauge(m, "sluice_queue_visible_messages", "pg-orders"); ok {
			t.Errorf("visible of the deleted pg-orders still reported: %v", v)
		}
	}
}
