package plan

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

var t0 = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func TestScheduleDue(t *testing.T) {
	every := func(spec string, next time.Time, missed model.MissedPolicy) model.Schedule {
		return model.Schedule{ID: "s", Spec: spec, TimeZone: "UTC", Missed: missed, NextRun: next}
	}
	for _, c := range []struct {
		name    string
		s       model.Schedule
		now     time.Time
		ok      bool
		want    ScheduleStep
		comment string
	}{
		{"not yet", every("@every 10s", at(10*time.Second), model.MissedSkip), at(9 * time.Second), false, ScheduleStep{}, ""},
		{"on time", every("@every 10s", at(10*time.Second), model.MissedSkip), at(10 * time.Second), true,
			ScheduleStep{Run: at(10 * time.Second), Next: at(20 * time.Second)}, ""},
		{"late within the grace, one run at a time", every("@every 10s", at(10*time.Second), model.MissedSkip), at(55 * time.Second), true,
			ScheduleStep{Run: at(10 * time.Second), Next: at(20 * time.Second)}, ""},
		{"exactly the grace late", every("@every 10s", at(10*time.Second), model.MissedSkip), at(70 * time.Second), true,
			ScheduleStep{Run: at(10 * time.Second), Next: at(20 * time.Second)}, ""},
		{"missed, skip: to the first run within the grace", every("@every 10s", at(10*time.Second), model.MissedSkip), at(5*time.Minute + 5*time.Second), true,
			ScheduleStep{Next: at(4*time.Minute + 10*time.Second), Missed: 24}, "runs 10s..4m0s are older than 4m5s"},
		{"missed, once: the first missed run's message", every("@every 10s", at(10*time.Second), model.MissedOnce), at(5*time.Minute + 5*time.Second), true,
			ScheduleStep{Run: at(10 * time.Second), Next: at(4*time.Minute + 10*time.Second), Missed: 24}, ""},
		{"missed daily, skip", every("0 3 * * *", at(15*time.Hour), model.MissedSkip), at(15*time.Hour + 2*time.Minute), true,
			ScheduleStep{Next: at(39 * time.Hour), Missed: 1}, ""},
		{"missed daily for three days, once", every("0 3 * * *", at(15*time.Hour), model.MissedOnce), at(63*time.Hour + 30*time.Minute), true,
			ScheduleStep{Run: at(15 * time.Hour), Next: at(87 * time.Hour), Missed: 3}, ""},
		{"paused", func() model.Schedule { s := every("@every 10s", at(0), model.MissedSkip); s.Paused = true; return s }(), at(time.Minute), false, ScheduleStep{}, ""},
		{"no run left", every("@every 10s", time.Time{}, model.MissedSkip), at(time.Minute), false, ScheduleStep{}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok, err := ScheduleDue(c.s, c.now)
			if err != nil || ok != c.ok || !got.Run.Equal(c.want.Run) || !got.Next.Equal(c.want.Next) || got.Missed != c.want.Missed {
				t.Fatalf("ScheduleDue = %+v, %v, %v; want %+v, %v (%s)", got, ok, err, c.want, c.ok, c.comment)
			}
		})
	}
}

func TestScheduleResume(t *testing.T) {
	s := model.Schedule{ID: "s", Spec: "@every 1m", TimeZone: "UTC", Missed: model.MissedSkip, NextRun: at(time.Minute), Paused: true}
	// Still ahead: kept.
	if got, err := ScheduleResume(s, at(30*time.Second)); err != nil || !got.Next.Equal(at(time.Minute)) || !got.Run.IsZero() {
		t.Fatalf("resume before the next run: %+v, %v", got, err)
	}
	// Due while paused, even within the grace: missed.
	got, err := ScheduleResume(s, at(time.Minute+10*time.Second))
	if err != nil || !got.Next.Equal(at(2*time.Minute)) || !got.Run.IsZero() || got.Missed != 1 {
		t.Fatalf("resume, skip: %+v, %v", got, err)
	}
	s.Missed = model.MissedOnce
	got, err = ScheduleResume(s, at(10*time.Minute))
	if err != nil || !got.Next.Equal(at(11*time.Minute)) || !got.Run.Equal(at(time.Minute)) || got.Missed != 10 {
		t.Fatalf("resume, once: %+v, %v", got, err)
	}
}

func TestScheduleFirstRun(t *testing.T) {
	got, err := ScheduleFirstRun("0 2 * * *", "Europe/Berlin", t0)
	if err != nil || !got.Equal(time.Date(2024, 3, 2, 1, 0, 0, 0, time.UTC)) {
		t.Fatalf("daily at 02:00 Berlin: %v, %v", got, err)
	}
	got, err = ScheduleFirstRun("@every 90s", "", t0)
	if err != nil || !got.Equal(at(90*time.Second)) {
		t.Fatalf("@every 90s: %v, %v", got, err)
	}
	if _, err := ScheduleFirstRun("0 2 * * *", "Nowhere/Land", t0); err == nil {
		t.Fatal("an unknown zone was accepted")
	}
}
