package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/internal/archive"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/internal/testutil"
)

// TestArchiveTwoBrokersRace: two brokers share one schema and one archive
// directory (their own ids); their sweepers race for the expired messages
// of an ArchiveExpired queue, one of them failing once between its
// archive's sync and its commit. Every message is archived exactly once.
func TestArchiveTwoBrokersRace(t *testing.T) {
	schema := pooledSchema(t)
	dir := t.TempDir()
	var n atomic.Int32
	a, b, clock := openPair(t, schema, func(c *postgres.Config) {
		c.Archive = archive.Config{Dir: dir, ID: fmt.Sprintf("b%d", n.Add(1)), MaxFileBytes: 4 << 10}
		c.Logger = testutil.Logger(t)
	})
	var faults atomic.Int32
	raw(a).SetArchiveFault(func() error {
		if faults.Add(1) == 1 {
			return errors.New("injected failure between the archive and the commit")
		}
		return nil
	})
	ctx := context.Background()
	if _, err := a.CreateQueue(ctx, "q", map[string]string{model.AttrMessageRetentionPeriod: "60", model.AttrArchiveExpired: "true"}, nil); err != nil {
		t.Fatal(err)
	}
	const total = 2500
	for i := 0; i < total; i += 10 {
		var es []model.SendEntry
		for j := i; j < i+10; j++ {
			es = append(es, model.SendEntry{ID: fmt.Sprint(j - i), Body: fmt.Sprintf("m%04d", j)})
		}
		via := a
		if i%20 == 0 {
			via = b
		}
		if _, err := via.Send(ctx, "q", es); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(61 * time.Second)
	testutil.Eventually(t, time.Minute, "both sweepers archive the queue", func() bool {
		clock.Advance(time.Second)
		q, err := b.GetQueue(ctx, "q")
		return err == nil && q.Stats.Visible == 0 && faults.Load() > 0
	})
	lines, err := archive.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	ids := map[string]bool{}
	for _, l := range lines {
		seen[l.Body]++
		ids[l.ID] = true
	}
	for i := range total {
		if body := fmt.Sprintf("m%04d", i); seen[body] != 1 {
			t.Errorf("%s archived %d times, want once", body, seen[body])
		}
	}
	if len(lines) != total || len(ids) != total {
		t.Fatalf("%d lines of %d ids in the archive, want %d", len(lines), len(ids), total)
	}
	t.Logf("%d lines; the injected failure ran %d archive steps of broker a", len(lines), faults.Load())
}
