package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/internal/testutil"
)

// openBrokers opens n brokers on one schema and one fake clock.
func openBrokers(t *testing.T, n int) ([]*broker.Broker, *clocktest.FakeClock, string) {
	t.Helper()
	url := requirePostgres(t)
	schema := pooledSchema(t)
	clock := clocktest.NewFakeClock(time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC))
	var out []*broker.Broker
	for range n {
		cfg := testConfig(url, schema)
		cfg.Clock = clock
		cfg.Logger = testutil.Logger(t)
		be, err := postgres.Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = be.Close() })
		out = append(out, front(t, be, cfg.Options))
	}
	return out, clock, schema
}

// TestScheduleRunsRacedByThreeBrokers: three brokers on one fake clock all
// wake at every run of a schedule and race for it; each run is stored once
// (the schedule counts one store per run, and the queue holds one message
// per run: the count would catch a run stored twice even where the
// queue's deduplication dropped the second message).
func TestScheduleRunsRacedByThreeBrokers(t *testing.T) {
	bs, clock, _ := openBrokers(t, 3)
	ctx := context.Background()
	if _, err := bs[0].CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	s, err := bs[0].CreateSchedule(ctx, broker.ScheduleRequest{Name: "s", Queue: "q", Spec: "@every 1s", Message: model.SendEntry{Body: "tick"}})
	if err != nil {
		t.Fatal(err)
	}
	// Every runner looks once (a kick from the create on bs[0], the
	// others' first steps at open) before the clock moves.
	const runs = 30
	for i := range runs {
		at := s.NextRun.Add(time.Duration(i) * time.Second)
		clock.Set(at)
		testutil.Eventually(t, 20*time.Second, "run "+at.Format(time.TimeOnly), func() bool {
			got, err := bs[i%3].GetSchedule(ctx, "s")
			return err == nil && got.NextRun.After(at)
		})
	}
	got, err := bs[1].GetSchedule(ctx, "s")
	if err != nil || got.Sent != runs || got.MissedRuns != 0 || !got.LastRun.Equal(s.NextRun.Add((runs-1)*time.Second)) {
		t.Fatalf("after %d runs raced by three brokers: %+v, %v", runs, got, err)
	}
	info, err := bs[2].GetQueue(ctx, "q")
	if err != nil || info.Stats.Visible != runs {
		t.Fatalf("queue after %d runs: %+v, %v", runs, info.Stats, err)
	}
}

// TestScheduleRunOfABrokerKilledInItsStep: a broker that dies inside the
// transaction of a run's step (here a connection that locked the
// schedule's row the way a step does, then goes away without committing)
// stores nothing, and blocks nothing: while it holds the row, the other
// broker skips it; once PostgreSQL has rolled the transaction back, the
// other broker stores the run, once, within PollInterval.
func TestScheduleRunOfABrokerKilledInItsStep(t *testing.T) {
	bs, clock, schema := openBrokers(t, 1)
	b := bs[0]
	ctx := context.Background()
	if _, err := b.CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	s, err := b.CreateSchedule(ctx, broker.ScheduleRequest{Name: "s", Queue: "q", Spec: "@every 1m", Message: model.SendEntry{Body: "tick"}})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, testURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	table := pgx.Identifier{schema, "schedules"}.Sanitize()
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+table+" WHERE name = 's' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	// The run comes while the dying broker holds the row.
	clock.Set(s.NextRun)
	clock.Settle(10 * time.Second)
	if got, _ := b.GetSchedule(ctx, "s"); got.Sent != 0 || !got.NextRun.Equal(s.NextRun) {
		t.Fatalf("a run stored past another transaction's lock: %+v", got)
	}
	// The broker dies: its connection goes, and its transaction with it.
	if err := conn.Close(ctx); err != nil {
		t.Fatal(err)
	}
	probe, err := pgx.Connect(ctx, testURL())
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close(ctx)
	testutil.Eventually(t, 20*time.Second, "PostgreSQL to roll the dead transaction back", func() bool {
		_, err := probe.Exec(ctx, "BEGIN; SELECT 1 FROM "+table+" WHERE name = 's' FOR UPDATE NOWAIT; ROLLBACK", pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			_, _ = probe.Exec(ctx, "ROLLBACK")
		}
		return err == nil
	})
	// The runner looks again PollInterval after the pass that found the
	// row locked.
	clock.Advance(postgres.DefaultConfig().PollInterval)
	testutil.Eventually(t, 20*time.Second, "the run, by the broker alive", func() bool {
		got, err := b.GetSchedule(ctx, "s")
		return err == nil && got.Sent == 1
	})
	got, _ := b.GetSchedule(ctx, "s")
	if !got.LastRun.Equal(s.NextRun) || got.MissedRuns != 0 {
		t.Fatalf("the run stored late: %+v", got)
	}
	if info, err := b.GetQueue(ctx, "q"); err != nil || info.Stats.Visible != 1 {
		t.Fatalf("queue: %+v, %v", info.Stats, err)
	}
}
