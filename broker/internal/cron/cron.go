// Package cron is the one home of a schedule's timing rule: it parses a
// schedule's spec (a cron expression or an interval) with its time zone,
// and computes its runs (Schedule.Next). The front parses every spec when a
// schedule is created (a bad one is refused there); the planners compute
// the runs with it inside a backend's atomic step (plan.ScheduleStep).
//
// # Specs
//
//   - Five fields (minute hour day-of-month month day-of-week), or six with
//     seconds first, parsed by github.com/robfig/cron/v3's parser: numbers,
//     ranges (1-5), steps (*/15, 1-30/2), lists (1,15), names for months and
//     days (jan, mon), "?" for "*". Day of week is 0..6 (0 is Sunday). When
//     both day fields are restricted (anything but "*" or "?"; "*/2" is
//     restricted) a day matching either runs, as in Vixie cron; when one
//     is "*", the other alone decides.
//   - The descriptors @yearly (@annually), @monthly, @weekly, @daily
//     (@midnight) and @hourly.
//   - "@every <duration>": an interval of whole seconds (at least 1 s, at
//     most MaxInterval), counted from the schedule's creation, in real time
//     whatever the time zone.
//
// # Time zones and daylight saving time
//
// A cron spec names wall-clock times in its time zone (an IANA name; UTC by
// default). Where a zone's clock jumps, a wall-clock time may not exist or
// may happen twice. The rule is ISC cron's (the cron of Debian and most
// Linux systems) for changes of any size:
//
//   - A spec that names hours (its hour field does not match every hour:
//     "30 2 * * *", @daily) keeps wall-clock time: a run whose time falls in
//     a gap (the clock jumps forward over it) runs at the instant of the
//     jump, once however many of its times fell in the gap; a time that
//     happens twice (the clock goes back) runs only the first time.
//   - A spec that runs every hour or more often (its hour field is "*":
//     "*/15 * * * *", @hourly) keeps real time: times in a gap do not exist
//     and have no run, and times that happen twice run twice, so its runs
//     stay evenly spaced in real time.
//
// github.com/robfig/cron/v3's own Next is not used for zones with such
// changes: v3.0.1 skips a run whose time falls in a gap (the day of a
// spring-forward 02:30 job has no run) and runs a job twice when the clock
// goes back. It is used on UTC only, where no clock jumps, to find the next
// wall-clock time that matches; this package maps wall-clock times to
// instants itself with the zone's offset periods (time.Time.ZoneBounds).
package cron

import (
	"fmt"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // every IANA zone, whatever the host has installed

	robfig "github.com/robfig/cron/v3"

	"github.com/sluicemq/sluice/broker/model"
)

// MaxInterval is the longest "@every" interval: a year (366 days).
const MaxInterval = 366 * 24 * time.Hour

// horizon is how far ahead Next looks for a run: a spec with none in it
// (February 30th) never runs, and Parse refuses it.
const horizon = 5 // years, robfig's own search limit

// parser reads five fields or six (seconds first) and the descriptors.
var parser = robfig.NewParser(robfig.SecondOptional | robfig.Minute | robfig.Hour |
	robfig.Dom | robfig.Month | robfig.Dow | robfig.Descriptor)

// Schedule is a parsed spec in its time zone: the instants it runs at.
// The zero Schedule is not valid; make one with Parse.
type Schedule struct {
	// every is an interval's length (0 for a cron spec).
	every time.Duration
	// spec is a cron spec's fields, on UTC: it finds wall-clock times.
	spec *robfig.SpecSchedule
	// loc is the time zone of a cron spec's wall-clock times.
	loc *time.Location
	// wallHours: the spec names hours (see the package comment), so it
	// keeps wall-clock time across a clock change.
	wallHours bool
}

// allHours is the hour field of a spec that runs every hour.
const allHours = 1<<24 - 1

// Parse parses spec in time zone zone (an IANA name such as
// "Europe/Berlin"; "" is UTC). Errors are *model.Error
// (ErrInvalidParameterValue) naming the parameter (Schedule or TimeZone)
// and what is wrong.
func Parse(spec, zone string) (Schedule, error) {
	loc, err := LoadZone(zone)
	if err != nil {
		return Schedule{}, err
	}
	spec = strings.TrimSpace(spec)
	bad := func(reason string) error {
		return model.InvalidParameterError(fmt.Sprintf("%q", spec), "Schedule", reason)
	}
	switch {
	case spec == "":
		return Schedule{}, bad("give a cron expression (five fields, or six with seconds first), a descriptor such as @daily, or @every and an interval such as @every 5m.")
	case strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ="):
		return Schedule{}, bad("give the time zone as the schedule's time zone, not in the expression.")
	case strings.HasPrefix(spec, "@every"):
		d, reason := parseEvery(strings.TrimSpace(strings.TrimPrefix(spec, "@every")))
		if reason != "" {
			return Schedule{}, bad(reason)
		}
		return Schedule{every: d, loc: loc}, nil
	}
	parsed, err := parser.Parse(spec)
	if err != nil {
		return Schedule{}, bad(strings.TrimSuffix(err.Error(), ".") + ".")
	}
	s, ok := parsed.(*robfig.SpecSchedule)
	if !ok {
		return Schedule{}, bad("not a cron expression.")
	}
	utc := *s
	utc.Location = time.UTC
	sch := Schedule{spec: &utc, loc: loc, wallHours: utc.Hour&allHours != allHours}
	probe := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	if sch.Next(probe).IsZero() {
		// No run within the horizon from a leap year's start: the days
		// named never exist (February 30th, or the 31st of a 30-day month).
		return Schedule{}, bad("it names no day that exists, so it never runs.")
	}
	return sch, nil
}

// parseEvery reads an interval: a Go duration of whole seconds, 1 s to
// MaxInterval; reason says why s is not one ("" when it is).
func parseEvery(s string) (d time.Duration, reason string) {
	if s == "" {
		return 0, "@every needs an interval, such as @every 5m or @every 1h30m."
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, fmt.Sprintf("the interval %q is not a duration such as 90s, 5m or 1h30m.", s)
	case d < time.Second:
		return 0, "the interval must be at least 1s."
	case d%time.Second != 0:
		return 0, "the interval must be a whole number of seconds."
	case d > MaxInterval:
		return 0, "the interval must be at most 8784h (a year); use a cron expression for rarer runs."
	}
	return d, ""
}

// LoadZone returns the time zone named zone, an IANA name ("" and "UTC" are
// UTC). "Local" is refused: it would be each broker's own zone. The names
// are built into the binary (time/tzdata), so every broker reads the same
// rules whatever its host has installed.
func LoadZone(zone string) (*time.Location, error) {
	bad := func(reason string) error {
		return model.InvalidParameterError(fmt.Sprintf("%q", zone), "TimeZone", reason)
	}
	switch zone {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		return nil, bad("give an IANA time zone name such as Europe/Berlin or America/New_York, or UTC; Local would be each broker's own.")
	}
	if loc, ok := zones.Load(zone); ok {
		return loc.(*time.Location), nil
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, bad("unknown time zone: give an IANA time zone name such as Europe/Berlin or America/New_York, or UTC.")
	}
	zones.Store(zone, loc)
	return loc, nil
}

// zones caches the zones loaded (time.LoadLocation reads the zone's file
// every time; a runner parses its schedules' specs at every step).
var zones sync.Map // string -> *time.Location

// Interval returns an "@every" schedule's interval, 0 for a cron spec.
func (s Schedule) Interval() time.Duration { return s.every }

// Next returns the schedule's first run strictly after t, or the zero
// time when it has none within five years (a cron spec only). For an
// interval it is t plus the interval: the runs are counted from the first,
// so give it a run (or the creation instant).
func (s Schedule) Next(t time.Time) time.Time {
	if s.every > 0 {
		return t.Add(s.every)
	}
	if s.spec == nil {
		return time.Time{}
	}
	t = t.In(s.loc)
	start, _ := t.ZoneBounds()
	end := periodEnd(t)
	_, off := t.Zone()
	c := civil(t, off)
	if s.wallHours && !start.IsZero() {
		// t is in a period that began with the clock going back: the
		// repeated wall-clock times ran in the period before.
		if _, prev := start.Add(-time.Nanosecond).In(s.loc).Zone(); prev > off {
			c = later(c, civil(start, prev).Add(-time.Nanosecond))
		}
	}
	limit := t.AddDate(horizon, 0, 0)
	// One pass per offset period of the zone from t's on: the first
	// matching wall-clock time after c, as an instant of this period.
	for !t.After(limit) {
		w := s.spec.Next(c)
		if w.IsZero() {
			return time.Time{}
		}
		r := w.Add(-time.Duration(off) * time.Second)
		if end.IsZero() || r.Before(end) {
			return r.In(s.loc)
		}
		// w lies past this period: the zone's clock changes at end.
		_, off2 := end.In(s.loc).Zone()
		if off2 > off {
			// A gap: the wall-clock times [end+off, end+off2) do not exist.
			gapEnd := civil(end, off2)
			if w.Before(gapEnd) && s.wallHours {
				return end.In(s.loc) // runs at the jump
			}
			c = gapEnd.Add(-time.Nanosecond)
		} else if s.wallHours {
			// The clock goes back: [end+off2, end+off) happens again, and
			// ran already in this period.
			c = civil(end, off).Add(-time.Nanosecond)
		} else {
			c = civil(end, off2).Add(-time.Nanosecond)
		}
		off = off2
		t = end.In(s.loc)
		end = periodEnd(t)
	}
	return time.Time{}
}

// periodEnd returns the end of t's offset period in t's location: the
// first instant after t at which the offset may change, or the zero time
// when it never changes again.
//
// It is time.Time.ZoneBounds's end, except where that is not after t: past
// the last transition of a zone's table, where the zone's TZ rule gives the
// offsets year by year, Go (1.26 at least) answers, for instants in the last
// hours of a year, the year's end at or before them (Pacific/Chatham on
// 2040-12-31 from 13:45 local on, America/New_York from 2040-12-30 19:00),
// and Next looped for ever there. No zone changes its offset twice within
// an hour, so then the period ends an hour after t, or at a change within
// that hour found by bisection.
func periodEnd(t time.Time) time.Time {
	_, end := t.ZoneBounds()
	if end.IsZero() || end.After(t) {
		return end
	}
	_, off := t.Zone()
	lo, hi := t, t.Add(time.Hour)
	if _, o := hi.Zone(); o == off {
		return hi
	}
	for hi.Sub(lo) > 1 {
		mid := lo.Add(hi.Sub(lo) / 2)
		if _, o := mid.Zone(); o == off {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// FirstAfter returns the first run strictly after t of a schedule one of
// whose runs is run (an interval's runs are counted from it; a cron
// spec's do not depend on it). For t before run it is run's first
// successor after t too, never run's predecessors.
func (s Schedule) FirstAfter(run, t time.Time) time.Time {
	if s.every == 0 {
		return s.Next(t)
	}
	if t.Before(run) {
		return run
	}
	return run.Add((t.Sub(run)/s.every + 1) * s.every)
}

// civil is instant t's wall-clock time at offset off (seconds east of UTC),
// written as a UTC time: wall-clock arithmetic without any zone's jumps.
func civil(t time.Time, off int) time.Time {
	return t.UTC().Add(time.Duration(off) * time.Second)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
