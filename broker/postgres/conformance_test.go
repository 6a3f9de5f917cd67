package postgres_test

import (
	"context"
	"sync"
	"testing"

	"github.com/sluicemq/sluice/broker/brokertest"
	"github.com/sluicemq/sluice/broker/internal/archive"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/broker/storage"
)

// TestConformance runs the shared backend suite (broker/brokertest) against
// the PostgreSQL backend, each subtest in its own schema; Reopen closes the
// backend and opens the same schema again (a broker restart).
func TestConformance(t *testing.T) {
	url := requirePostgres(t)
	var (
		mu      sync.Mutex
		schemas = map[storage.Backend]string{}
		dirs    = map[string]string{} // each schema's archive directory, in its test
	)
	open := func(t *testing.T, schema string, opts storage.Options) storage.Backend {
		t.Helper()
		cfg := testConfig(url, schema)
		cfg.Options = opts
		mu.Lock()
		dir, ok := dirs[schema]
		if !ok {
			dir = t.TempDir()
			dirs[schema] = dir
			t.Cleanup(func() {
				mu.Lock()
				delete(dirs, schema)
				mu.Unlock()
			})
		}
		mu.Unlock()
		cfg.Archive = archive.Config{Dir: dir, ID: "conformance"}
		b, err := postgres.Open(context.Background(), cfg)
		if err != nil {
			t.Fatalf("postgres.Open(schema %s): %v", schema, err)
		}
		t.Cleanup(func() {
			if err := b.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			mu.Lock()
			delete(schemas, b)
			mu.Unlock()
		})
		mu.Lock()
		schemas[b] = schema
		mu.Unlock()
		return b
	}
	brokertest.Run(t, brokertest.Harness{
		// Five histories at CI scale: each takes about 2.5 s here (SLUICE_SCALE=full runs 200).
		ModelChecks: 5,
		Open: func(t *testing.T, opts storage.Options) storage.Backend {
			return open(t, pooledSchema(t), opts)
		},
		Reopen: func(t *testing.T, b storage.Backend, opts storage.Options) storage.Backend {
			t.Helper()
			mu.Lock()
			schema, ok := schemas[b]
			mu.Unlock()
			if !ok {
				t.Fatal("Reopen of a backend this harness did not open")
			}
			if err := b.Close(); err != nil {
				t.Fatalf("Close before reopening: %v", err)
			}
			return open(t, schema, opts)
		},
		ArchiveDir: func(b storage.Backend) string {
			mu.Lock()
			defer mu.Unlock()
			return dirs[schemas[b]]
		},
	})
}
