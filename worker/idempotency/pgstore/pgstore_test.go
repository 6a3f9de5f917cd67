package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/sluicemq/sluice/internal/pgtest"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/worker/idempotency"
	"github.com/sluicemq/sluice/worker/idempotency/pgstore"
	"github.com/sluicemq/sluice/worker/idempotency/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// setup returns a pool on a fresh database (closed at the end of the test)
// holding a payments table (the business writes).
func setup(t *testing.T) *pgxpool.Pool {
	t.Helper()
	url := pgtest.Database(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	// Room for the concurrent deliveries and the test's own queries.
	pcfg.MaxConns = 12
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `CREATE TABLE payments (id serial PRIMARY KEY, employee text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return pool
}

func newStore(t *testing.T, pool *pgxpool.Pool, cfg pgstore.Config) *pgstore.Store {
	t.Helper()
	s, err := pgstore.New(context.Background(), pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func payments(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM payments`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// pay is the business write.
func pay(employee string) func(ctx context.Context, tx pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO payments (employee) VALUES ($1)`, employee)
		return err
	}
}

// TestStore runs the idempotency.Store suite (Do's modes included) on the
// PostgreSQL store: one table per subtest in one database.
func TestStore(t *testing.T) {
	pool := setup(t)
	var n atomic.Int32
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		return newStore(t, pool, pgstore.Config{Table: fmt.Sprintf("keys_%d", n.Add(1))})
	})
}

func TestInTx(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	ctx := context.Background()
	s := newStore(t, pool, pgstore.Config{})

	t.Run("ExactlyOnce", func(t *testing.T) {
		for i, want := range []bool{true, false, false} {
			ran, err := s.InTx(ctx, "pay/ada", pay("ada"))
			if err != nil || ran != want {
				t.Fatalf("delivery %d: InTx = %v, %v; want %v", i+1, ran, err, want)
			}
		}
		if n := payments(t, pool); n != 1 {
			t.Fatalf("%d payments; want 1", n)
		}
	})
	t.Run("RollbackOnError", func(t *testing.T) {
		boom := errors.New("bank rejected the transfer")
		ran, err := s.InTx(ctx, "pay/bob", func(ctx context.Context, tx pgx.Tx) error {
			if err := pay("bob")(ctx, tx); err != nil {
				return err
			}
			return boom
		})
		if !ran || !errors.Is(err, boom) {
			t.Fatalf("InTx = %v, %v", ran, err)
		}
		if seen, err := s.Seen(ctx, "pay/bob"); err != nil || seen {
			t.Fatalf("key recorded after a failed fn: %v, %v", seen, err)
		}
		// A panic rolls back too.
		func() {
			defer func() { _ = recover() }()
			_, _ = s.InTx(ctx, "pay/bob", func(ctx context.Context, tx pgx.Tx) error {
				_ = pay("bob")(ctx, tx)
				panic("kill -9")
			})
		}()
		ran, err = s.InTx(ctx, "pay/bob", pay("bob"))
		if !ran || err != nil {
			t.Fatalf("retry = %v, %v; want it to run", ran, err)
		}
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM payments WHERE employee = 'bob'`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("bob paid %d times (%v); want 1", n, err)
		}
	})
	t.Run("ClaimTxInOwnTransaction", func(t *testing.T) {
		for i, want := range []bool{true, false} {
			var claimed bool
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				var err error
				if claimed, err = s.ClaimTx(ctx, tx, "pay/cy"); err != nil || !claimed {
					return err
				}
				return pay("cy")(ctx, tx)
			})
			if err != nil || claimed != want {
				t.Fatalf("delivery %d: claimed %v, %v; want %v", i+1, claimed, err, want)
			}
		}
	})
}

// TestInTxConcurrentDuplicates: N deliveries of one key at once. The first
// to insert the key holds its index entry; the test makes it wait until
// every other delivery is blocked on that entry (pg_stat_activity), then
// commit. Exactly one payment; the others answer ran == false.
func TestInTxConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	ctx := context.Background()
	s := newStore(t, pool, pgstore.Config{Table: "keys"})
	const n = 6
	var ran atomic.Int32
	var first sync.Once
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			r, err := s.InTx(ctx, "pay/dee", func(ctx context.Context, tx pgx.Tx) error {
				first.Do(func() {
					testutil.Eventually(t, 20*time.Second, "the other deliveries block on the key", func() bool {
						var waiting int
						_ = pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
							WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
						return waiting == n-1
					})
				})
				return pay("dee")(ctx, tx)
			})
			if err != nil {
				t.Error(err)
			}
			if r {
				ran.Add(1)
			}
		})
	}
	wg.Wait()
	if ran.Load() != 1 {
		t.Fatalf("%d deliveries ran; want 1", ran.Load())
	}
	if got := payments(t, pool); got != 1 {
		t.Fatalf("%d payments; want 1", got)
	}
}

// TestInTxDuplicateAfterAbort: a second delivery blocked on a first that
// rolls back takes over and runs.
func TestInTxDuplicateAfterAbort(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	ctx := context.Background()
	s := newStore(t, pool, pgstore.Config{})
	abort := errors.New("first delivery failed")
	done := make(chan struct{})
	var second bool
	var secondErr error
	ran, err := s.InTx(ctx, "pay/eve", func(ctx context.Context, tx pgx.Tx) error {
		go func() {
			defer close(done)
			second, secondErr = s.InTx(ctx, "pay/eve", pay("eve"))
		}()
		testutil.Eventually(t, 20*time.Second, "the second delivery blocks on the key", func() bool {
			var waiting int
			_ = pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
			return waiting == 1
		})
		return abort
	})
	if !ran || !errors.Is(err, abort) {
		t.Fatalf("first = %v, %v", ran, err)
	}
	<-done
	if !second || secondErr != nil {
		t.Fatalf("second = %v, %v; want it to run after the first aborted", second, secondErr)
	}
	if got := payments(t, pool); got != 1 {
		t.Fatalf("%d payments; want 1", got)
	}
}

func TestPrune(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	ctx := context.Background()
	s := newStore(t, pool, pgstore.Config{Schema: "public", Table: "prune_keys"})
	for i := range 5 {
		if _, err := s.Claim(ctx, fmt.Sprintf("k%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// Three keys recorded two days ago.
	if _, err := pool.Exec(ctx, `UPDATE public.prune_keys SET recorded_at = now() - interval '2 days' WHERE key IN ('k0', 'k1', 'k2')`); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Prune(ctx, 72*time.Hour); err != nil || n != 0 {
		t.Fatalf("Prune(72h) = %d, %v; want 0", n, err)
	}
	if n, err := s.Prune(ctx, 24*time.Hour); err != nil || n != 3 {
		t.Fatalf("Prune(24h) = %d, %v; want 3", n, err)
	}
	for i, want := range []bool{false, false, false, true, true} {
		if seen, err := s.Seen(ctx, fmt.Sprintf("k%d", i)); err != nil || seen != want {
			t.Fatalf("k%d seen = %v, %v; want %v", i, seen, err, want)
		}
	}
	if _, err := s.Prune(ctx, 0); err == nil {
		t.Fatal("Prune(0) succeeded")
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []pgstore.Config{{Table: "bad-name"}, {Table: "1x"}, {Schema: "a;b"}} {
		if err := cfg.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil", cfg)
		}
	}
	pool := setup(t)
	// New is idempotent: a second store on the same table finds it.
	a := newStore(t, pool, pgstore.Config{})
	b := newStore(t, pool, pgstore.Config{})
	if ok, err := a.Claim(context.Background(), "shared"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if seen, err := b.Seen(context.Background(), "shared"); err != nil || !seen {
		t.Fatal(seen, err)
	}
}

// TestNewBesideAnOpenTransaction: a worker starting (New) while another
// one's handler holds a transaction that recorded a key neither waits for
// that transaction nor holds the keys recorded after it: New runs no DDL
// when the table and its index exist (CREATE INDEX IF NOT EXISTS takes a
// SHARE lock on the table before it looks, and waited here until the
// transaction ended).
func TestNewBesideAnOpenTransaction(t *testing.T) {
	pool := setup(t)
	// Names with capitals, and one whose index name PostgreSQL's 63 bytes
	// cut: New must find the index CREATE INDEX made under that name.
	for _, cfg := range []pgstore.Config{{}, {Schema: "public", Table: "keys_in_schema"},
		{Table: "Keys_With_Capitals"}, {Schema: "public", Table: strings.Repeat("K", 63)}} {
		s := newStore(t, pool, cfg)
		ctx := context.Background()
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := s.ClaimTx(ctx, tx, "held"); err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		bounded, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = pgstore.New(bounded, pool, cfg)
		cancel()
		_ = tx.Rollback(ctx)
		if err != nil {
			t.Fatalf("New beside an open transaction that recorded a key (%+v): %v", cfg, err)
		}
	}
}
