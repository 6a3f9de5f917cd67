package postgres_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/internal/pgtest"
)

// requirePostgres returns the database the tests use (pgtest.URL: the
// local PostgreSQL that .ci/run starts, or SLUICE_TEST_POSTGRES), skipping
// the test with the reason when it is not reachable (failing it when
// SLUICE_REQUIRE names postgres).
func requirePostgres(t testing.TB) string { return pgtest.Require(t, pgtest.URL()) }

// testURL is the database the tests use, unchecked (pgtest.URL).
func testURL() string { return pgtest.URL() }

// schemaFor returns a schema name unique to the test, which does not exist
// yet and is dropped at the end of the test (pgtest.Schema).
func schemaFor(t testing.TB) string {
	t.Helper()
	_, schema := pgtest.Schema(t)
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

// The schema pool. Creating a schema runs every migration (about 30 tables,
// indexes and functions: a fifth of a second here), and the conformance
// suite alone opens hundreds of backends. A finished test's schema is
// emptied instead (every table but migrations truncated, its sequences
// restarted: what a new schema holds; deleting the few rows a test leaves
// is four times faster than a TRUNCATE, which makes new files for every
// table and index, and than making a schema) and handed to the next test that asks
// for a pooled one; the pool's schemas are dropped when the test binary
// ends (TestMain).
var schemaPool struct {
	mu   sync.Mutex
	free []string // migrated and empty
	all  []string // every pooled schema made, to drop at the end
	n    int
}

// pooledSchema returns a migrated, empty schema for the test alone, from
// the pool, or a new one (migrated by the Open that first uses it). It goes
// back to the pool, emptied, when the test ends (after the backends the
// test opens later are closed: cleanups run last-registered first).
func pooledSchema(t testing.TB) string {
	t.Helper()
	url := requirePostgres(t)
	owner := pgtest.Owner(t, url) // in the name; the pools of killed test processes are swept
	schemaPool.mu.Lock()
	var schema string
	if n := len(schemaPool.free); n > 0 {
		schema, schemaPool.free = schemaPool.free[n-1], schemaPool.free[:n-1]
	} else {
		schemaPool.n++
		schema = fmt.Sprintf("tp_%s_%d", owner, schemaPool.n)
		schemaPool.all = append(schemaPool.all, schema)
	}
	schemaPool.mu.Unlock()
	t.Cleanup(func() {
		if err := emptySchema(url, schema); err != nil {
			t.Logf("pooled schema %s not emptied, so not reused: %v", schema, err)
			return
		}
		schemaPool.mu.Lock()
		schemaPool.free = append(schemaPool.free, schema)
		schemaPool.mu.Unlock()
	})
	return schema
}

// emptySchema deletes the rows of every table of schema but migrations and
// restarts its sequences. A schema that does not exist (no Open used it) is left
// alone.
func emptySchema(url, schema string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var tables, seqs []string
	if err := conn.QueryRow(ctx, `SELECT coalesce(array_agg(quote_ident(tablename)), '{}') FROM pg_tables
		WHERE schemaname = $1 AND tablename <> 'migrations'`, schema).Scan(&tables); err != nil {
		return err
	}
	if err := conn.QueryRow(ctx, `SELECT coalesce(array_agg(quote_ident(sequencename)), '{}') FROM pg_sequences
		WHERE schemaname = $1`, schema).Scan(&seqs); err != nil {
		return err
	}
	if len(tables) == 0 {
		return nil
	}
	ident := pgx.Identifier{schema}.Sanitize()
	// The tables that others reference last (queues), with the foreign
	// keys checked once at commit.
	stmt := "SET LOCAL search_path TO " + ident + "; SET CONSTRAINTS ALL DEFERRED;"
	slices.SortFunc(tables, func(a, b string) int { return strings.Compare(queuesLast(a), queuesLast(b)) })
	for _, tb := range tables {
		stmt += " DELETE FROM " + tb + ";"
	}
	for _, s := range seqs {
		stmt += " ALTER SEQUENCE " + s + " RESTART;"
	}
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, stmt, pgx.QueryExecModeSimpleProtocol)
		return err
	})
}

// queuesLast sorts table names with queues and move_tasks last.
func queuesLast(name string) string {
	if name == "queues" || name == "move_tasks" {
		return "~" + name
	}
	return name
}

// dropPooledSchemas drops every schema the pool made (TestMain, after the
// tests).
func dropPooledSchemas() {
	schemaPool.mu.Lock()
	all := schemaPool.all
	schemaPool.mu.Unlock()
	if len(all) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, testURL())
	if err != nil {
		fmt.Fprintf(os.Stderr, "drop the pooled schemas: %v\n", err)
		return
	}
	defer conn.Close(ctx)
	for _, s := range all {
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s}.Sanitize()+" CASCADE"); err != nil {
			fmt.Fprintf(os.Stderr, "drop the pooled schema %s: %v\n", s, err)
		}
	}
}

// schemaAtVersion makes a schema of the test's own migrated to version (an
// older broker's schema, for the migration tests) and a connection to the
// database, closed when the test ends.
func schemaAtVersion(t *testing.T, version int) (url, schema string, conn *pgx.Conn) {
	t.Helper()
	url = requirePostgres(t)
	schema = schemaFor(t)
	ctx := context.Background()
	if err := postgres.MigrateTo(ctx, url, schema, version); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return url, schema, conn
}

// oldQueueConfig is a queue's config as brokers before migration 11 stored
// it: none of the dedup, limit or time-to-live fields.
const oldQueueConfig = `{"VisibilityTimeout":30000000000,"Delay":0,"Retention":345600000000000,"MaxMessageSize":1048576,` +
	`"ReceiveWaitTime":0,"Redrive":null,"RedriveAllow":"","Fifo":false,"ContentBasedDedup":false,"DedupScope":"",` +
	`"ThroughputLimit":"","Policy":"","Extra":{"SqsManagedSseEnabled":"true"}}`

// insertOldQueue stores queue "q" in schema (at an older version, through
// conn: schemaAtVersion) as an older broker did, with oldQueueConfig, sent
// and modified at at, and one ready message a body, visible at at.
func insertOldQueue(t *testing.T, conn *pgx.Conn, schema string, at time.Time, bodies ...string) (mid int64) {
	t.Helper()
	ctx := context.Background()
	tbl := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	if err := conn.QueryRow(ctx, `INSERT INTO `+tbl("queues")+` (name, config, created_at, modified_at)
		VALUES ('q', $1, $2, $2) RETURNING mid`, []byte(oldQueueConfig), at).Scan(&mid); err != nil {
		t.Fatal(err)
	}
	for i, body := range bodies {
		if _, err := conn.Exec(ctx, `INSERT INTO `+tbl("messages")+` (queue_id, state, visible_at, sent_at, message_id, body)
			VALUES ($1, 'r', $2, $2, $3, $4)`, mid, at, fmt.Sprintf("00000000-0000-4000-8000-%012d", i+1), body); err != nil {
			t.Fatal(err)
		}
	}
	if len(bodies) > 0 {
		if _, err := conn.Exec(ctx, `INSERT INTO `+tbl("counts")+` (queue_id, shard, ready) VALUES ($1, 0, $2)`, mid, len(bodies)); err != nil {
			t.Fatal(err)
		}
	}
	return mid
}

// openOnClock opens a backend on schema with a fake clock reading start, and
// its front; both close at the end of the test.
func openOnClock(t *testing.T, url, schema string, start time.Time) (*postgres.Backend, *broker.Broker, *clocktest.FakeClock) {
	t.Helper()
	cfg := testConfig(url, schema)
	clock := clocktest.NewFakeClock(start)
	cfg.Clock = clock
	be, err := postgres.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	return be, front(t, be, cfg.Options), clock
}
