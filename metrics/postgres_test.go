package metrics_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/metrics"
)

// pgURL is the test database: SLUICE_TEST_POSTGRES, or the local one .ci/run
// starts.
func pgURL() string {
	if u := os.Getenv("SLUICE_TEST_POSTGRES"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// TestPostgresBrokersShareGauges: two brokers on one PostgreSQL schema
// report the same per-queue gauges (the alert rules' max() relies on it),
// both drop a queue's series once another broker deletes it, and each
// reports its pool.
func TestPostgresBrokersShareGauges(t *testing.T) {
	t.Parallel()
	url := pgURL()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		testutil.Missing(t, "postgres", "PostgreSQL is not reachable at "+url+" (set SLUICE_TEST_POSTGRES): "+err.Error())
		return
	}
	sum := sha256.Sum256([]byte(t.Name()))
	schema := "t_" + hex.EncodeToString(sum[:10])
	drop := func() {
		_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	}
	drop()
	t.Cleanup(func() { drop(); conn.Close(context.Background()) })

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
