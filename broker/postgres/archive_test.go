package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/clocktest"
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

// TestArchiveLateCommitReadBack: an archive step's commit whose outcome the
// broker does not know may still land after its error, on the server (a
// commit waiting for a synchronous standby, a connection cut while COMMIT
// was on its way). Another session stands for that commit here: it sets
// the cursor to the step's append, deletes the rows and commits a moment
// after the step failed. The read-back that reconciles the archive must
// wait for it (the cursor row is locked by it) instead of reading the old
// cursor and cutting lines whose messages are then deleted.
func TestArchiveLateCommitReadBack(t *testing.T) {
	schema := pooledSchema(t)
	url := requirePostgres(t)
	dir := t.TempDir()
	clock := clocktest.NewFakeClock(time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC))
	cfg := testConfig(url, schema)
	cfg.Clock, cfg.Logger = clock, testutil.Logger(t)
	cfg.Archive = archive.Config{Dir: dir, ID: "late"}
	be, err := postgres.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	f := front(t, be, cfg.Options)
	ctx := context.Background()
	if _, err := f.CreateQueue(ctx, "q", map[string]string{model.AttrMessageRetentionPeriod: "60", model.AttrArchiveExpired: "true"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Send(ctx, "q", []model.SendEntry{{ID: "a", Body: "a"}, {ID: "b", Body: "b"}}); err != nil {
		t.Fatal(err)
	}
	committed := make(chan error, 1)
	var faults atomic.Int32
	be.SetArchiveFault(func() error {
		if faults.Add(1) != 1 {
			return nil
		}
		all, err := os.ReadDir(dir)
		var ents []os.DirEntry
		for _, e := range all {
			if !strings.HasPrefix(e.Name(), ".") { // the writer's lock file
				ents = append(ents, e)
			}
		}
		if err != nil || len(ents) != 1 || !strings.HasSuffix(ents[0].Name(), ".open") {
			t.Errorf("archive directory at the step: %v %v", ents, err)
			return errors.New("no open file")
		}
		info, err := ents[0].Info()
		if err != nil {
			return err
		}
		cur := archive.Cursor{File: strings.TrimSuffix(ents[0].Name(), ".jsonl.gz.open"), Size: info.Size()}
		locked := make(chan error, 1)
		go func() {
			other, err := pgx.Connect(ctx, url)
			if err != nil {
				locked <- err
				return
			}
			defer other.Close(ctx)
			tx, err := other.Begin(ctx)
			if err == nil {
				_, err = tx.Exec(ctx, `UPDATE `+pgx.Identifier{schema, "archive_cursors"}.Sanitize()+` SET cursor = $1 WHERE archive_id = 'late'`, cur.String())
			}
			locked <- err
			if err != nil {
				return
			}
			// Waits for the failed step's rollback (its row locks).
			if _, err := tx.Exec(ctx, `DELETE FROM `+pgx.Identifier{schema, "messages"}.Sanitize()); err != nil {
				committed <- err
				return
			}
			time.Sleep(300 * time.Millisecond)
			committed <- tx.Commit(ctx)
		}()
		if err := <-locked; err != nil {
			t.Errorf("the late commit's session: %v", err)
		}
		return errors.New("injected: the commit's outcome is unknown")
	})
	clock.Advance(61 * time.Second)
	select {
	case err := <-committed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the archive step did not run")
	}
	for range 3 {
		clock.Advance(time.Second)
		if err := be.SweepOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	lines, err := archive.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lines {
		got = append(got, l.Body)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("the archive holds %v, want a and b once: the late commit deleted them", got)
	}
}

// TestArchiveSameIDTwoBrokers: two brokers given one --archive-id (each
// its own directory) share one cursor row. Broker a archives a large batch
// (its file ...-000002, the cursor at its size); broker b, opened before,
// names its next file with the same sequence, in its own directory. Had b
// stored its cursor over a's, a's restart would cut a's file to b's size:
// a's committed lines lost, the gzip stream cut inside a member. Each step
// sets the cursor only from the value this broker last stored: b's step
// is rolled back (and logged) and leaves the messages, which a archives
// after its restart. Every message is archived once.
func TestArchiveSameIDTwoBrokers(t *testing.T) {
	schema := pooledSchema(t)
	url := requirePostgres(t)
	clock := clocktest.NewFakeClock(time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC))
	dirA, dirB := t.TempDir(), t.TempDir()
	open := func(dir string) (*postgres.Backend, *broker.Broker) {
		cfg := testConfig(url, schema)
		cfg.Clock, cfg.Logger = clock, testutil.Logger(t)
		cfg.Archive = archive.Config{Dir: dir, ID: "same", MaxFileBytes: 1}
		be, err := postgres.Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = be.Close() })
		return be, front(t, be, cfg.Options)
	}
	ctx := context.Background()
	next := 0
	round := func(f *broker.Broker, n int) {
		t.Helper()
		for range n {
			if _, err := f.Send(ctx, "q", []model.SendEntry{{ID: "x", Body: fmt.Sprintf("m%04d-%s", next, strings.Repeat("x", 100))}}); err != nil {
				t.Fatal(err)
			}
			next++
		}
		clock.Advance(61 * time.Second)
		testutil.Eventually(t, time.Minute, "the sweeper takes the round", func() bool {
			clock.Advance(time.Second)
			var left int
			_ = pgxQueryRow(t, url, `SELECT count(*) FROM `+pgx.Identifier{schema, "messages"}.Sanitize(), &left)
			return left == 0
		})
	}
	beA, a := open(dirA)
	if _, err := a.CreateQueue(ctx, "q", map[string]string{model.AttrMessageRetentionPeriod: "60", model.AttrArchiveExpired: "true"}, nil); err != nil {
		t.Fatal(err)
	}
	round(a, 3) // a's file 000000
	round(a, 3) // a's file 000001
	beB, b := open(dirB)
	round(a, 3)   // a's file 000002 (b is idle until a closes)
	round(a, 200) // a's file 000003
	_ = beA.Close()
	for range 20 { // b's file 000002 (its own sequence)
		if _, err := b.Send(ctx, "q", []model.SendEntry{{ID: "x", Body: fmt.Sprintf("m%04d", next)}}); err != nil {
			t.Fatal(err)
		}
		next++
	}
	clock.Advance(61 * time.Second)
	for range 3 {
		clock.Advance(time.Second)
		if err := beB.SweepOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_ = beB.Close()
	_, a = open(dirA)
	testutil.Eventually(t, time.Minute, "a archives what is left", func() bool {
		clock.Advance(time.Second)
		q, err := a.GetQueue(ctx, "q")
		return err == nil && q.Stats.Visible == 0
	})
	seen := map[string]int{}
	for _, d := range []string{dirA, dirB} {
		lines, err := archive.ReadDir(d)
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		for _, l := range lines {
			seen[l.Body[:5]]++
		}
	}
	bad := 0
	for i := range next {
		if seen[fmt.Sprintf("m%04d", i)] != 1 {
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d messages not archived exactly once", bad, next)
	}
}

func pgxQueryRow(t *testing.T, url, sql string, dst any) error {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(context.Background(), sql).Scan(dst)
}
