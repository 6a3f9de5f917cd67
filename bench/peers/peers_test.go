package peers

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/loadgen"
)

// reachable skips (or fails, when SLUICE_REQUIRE names part) unless addr
// accepts TCP connections.
func reachable(t *testing.T, part, addr, how string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		testutil.Missing(t, part, fmt.Sprintf("%s is not running at %s (%s): %v", part, addr, how, err))
	}
	c.Close()
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// runModes runs produce, drain and steady briefly: every message must come
// back exactly once.
func runModes(t *testing.T, newDriver func(name string) loadgen.Driver) {
	for _, mode := range []loadgen.Mode{loadgen.ModeProduce, loadgen.ModeDrain, loadgen.ModeSteady} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := loadgen.DefaultConfig()
			cfg.Mode, cfg.Producers, cfg.Consumers, cfg.Batch = mode, 2, 2, 3
			cfg.Duration, cfg.Warmup, cfg.Messages = 500*time.Millisecond, 100*time.Millisecond, 300
			// The final drain ends as soon as every message is back; on a
			// loaded CI machine River once needed more than the default 10 s
			// for a steady run's backlog (counted as missing, not lost).
			cfg.TailTimeout = 60 * time.Second
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			s, err := loadgen.Run(ctx, newDriver(fmt.Sprintf("peers_test_%s_%d", mode, time.Now().UnixNano())), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if s.Throughput <= 0 || s.SendErrors+s.RecvErrors+s.DelErrors > 0 {
				t.Fatalf("throughput %.0f errors %d/%d/%d: %s", s.Throughput, s.SendErrors, s.RecvErrors, s.DelErrors, s.FirstError)
			}
			if mode != loadgen.ModeProduce && (s.Missing != 0 || s.Duplicates != 0 || s.Deleted != s.Sent) {
				t.Fatalf("sent %d deleted %d missing %d duplicates %d", s.Sent, s.Deleted, s.Missing, s.Duplicates)
			}
			t.Logf("%s: %.0f msgs/s", s.System, s.Throughput)
		})
	}
}

func TestRabbitMQ(t *testing.T) {
	reachable(t, "rabbitmq", "127.0.0.1:5672", "apt-get install rabbitmq-server")
	url := env("SLUICE_BENCH_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
	runModes(t, func(name string) loadgen.Driver { return &RabbitMQ{URL: url, Queue: name} })
}

func TestJetStream(t *testing.T) {
	reachable(t, "nats", "127.0.0.1:4222", "nats-server -js")
	url := env("SLUICE_BENCH_NATS_URL", "nats://127.0.0.1:4222")
	runModes(t, func(name string) loadgen.Driver { return &JetStream{URL: url, Stream: name, Sync: "lazy"} })
}

func TestRiver(t *testing.T) {
	reachable(t, "postgres", "127.0.0.1:5432", "a local PostgreSQL with trust auth for user postgres")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:5432/postgres")
	if err != nil {
		testutil.Missing(t, "postgres", "cannot connect to PostgreSQL as postgres: "+err.Error())
	}
	var exists bool
	_ = conn.QueryRow(ctx, "select exists(select 1 from pg_database where datname = 'sluice_bench_test')").Scan(&exists)
	if !exists {
		if _, err := conn.Exec(ctx, "create database sluice_bench_test"); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close(ctx)
	runModes(t, func(name string) loadgen.Driver {
		return &River{URL: "postgres://postgres@127.0.0.1:5432/sluice_bench_test", Queue: name, Workers: 20}
	})
}
