package native_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/sluicemq/sluice/api/native/wire"
	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/internal/pgtest"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/server"
)

// TestOverviewOnPostgres: on PostgreSQL the overview gives the database's
// size and the pool's figures, and no free disk.
func TestOverviewOnPostgres(t *testing.T) {
	t.Parallel()
	url, schema := pgtest.Schema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(testutil.Writer(t, ""), &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := postgres.DefaultConfig()
	cfg.URL, cfg.Schema, cfg.MaxConns = url, schema, 3
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
	if _, err := front.CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + srv.Addr().String() + "/v1/overview")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ov wire.Overview
	if err := json.NewDecoder(resp.Body).Decode(&ov); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/overview: %d, %v", resp.StatusCode, err)
	}
	if ov.Queues != 1 || ov.Store == nil || ov.Store.Kind != "postgres" || ov.Store.SizeBytes <= 0 || ov.Store.FreeBytes != nil {
		t.Errorf("overview %+v, store %+v: want 1 queue, the database's size and no free disk", ov, ov.Store)
	}
	if ov.Pool == nil || ov.Pool.Max != 3 || ov.Pool.Acquires == 0 {
		t.Errorf("pool %+v: want max 3 and the acquires made", ov.Pool)
	}
}
