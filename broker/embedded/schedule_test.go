package embedded

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
)

// TestSchedulesSurviveSalvageAndBackup: a salvaged directory and an online
// backup keep the schedules, with their next runs, and a broker on either
// runs them.
func TestSchedulesSurviveSalvageAndBackup(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	e.createQueue("q", nil)
	s, err := e.b.CreateSchedule(ctx, broker.ScheduleRequest{Name: "s", Queue: "q", Spec: "@every 1m", TimeZone: "Europe/Berlin",
		Missed: "once", Message: model.SendEntry{Body: "tick"}})
	if err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "backup")
	if err := e.be.Backup(ctx, backup); err != nil {
		t.Fatal(err)
	}
	if err := e.be.Close(); err != nil {
		t.Fatal(err)
	}
	salvaged := filepath.Join(t.TempDir(), "salvaged")
	if _, err := Salvage(ctx, e.dir, salvaged, nil, testLogger(t)); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{backup, salvaged} {
		c := &env{t: t, clock: e.clock, dir: dir}
		c.open()
		got, err := c.b.GetSchedule(ctx, "s")
		if err != nil || got.ID != s.ID || !got.NextRun.Equal(s.NextRun) || got.TimeZone != "Europe/Berlin" || got.Missed != model.MissedOnce {
			t.Fatalf("%s: schedule %+v, %v; want %+v", filepath.Base(dir), got, err, s)
		}
		if err := c.be.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
