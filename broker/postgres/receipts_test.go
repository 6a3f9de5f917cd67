package postgres_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/internal/pgtest"
)

// TestReceiptKeySharedByBrokers: brokers opened at once on one schema agree
// on one receipt key (the first insert wins, the others read it), so each
// accepts the handles the other issued; a broker on another schema (another
// deployment, another key) refuses them.
func TestReceiptKeySharedByBrokers(t *testing.T) {
	url := requirePostgres(t)
	schema := schemaFor(t)
	other := schema + "_other"
	clock := clocktest.NewFakeClock(time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC))
	ctx := context.Background()
	open := func(schema string) *broker.Broker {
		cfg := testConfig(url, schema)
		cfg.Clock = clock
		be, err := postgres.Open(ctx, cfg)
		if err != nil {
			t.Error(err)
			return nil
		}
		t.Cleanup(func() { _ = be.Close() })
		return front(t, be, cfg.Options)
	}
	// The schema is new: both brokers race to create its key.
	var a, b *broker.Broker
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); a = open(schema) }()
	go func() { defer wg.Done(); b = open(schema) }()
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	pgtest.DropSchema(t, url, other)
	t.Cleanup(func() { pgtest.DropSchema(t, url, other) })
	c := open(other)
	if c == nil {
		t.FailNow()
	}

	for _, f := range []*broker.Broker{a, c} {
		if _, err := f.CreateQueue(ctx, "q", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	hour := time.Hour
	receive := func(f *broker.Broker, queue string) model.Delivery {
		t.Helper()
		if _, err := f.Send(ctx, queue, []model.SendEntry{{Body: "x"}}); err != nil {
			t.Fatal(err)
		}
		ds, err := f.Receive(ctx, model.ReceiveRequest{Queue: queue, Visibility: &hour, WaitTime: new(time.Duration)})
		if err != nil || len(ds) != 1 {
			t.Fatalf("receive: %d messages, %v", len(ds), err)
		}
		return ds[0]
	}
	oneErr := func(errs []error, err error) error {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return errs[0]
	}

	// c's queue has the same internal id as a's in its own schema, and c
	// refuses a's handle all the same: the MAC is made with another key.
	da := receive(a, "q")
	if err := oneErr(c.Delete(ctx, "q", []model.DeleteEntry{{Receipt: da.Receipt}})); !errors.Is(err, model.ErrReceiptHandleInvalid) {
		t.Fatalf("a broker of another schema took a's handle: %v", err)
	}
	if err := oneErr(b.ChangeVisibility(ctx, "q", []model.VisibilityEntry{{Receipt: da.Receipt, Timeout: 2 * time.Hour}})); err != nil {
		t.Fatalf("b refused a's handle (ChangeVisibility): %v", err)
	}
	if err := oneErr(b.Delete(ctx, "q", []model.DeleteEntry{{Receipt: da.Receipt}})); err != nil {
		t.Fatalf("b refused a's handle (Delete): %v", err)
	}
	db := receive(b, "q")
	if err := oneErr(a.Delete(ctx, "q", []model.DeleteEntry{{Receipt: db.Receipt}})); err != nil {
		t.Fatalf("a refused b's handle: %v", err)
	}
	info, err := a.GetQueue(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if st := info.Stats; st.Visible != 0 || st.InFlight != 0 {
		t.Fatalf("after both deletes: %+v, want an empty queue", st)
	}
}

// TestReceiptKeyMigration: a schema from before signed handles (version 8)
// gets its receipt key from the first broker that opens it after the
// upgrade, and the key is kept: a broker opened later signs alike.
func TestReceiptKeyMigration(t *testing.T) {
	t.Parallel()
	url := requirePostgres(t)
	schema := schemaFor(t)
	ctx := context.Background()
	if err := postgres.MigrateTo(ctx, url, schema, 8); err != nil {
		t.Fatal(err)
	}
	probe := model.Receipt{QueueID: 1, Key: 2, Lease: 3}
	var handles []string
	for range 2 {
		be, err := postgres.Open(ctx, testConfig(url, schema))
		if err != nil {
			t.Fatal(err)
		}
		handles = append(handles, be.Receipts().Encode(probe))
		_ = be.Close()
	}
	if handles[0] != handles[1] {
		t.Fatalf("two brokers opened one after the other sign %v as %q and %q: the key was not kept", probe, handles[0], handles[1])
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, "receipt_keys"}.Sanitize()).Scan(&n); err != nil || n != 1 {
		t.Fatalf("receipt_keys holds %d rows (%v), want 1", n, err)
	}
}
