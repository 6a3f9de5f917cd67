package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/postgres"
)

// TestOpenMigratesEveryOlderSchema: a schema as a broker of each earlier
// version created it opens: the broker migrates it to the current version
// and serves. The TestMigrationN tests (and TestReceiptKeyMigration) check
// what a migration does to the rows stored before it.
func TestOpenMigratesEveryOlderSchema(t *testing.T) {
	t.Parallel()
	for v := 1; v < postgres.SchemaVersion; v++ {
		t.Run(fmt.Sprint("v", v), func(t *testing.T) {
			t.Parallel()
			url, schema, conn := schemaAtVersion(t, v)
			ctx := context.Background()
			cfg := testConfig(url, schema)
			be, err := postgres.Open(ctx, cfg)
			if err != nil {
				t.Fatalf("open a schema of version %d: %v", v, err)
			}
			t.Cleanup(func() { _ = be.Close() })
			var have int
			if err := conn.QueryRow(ctx, "SELECT max(version) FROM "+pgx.Identifier{schema, "migrations"}.Sanitize()).Scan(&have); err != nil {
				t.Fatal(err)
			}
			if have != postgres.SchemaVersion {
				t.Fatalf("schema version %d after the open, want %d", have, postgres.SchemaVersion)
			}
			f := front(t, be, cfg.Options)
			if _, err := f.CreateQueue(ctx, "q", nil, nil); err != nil {
				t.Fatal(err)
			}
			if res, err := f.Send(ctx, "q", []model.SendEntry{{Body: "after the upgrade"}}); err != nil || res[0].Err != nil {
				t.Fatal(err, res)
			}
			ds, err := f.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 1})
			if err != nil || len(ds) != 1 || ds[0].Body != "after the upgrade" {
				t.Fatalf("receive after the upgrade from version %d: %v, %v", v, ds, err)
			}
		})
	}
}

// TestOpenRefusesNewerSchema: a schema a newer broker migrated (a version
// past this one's) is refused with ErrNewerSchema and a message that says
// what to do, and is left as it was.
func TestOpenRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	url, schema, conn := schemaAtVersion(t, postgres.SchemaVersion)
	ctx := context.Background()
	migrations := pgx.Identifier{schema, "migrations"}.Sanitize()
	newer := postgres.SchemaVersion + 1
	if _, err := conn.Exec(ctx, "INSERT INTO "+migrations+" (version) VALUES ($1)", newer); err != nil {
		t.Fatal(err)
	}
	be, err := postgres.Open(ctx, testConfig(url, schema))
	if err == nil {
		_ = be.Close()
		t.Fatal("a schema of a newer version opened")
	}
	if !errors.Is(err, postgres.ErrNewerSchema) {
		t.Fatalf("open a newer schema: %v, want ErrNewerSchema", err)
	}
	for _, want := range []string{schema, fmt.Sprintf("version %d:", newer), "newer version of Sluice",
		fmt.Sprintf("versions up to %d", postgres.SchemaVersion), "run that version or a newer one", "restore a backup"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	var have, rows int
	if err := conn.QueryRow(ctx, "SELECT max(version), count(*) FROM "+migrations).Scan(&have, &rows); err != nil {
		t.Fatal(err)
	}
	if have != newer || rows != newer {
		t.Errorf("after the refusal: version %d in %d rows, want %d in %d (unchanged)", have, rows, newer, newer)
	}
	t.Logf("refusal: %v", err)
}
