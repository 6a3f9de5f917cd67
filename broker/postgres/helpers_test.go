package postgres_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/broker/storage"
)

// testURL is the database the tests use: SLUICE_TEST_POSTGRES, or the local
// PostgreSQL that .ci/run starts (trust auth, database test).
func testURL() string {
	if u := os.Getenv("SLUICE_TEST_POSTGRES"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

var (
	reachOnce sync.Once
	reachErr  error
)

// requirePostgres skips the test (with the reason) when PostgreSQL is not
// reachable, unless SLUICE_REQUIRE contains "postgres": then it fails.
func requirePostgres(t testing.TB) string {
	t.Helper()
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, testURL())
		if err != nil {
			reachErr = err
			return
		}
		reachErr = conn.Ping(ctx)
		conn.Close(ctx)
	})
	if reachErr != nil {
		msg := "PostgreSQL is not reachable at " + testURL() + " (set SLUICE_TEST_POSTGRES, or start it: see docs/postgres.md): " + reachErr.Error()
		if strings.Contains(os.Getenv("SLUICE_REQUIRE"), "postgres") {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return testURL()
}

// schemaFor returns a schema name unique to the test (a hash of its name)
// and drops it at the end of the test (after the backends are closed: the
// cleanup is registered first, so it runs last).
func schemaFor(t testing.TB) string {
	t.Helper()
	url := requirePostgres(t)
	sum := sha256.Sum256([]byte(t.Name()))
	schema := "t_" + hex.EncodeToString(sum[:10])
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Logf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Logf("drop schema %s: %v", schema, err)
		}
	}
	drop() // a previous run may have left it
	t.Cleanup(drop)
	return schema
}

// testConfig returns a Config for schema with a small pool.
func testConfig(url, schema string) postgres.Config {
	cfg := postgres.DefaultConfig()
	cfg.URL, cfg.Schema, cfg.MaxConns = url, schema, 4
	return cfg
}

// front returns the front over be (the broker every API drives).
func front(t testing.TB, be *postgres.Backend, opts storage.Options) *broker.Broker {
	t.Helper()
	f, err := broker.New(be, broker.Config{Logger: opts.Logger, Observer: opts.Observer})
	if err != nil {
		t.Fatalf("broker.New: %v", err)
	}
	backends.Store(f, be)
	return f
}

// backends maps each front that front made to its backend (the front does
// not hand its backend out).
var backends sync.Map // *broker.Broker -> *postgres.Backend

// raw returns the PostgreSQL backend under the front f.
func raw(f *broker.Broker) *postgres.Backend {
	be, _ := backends.Load(f)
	return be.(*postgres.Backend)
}
