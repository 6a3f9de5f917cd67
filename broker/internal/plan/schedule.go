package plan

import (
	"time"

	"github.com/sluicemq/sluice/broker/internal/cron"
	"github.com/sluicemq/sluice/broker/model"
)

// The schedule rules: when a schedule's runner sends a run, and what it
// does with the runs no broker sent on time (model.MissedPolicy). A backend
// calls them inside the atomic step that moves the schedule's NextRun and
// stores the run's message (Schedule.RunEntry), so that every run is sent
// by one step only: a step that finds NextRun moved (another broker's
// step, a pause) stores nothing.

// ScheduleStep is what one step of a schedule does.
type ScheduleStep struct {
	// Run is the instant of the run whose message the step stores
	// (Schedule.RunEntry(Run)); zero when it stores none.
	Run time.Time
	// Next is the schedule's NextRun after the step.
	Next time.Time
	// Missed counts the runs the step found missed (at most
	// MaxCountedMisses; a MissedOnce message stands for them).
	Missed int64
}

// MaxCountedMisses bounds the missed runs one step counts (a schedule
// every second, after a month without a broker, would count millions).
const MaxCountedMisses = 10000

// ScheduleFirstRun is the first run of a schedule created at created: the
// first instant of spec in zone after it (an interval's is created plus
// the interval). Zero when the spec has none within five years.
func ScheduleFirstRun(spec, zone string, created time.Time) (time.Time, error) {
	sch, err := cron.Parse(spec, zone)
	if err != nil {
		return time.Time{}, err
	}
	return sch.Next(created), nil
}

// ScheduleDue plans the runner's step of schedule s at now; ok is false
// when no run is due (paused, its next run is later, or it has none).
//
// A run at most model.ScheduleGrace old is on time: the step sends it and
// moves to the run after it (the runner steps again while runs are due,
// so runs late by less than the grace are each sent). An older run was
// missed, and so was every run after it that is older than the grace: the
// step moves to the first run that is not (which may be due: the next step
// sends it), sending nothing for them with MissedSkip, and one message
// with MissedOnce: the first missed run's.
func ScheduleDue(s model.Schedule, now time.Time) (step ScheduleStep, ok bool, err error) {
	t := s.NextRun
	if s.Paused || t.IsZero() || t.After(now) {
		return ScheduleStep{}, false, nil
	}
	sch, err := cron.Parse(s.Spec, s.TimeZone)
	if err != nil {
		return ScheduleStep{}, false, err
	}
	cutoff := now.Add(-model.ScheduleGrace)
	if !t.Before(cutoff) {
		return ScheduleStep{Run: t, Next: sch.FirstAfter(t, t)}, true, nil
	}
	// The first run at or after cutoff.
	step = ScheduleStep{Next: sch.FirstAfter(t, cutoff.Add(-time.Nanosecond)), Missed: missedRuns(sch, t, cutoff)}
	if s.Missed == model.MissedOnce {
		step.Run = t
	}
	return step, true, nil
}

// ScheduleResume plans the resume of paused schedule s at now: the runs
// that fell due while it was paused are missed (the grace does not apply:
// a paused schedule sends nothing), so the schedule moves to its first run
// after now, with one message for them with MissedOnce. A schedule whose
// next run is still ahead keeps it.
func ScheduleResume(s model.Schedule, now time.Time) (ScheduleStep, error) {
	t := s.NextRun
	if t.IsZero() || t.After(now) {
		return ScheduleStep{Next: t}, nil
	}
	sch, err := cron.Parse(s.Spec, s.TimeZone)
	if err != nil {
		return ScheduleStep{}, err
	}
	step := ScheduleStep{Next: sch.FirstAfter(t, now), Missed: missedRuns(sch, t, now.Add(time.Nanosecond))}
	if s.Missed == model.MissedOnce {
		step.Run = t
	}
	return step, nil
}

// missedRuns counts the runs in [t, before) (t is a run), at most
// MaxCountedMisses.
func missedRuns(sch cron.Schedule, t, before time.Time) int64 {
	if d := sch.Interval(); d > 0 {
		return min(int64((before.Sub(t)-1)/d)+1, MaxCountedMisses)
	}
	n := int64(0)
	for r := t; !r.IsZero() && r.Before(before) && n < MaxCountedMisses; r = sch.Next(r) {
		n++
	}
	return n
}
