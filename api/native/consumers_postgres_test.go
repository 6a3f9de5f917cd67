package native_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/client/stream"
	"github.com/sluicemq/sluice/internal/pgtest"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/server"
)

// TestConsumersAcrossBrokers: two brokers (front and server each) on one
// PostgreSQL schema; a real stream client opens a stream on the first, and
// the second's GET /v1/queues/{queue}/consumers lists it with the first's
// broker name, then forgets it once it closes.
func TestConsumersAcrossBrokers(t *testing.T) {
	t.Parallel()
	url, schema := pgtest.Schema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(testutil.Writer(t, ""), &slog.HandlerOptions{Level: slog.LevelWarn}))
	start := func() (*broker.Broker, string) {
		cfg := postgres.DefaultConfig()
		cfg.URL, cfg.Schema, cfg.MaxConns = url, schema, 4
		cfg.Options.Logger = log
		be, err := postgres.Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		front, err := broker.New(be, broker.Config{Logger: log})
		if err != nil {
			_ = be.Close()
			t.Fatal(err)
		}
		scfg := server.DefaultConfig()
		scfg.Addr, scfg.Logger = "127.0.0.1:0", log
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
		return front, "http://" + srv.Addr().String()
	}
	a, urlA := start()
	_, urlB := start()
	if _, err := a.CreateQueue(ctx, "shared-jobs", nil, nil); err != nil {
		t.Fatal(err)
	}
	listed := func(base string) []map[string]any {
		status, out := getJSON(t, base+"/v1/queues/shared-jobs/consumers")
		cs, ok := out["consumers"].([]any)
		if status != 200 || !ok {
			t.Fatalf("GET consumers on %s: %d %v", base, status, out)
		}
		ms := make([]map[string]any, len(cs))
		for i, c := range cs {
			ms[i] = c.(map[string]any)
		}
		return ms
	}

	sc, err := stream.Dial(urlA, stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	con, err := sc.Consume(ctx, stream.ConsumeOptions{Queue: "shared-jobs", Credit: 4, ClientName: "on-a"})
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	onA := listed(urlA)
	if len(onA) != 1 || onA[0]["id"] != con.ID() || onA[0]["broker"] == "" {
		t.Fatalf("broker A lists %v, want its stream %s with its broker name", onA, con.ID())
	}
	var onB []map[string]any
	testutil.Eventually(t, 20*time.Second, "broker B lists A's stream", func() bool {
		onB = listed(urlB)
		return len(onB) == 1
	})
	if c := onB[0]; c["id"] != con.ID() || c["broker"] != onA[0]["broker"] || c["clientName"] != "on-a" || c["credit"] != float64(4) {
		t.Errorf("broker B lists %v; want A's stream %s (broker %v, clientName on-a, credit 4)", c, con.ID(), onA[0]["broker"])
	}

	if err := con.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "both brokers list no stream", func() bool {
		return len(listed(urlA)) == 0 && len(listed(urlB)) == 0
	})
}
