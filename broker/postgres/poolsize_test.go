package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/postgres"
)

func TestSetsPoolMaxConns(t *testing.T) {
	t.Parallel()
	for conn, want := range map[string]bool{
		"postgres://u@h:5432/db":                                   false,
		"postgres://u@h:5432/db?sslmode=disable&pool_max_conns=64": true,
		"postgresql://u@h/db?pool_max_conns=8":                     true,
		"postgres://u@h/db?application_name=pool_max_conns":        false,
		"host=h dbname=db pool_max_conns=12":                       true,
		"host=h dbname=db application_name=pool_max_conns_watcher": false,
		"host=h dbname=db":                                         false,
		"postgres://u:pa#ss@h/db?pool_max_conns=64":                true,
		"host=h pool_max_conns = 12":                               true,
		"host=h application_name='x pool_max_conns=5'":             false,
	} {
		if got := postgres.SetsPoolMaxConns(conn); got != want {
			t.Errorf("setsPoolMaxConns(%q) = %v, want %v", conn, got, want)
		}
	}
}

// TestPoolMaxConnsInURL: pool_max_conns in the store URL sizes the pool
// (sluice serve --store has no other way to), over Config.MaxConns; without
// it Config.MaxConns does; above 1,000 it is refused.
func TestPoolMaxConnsInURL(t *testing.T) {
	t.Parallel()
	url := requirePostgres(t)
	schema := schemaFor(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range []struct {
		url  string
		want int
	}{
		{url, 7},
		{url + sep + "pool_max_conns=3", 3},
	} {
		cfg := testConfig(c.url, schema)
		cfg.MaxConns = 7 // no default of pgxpool's
		be, err := postgres.Open(ctx, cfg)
		if err != nil {
			t.Fatalf("Open(%s): %v", c.url, err)
		}
		stats, _ := be.PoolStats()
		got := stats.Max
		if err := be.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if got != c.want {
			t.Errorf("Open(%s): pool of %d connections, want %d", c.url, got, c.want)
		}
	}
	be, err := postgres.Open(ctx, testConfig(url+sep+"pool_max_conns=1001", schema))
	if err == nil {
		be.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "pool_max_conns") {
		t.Errorf("Open with pool_max_conns=1001: %v, want an error naming pool_max_conns", err)
	}
}
