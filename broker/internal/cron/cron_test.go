package cron

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// runs returns the n runs of spec in zone after start (RFC 3339).
func runs(t *testing.T, spec, zone, start string, n int) []string {
	t.Helper()
	s, err := Parse(spec, zone)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", spec, zone, err)
	}
	at, err := time.Parse(time.RFC3339, start)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for range n {
		next := s.Next(at)
		if !next.After(at) {
			t.Fatalf("%q in %s: Next(%s) = %s, not after it", spec, zone, at.Format(time.RFC3339), next.Format(time.RFC3339))
		}
		at = next
		out = append(out, at.Format(time.RFC3339))
	}
	return out
}

// TestNextKnownRuns checks Next against runs worked out by hand: the field
// rules, and every kind of clock change with the rule of the package
// comment.
func TestNextKnownRuns(t *testing.T) {
	for _, c := range []struct {
		name, spec, zone, start string
		want                    []string
	}{
		{"five fields", "30 2 * * 1-5", "UTC", "2024-01-05T03:00:00Z",
			[]string{"2024-01-08T02:30:00Z", "2024-01-09T02:30:00Z"}},
		{"seconds first", "*/20 * * * * *", "UTC", "2024-01-01T00:00:00Z",
			[]string{"2024-01-01T00:00:20Z", "2024-01-01T00:00:40Z", "2024-01-01T00:01:00Z"}},
		{"names", "0 9 * jan,jul mon", "UTC", "2024-01-02T00:00:00Z",
			[]string{"2024-01-08T09:00:00Z", "2024-01-15T09:00:00Z", "2024-01-22T09:00:00Z", "2024-01-29T09:00:00Z", "2024-07-01T09:00:00Z"}},
		{"both day fields: either", "0 0 13 * 5", "UTC", "2024-09-01T00:00:00Z",
			[]string{"2024-09-06T00:00:00Z", "2024-09-13T00:00:00Z", "2024-09-20T00:00:00Z", "2024-09-27T00:00:00Z", "2024-10-04T00:00:00Z", "2024-10-11T00:00:00Z", "2024-10-13T00:00:00Z"}},
		{"a stepped day field is restricted: either", "0 0 */15 * 1", "UTC", "2024-01-01T00:00:00Z",
			[]string{"2024-01-08T00:00:00Z", "2024-01-15T00:00:00Z", "2024-01-16T00:00:00Z", "2024-01-22T00:00:00Z"}},
		{"a day-of-week range of every day is restricted: either", "0 0 13 * 0-6", "UTC", "2024-01-01T00:00:00Z",
			[]string{"2024-01-02T00:00:00Z", "2024-01-03T00:00:00Z"}},
		{"a day field of *: both", "0 0 * * 1", "UTC", "2024-01-01T00:00:00Z",
			[]string{"2024-01-08T00:00:00Z", "2024-01-15T00:00:00Z"}},
		{"31st only in long months", "0 0 31 * *", "UTC", "2024-01-31T00:00:00Z",
			[]string{"2024-03-31T00:00:00Z", "2024-05-31T00:00:00Z", "2024-07-31T00:00:00Z", "2024-08-31T00:00:00Z"}},
		{"after February's last day, the 1st", "0 0 1,16,31 * *", "UTC", "2023-02-16T00:00:00Z",
			[]string{"2023-03-01T00:00:00Z", "2023-03-16T00:00:00Z", "2023-03-31T00:00:00Z"}},
		{"29th of February", "0 0 29 2 *", "UTC", "2023-01-01T00:00:00Z",
			[]string{"2024-02-29T00:00:00Z", "2028-02-29T00:00:00Z"}},
		{"@daily", "@daily", "Europe/Berlin", "2024-06-01T12:00:00+02:00",
			[]string{"2024-06-02T00:00:00+02:00", "2024-06-03T00:00:00+02:00"}},
		{"@midnight", "@midnight", "UTC", "2024-06-01T12:00:00Z", []string{"2024-06-02T00:00:00Z"}},
		{"@hourly", "@hourly", "UTC", "2024-06-01T12:00:00Z", []string{"2024-06-01T13:00:00Z"}},
		{"@weekly", "@weekly", "UTC", "2024-06-01T12:00:00Z", []string{"2024-06-02T00:00:00Z", "2024-06-09T00:00:00Z"}},
		{"@monthly", "@monthly", "UTC", "2024-06-01T12:00:00Z", []string{"2024-07-01T00:00:00Z"}},
		{"@yearly", "@yearly", "UTC", "2024-06-01T12:00:00Z", []string{"2025-01-01T00:00:00Z"}},
		{"@annually", "@annually", "UTC", "2024-06-01T12:00:00Z", []string{"2025-01-01T00:00:00Z"}},

		// New York: 2024-03-10 02:00 EST -> 03:00 EDT; 2024-11-03 02:00 EDT -> 01:00 EST.
		{"NY spring, a time in the gap runs at the jump", "30 2 * * *", "America/New_York", "2024-03-09T23:00:00-05:00",
			[]string{"2024-03-10T03:00:00-04:00", "2024-03-11T02:30:00-04:00"}},
		{"NY spring, several times in the gap run once", "*/20 2 * * *", "America/New_York", "2024-03-10T01:50:00-05:00",
			[]string{"2024-03-10T03:00:00-04:00", "2024-03-11T02:00:00-04:00"}},
		{"NY spring, a time before the gap", "30 1 * * *", "America/New_York", "2024-03-09T23:00:00-05:00",
			[]string{"2024-03-10T01:30:00-05:00", "2024-03-11T01:30:00-04:00"}},
		{"NY fall, a repeated time runs the first time", "30 1 * * *", "America/New_York", "2024-11-02T23:00:00-04:00",
			[]string{"2024-11-03T01:30:00-04:00", "2024-11-04T01:30:00-05:00"}},
		{"NY fall, from within the repeated hour", "30 1 * * *", "America/New_York", "2024-11-03T01:10:00-05:00",
			[]string{"2024-11-04T01:30:00-05:00"}},
		{"NY fall, after the repeat", "30 2 * * *", "America/New_York", "2024-11-02T23:00:00-04:00",
			[]string{"2024-11-03T02:30:00-05:00"}},
		{"NY spring, hourly keeps real time", "0 * * * *", "America/New_York", "2024-03-10T00:30:00-05:00",
			[]string{"2024-03-10T01:00:00-05:00", "2024-03-10T03:00:00-04:00", "2024-03-10T04:00:00-04:00"}},
		{"NY spring, half past every hour", "30 * * * *", "America/New_York", "2024-03-10T01:00:00-05:00",
			[]string{"2024-03-10T01:30:00-05:00", "2024-03-10T03:30:00-04:00"}},
		{"NY fall, hourly runs in both hours", "@hourly", "America/New_York", "2024-11-03T00:30:00-04:00",
			[]string{"2024-11-03T01:00:00-04:00", "2024-11-03T01:00:00-05:00", "2024-11-03T02:00:00-05:00"}},
		{"NY fall, every 15 minutes in both hours", "*/15 * * * *", "America/New_York", "2024-11-03T01:40:00-04:00",
			[]string{"2024-11-03T01:45:00-04:00", "2024-11-03T01:00:00-05:00", "2024-11-03T01:15:00-05:00"}},

		// Lord Howe: half-hour changes. 2024-10-06 02:00 +10:30 -> 02:30 +11;
		// 2024-04-07 02:00 +11 -> 01:30 +10:30.
		{"Lord Howe spring", "15 2 * * *", "Australia/Lord_Howe", "2024-10-05T12:00:00+10:30",
			[]string{"2024-10-06T02:30:00+11:00", "2024-10-07T02:15:00+11:00"}},
		{"Lord Howe fall", "45 1 * * *", "Australia/Lord_Howe", "2024-04-06T12:00:00+11:00",
			[]string{"2024-04-07T01:45:00+11:00", "2024-04-08T01:45:00+10:30"}},
		{"Lord Howe fall, every 10 minutes", "*/10 * * * *", "Australia/Lord_Howe", "2024-04-07T01:55:00+11:00",
			[]string{"2024-04-07T01:30:00+10:30", "2024-04-07T01:40:00+10:30"}},

		// São Paulo, 2018-11-04: midnight does not exist (00:00 -> 01:00).
		{"São Paulo, midnight in the gap", "0 0 * * *", "America/Sao_Paulo", "2018-11-03T12:00:00-03:00",
			[]string{"2018-11-04T01:00:00-02:00", "2018-11-05T00:00:00-02:00"}},
		// Apia skipped 2011-12-30 whole (-10 -> +14).
		{"Apia, a day skipped", "0 12 * * *", "Pacific/Apia", "2011-12-29T00:00:00-10:00",
			[]string{"2011-12-29T12:00:00-10:00", "2011-12-31T00:00:00+14:00", "2011-12-31T12:00:00+14:00"}},
		// Dublin: winter time is the negative DST; the clock still goes
		// back an hour on 2024-10-27 (02:00 IST -> 01:00 GMT).
		{"Dublin fall", "30 1 * * *", "Europe/Dublin", "2024-10-26T12:00:00+01:00",
			[]string{"2024-10-27T01:30:00+01:00", "2024-10-28T01:30:00Z"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := runs(t, c.spec, c.zone, c.start, len(c.want))
			loc, _ := LoadZone(c.zone)
			for i := range c.want {
				w, _ := time.Parse(time.RFC3339, c.want[i])
				g, _ := time.Parse(time.RFC3339, got[i])
				if !g.Equal(w) {
					t.Fatalf("%q in %s from %s: runs %v, want %v (run %d: %s, want %s)", c.spec, c.zone, c.start,
						got, c.want, i+1, g.In(loc).Format(time.RFC3339), w.In(loc).Format(time.RFC3339))
				}
			}
		})
	}
}

// TestNextAcrossYearEndsPastTheTable: past a zone's table of transitions
// (2037 in Go's), time.Time.ZoneBounds answers, in a year's last hours, an
// end at or before the instant asked about, and Next looped for ever there
// (found by TestNextMatchesCroniter with -cron.seed=7410991069773719614
// -cron.cases=20000: a yearly run in Pacific/Chatham from 2040-11-23).
// From every half hour of the last two days of several such years, in
// every zone under test, the next run of a yearly noon is the next year's.
func TestNextAcrossYearEndsPastTheTable(t *testing.T) {
	t.Parallel()
	for _, zone := range zonesUnderTest {
		s, err := Parse("0 12 1 1 *", zone)
		if err != nil {
			t.Fatal(err)
		}
		for year := 2038; year <= 2046; year++ {
			want := time.Date(year+1, 1, 1, 12, 0, 0, 0, s.loc)
			for at := time.Date(year, 12, 30, 0, 0, 0, 0, s.loc); at.Year() == year; at = at.Add(30 * time.Minute) {
				if got := s.Next(at); !got.Equal(want) {
					t.Fatalf("%s: Next(%s) = %s, want %s", zone, at.Format(time.RFC3339), got.Format(time.RFC3339), want.Format(time.RFC3339))
				}
			}
		}
	}
	s, err := Parse("51-54/9 19-22/7 23-23/9 11-12/3 *", "Pacific/Chatham")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2040, 11, 23, 19, 51, 0, 0, s.loc)
	if got, want := s.Next(at), at.AddDate(1, 0, 0); !got.Equal(want) {
		t.Fatalf("Next(%s) = %s, want %s", at.Format(time.RFC3339), got.Format(time.RFC3339), want.Format(time.RFC3339))
	}
}

func TestEvery(t *testing.T) {
	s, err := Parse("@every 1h30m", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	if s.Interval() != 90*time.Minute {
		t.Fatalf("Interval = %v", s.Interval())
	}
	// Real time, whatever the zone: across Berlin's spring change too.
	at := time.Date(2024, 3, 31, 0, 15, 0, 0, time.UTC)
	if got := s.Next(at); !got.Equal(at.Add(90 * time.Minute)) {
		t.Fatalf("Next = %v", got)
	}
}

func TestFirstAfter(t *testing.T) {
	run := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	every, _ := Parse("@every 10m", "")
	for _, c := range []struct {
		t    time.Duration // after run
		want time.Duration
	}{{-time.Hour, 0}, {0, 10 * time.Minute}, {time.Minute, 10 * time.Minute}, {10 * time.Minute, 20 * time.Minute}, {25 * time.Hour, 25*time.Hour + 10*time.Minute}} {
		if got := every.FirstAfter(run, run.Add(c.t)); !got.Equal(run.Add(c.want)) {
			t.Errorf("@every 10m: FirstAfter(run, run%+v) = run%+v, want run%+v", c.t, got.Sub(run), c.want)
		}
	}
	daily, _ := Parse("0 3 * * *", "")
	if got := daily.FirstAfter(run, run.Add(50*time.Hour)); !got.Equal(time.Date(2024, 1, 3, 3, 0, 0, 0, time.UTC)) {
		t.Errorf("daily: FirstAfter = %v", got)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, c := range []struct{ spec, zone, want string }{
		{"", "", "give a cron expression"},
		{"61 * * * *", "", "above maximum"},
		{"* * *", "", "expected 5 to 6 fields"},
		{"0 0 * * 7", "", "above maximum"},
		{"0 0 30 2 *", "", "never runs"},
		{"0 0 31 4,6,9,11 *", "", "never runs"},
		{"@every", "", "@every needs an interval"},
		{"@every 500ms", "", "at least 1s"},
		{"@every 1.5s", "", "whole number of seconds"},
		{"@every 0s", "", "at least 1s"},
		{"@every -5m", "", "at least 1s"},
		{"@every soon", "", "not a duration"},
		{"@every 9000h", "", "at most 8784h"},
		{"@fortnightly", "", "unrecognized descriptor"},
		{"TZ=UTC 0 * * * *", "", "time zone as the schedule's time zone"},
		{"CRON_TZ=UTC 0 * * * *", "", "time zone as the schedule's time zone"},
		{"0 * * * *", "Mars/Olympus_Mons", "unknown time zone"},
		{"0 * * * *", "Local", "Local would be each broker's own"},
		{"0 * * * *", "../etc/passwd", "unknown time zone"},
	} {
		_, err := Parse(c.spec, c.zone)
		if !errors.Is(err, model.ErrInvalidParameterValue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q, %q) = %v, want ErrInvalidParameterValue saying %q", c.spec, c.zone, err, c.want)
		}
	}
	for _, zone := range []string{"", "UTC", "Asia/Tokyo", "America/Argentina/Buenos_Aires", "Etc/GMT+5"} {
		if _, err := Parse("0 * * * *", zone); err != nil {
			t.Errorf("Parse in %q: %v", zone, err)
		}
	}
}
