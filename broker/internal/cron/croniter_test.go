package cron

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	robfig "github.com/robfig/cron/v3"

	"github.com/sluicemq/sluice/internal/testutil"
)

var (
	croniterCases = flag.Int("cron.cases", 2000, "random cases of TestNextMatchesCroniter")
	croniterSeed  = flag.Uint64("cron.seed", 0, "the seed of TestNextMatchesCroniter's cases (0: a new one, printed)")
)

// referenceQuiet is how long TestNextMatchesCroniter waits for the
// reference's next answer before it calls the reference hung.
const referenceQuiet = time.Minute

// zonesUnderTest are the time zones of the random cases: UTC and zones
// with clock changes of every kind: an hour forward and back (New York,
// Berlin, London), back in summer (Dublin's negative DST), at midnight
// (São Paulo until 2019, Havana, Santiago), by 30 minutes (Lord Howe),
// odd offsets (Chatham's +12:45, Kathmandu), changes several times a year
// (Casablanca around Ramadan), a whole day skipped (Apia, 2011-12-30), and
// none (Kolkata).
var zonesUnderTest = []string{
	"UTC", "America/New_York", "Europe/Berlin", "Europe/London", "Europe/Dublin",
	"America/Sao_Paulo", "America/Havana", "America/Santiago", "Australia/Lord_Howe",
	"Pacific/Chatham", "Asia/Kathmandu", "Africa/Casablanca", "Pacific/Apia", "Asia/Kolkata",
}

// TestNextMatchesCroniter checks Next against a second implementation:
// Debian's python3-croniter, for which wall-clock times match, and
// testdata/reference.py, written apart from this package with Python's
// zoneinfo, for the instants they run at across clock changes. Random
// specs in random zones, from random instants, half of them within two
// days of one of the zone's clock changes.
func TestNextMatchesCroniter(t *testing.T) {
	const python = "/usr/bin/python3"
	if out, err := exec.Command(python, "-c", "import croniter, zoneinfo").CombinedOutput(); err != nil {
		testutil.Missing(t, "debian", fmt.Sprintf("%s cannot import croniter (apt-get install python3-croniter): %v %s", python, err, out))
		return
	}
	seed := *croniterSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -cron.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	type refCase struct {
		Spec  string `json:"spec"` // croniter's order: seconds last
		Zone  string `json:"zone"`
		Start int64  `json:"start"`
		N     int    `json:"n"`
	}
	type goCase struct {
		spec string // robfig's order: seconds first
		sch  Schedule
	}
	var refs []refCase
	var gos []goCase
	for len(refs) < *croniterCases {
		fields, withSeconds := randomSpec(rng)
		spec := strings.Join(fields, " ")
		ref := strings.Join(fields, " ")
		if withSeconds {
			ref = strings.Join(append(fields[1:], fields[0]), " ")
		}
		zone := zonesUnderTest[rng.IntN(len(zonesUnderTest))]
		sch, err := Parse(spec, zone)
		if err != nil {
			continue // a spec naming days that never exist
		}
		refs = append(refs, refCase{Spec: ref, Zone: zone, Start: randomStart(rng, sch.loc).Unix(), N: 12})
		gos = append(gos, goCase{spec: spec, sch: sch})
	}

	cmd := exec.Command(python, "testdata/reference.py")
	cmd.Stderr = testutil.Writer(t, "reference.py: ")
	var in strings.Builder
	enc := json.NewEncoder(&in)
	for _, c := range refs {
		if err := enc.Encode(c); err != nil {
			t.Fatal(err)
		}
	}
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The reference gives up on a case after 5 seconds; a case that still
	// gets no answer a minute later means the reference hangs: kill it
	// and name the case, rather than wait for the test binary's timeout.
	// A t.Fatal below also kills it, so it never outlives the test.
	var answered atomic.Int64
	hung := make(chan int64, 1)
	watchdog := time.AfterFunc(referenceQuiet, func() {
		hung <- answered.Load()
		_ = cmd.Process.Kill()
	})
	t.Cleanup(func() {
		watchdog.Stop()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 1<<20)
	failures, unanswered := 0, 0
	for i := 0; sc.Scan(); i++ {
		answered.Store(int64(i + 1))
		watchdog.Reset(referenceQuiet)
		var got struct {
			Runs  []int64 `json:"runs"`
			Error string  `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &got); err != nil {
			t.Fatalf("case %d: reference answered %q: %v", i, sc.Text(), err)
		}
		c, g := refs[i], gos[i]
		if got.Error != "" {
			// croniter gives up on some specs (it finds no date, or
			// searches for ever): the case proves nothing, but more
			// than a few would mean the reference is broken.
			t.Logf("case %d (%q in %s from %d): the reference has no answer: %s", i, c.Spec, c.Zone, c.Start, got.Error)
			if unanswered++; unanswered > len(refs)/100 {
				t.Fatal("the reference answered too few cases")
			}
			continue
		}
		at := time.Unix(c.Start, 0)
		for k, want := range got.Runs {
			at = g.sch.Next(at)
			if at.Unix() != want {
				failures++
				loc := g.sch.loc
				t.Errorf("%q in %s from %s: run %d is %s, the reference says %s",
					g.spec, c.Zone, time.Unix(c.Start, 0).In(loc).Format(time.RFC3339), k+1,
					at.In(loc).Format(time.RFC3339), time.Unix(want, 0).In(loc).Format(time.RFC3339))
				break
			}
		}
		if failures >= 10 {
			t.Fatal("too many failures")
		}
		if i == len(refs)-1 && failures == 0 {
			t.Logf("%d cases agree", len(refs))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	watchdog.Stop()
	select {
	case i := <-hung:
		c := refs[i]
		t.Fatalf("case %d (%q in %s from %d): the reference answered nothing for %s and was killed", i, c.Spec, c.Zone, c.Start, referenceQuiet)
	default:
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("reference.py: %v", err)
	}
}

// randomSpec makes a cron spec of five fields, or six with seconds first
// (withSeconds), of the syntax both parsers read the same way.
func randomSpec(rng *rand.Rand) (fields []string, withSeconds bool) {
	months := []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}
	days := []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}
	withSeconds = rng.IntN(4) == 0
	if withSeconds {
		// A few seconds a minute at most: the reference steps through
		// every matching time of hours around each start, one by one.
		secs := []string{fmt.Sprint(rng.IntN(60)), fmt.Sprintf("%d,%d", rng.IntN(30), 30+rng.IntN(30)),
			fmt.Sprintf("*/%d", 10+rng.IntN(50)), fmt.Sprintf("%d-%d/15", rng.IntN(15), 45+rng.IntN(15))}
		fields = append(fields, secs[rng.IntN(len(secs))])
	}
	fields = append(fields,
		randomField(rng, 0, 59, nil, 0.2),
		randomField(rng, 0, 23, nil, 0.4),
	)
	// Days of month 1..28 only: croniter 1.3.5 skips the first days of a
	// month after a month too short for a day it looked for (from
	// February 16th, "0 0 1,16,31 * *" runs on March 16th, not 1st); the
	// table tests cover the 29th to 31st.
	dom := strings.ReplaceAll(randomField(rng, 1, 28, nil, 0.6), "*/", "1-28/")
	month := randomField(rng, 1, 12, months, 0.6)
	dow := randomField(rng, 0, 6, days, 0.6)
	if dom != "*" && allDays(dow) {
		// croniter reads a day-of-week field naming all seven days as
		// "*" (so both day fields must match); robfig's parser, like
		// Vixie cron, does not (either may), which the table tests
		// cover.
		dow = "*"
	}
	fields = append(fields, dom, month, dow)
	return fields, withSeconds
}

// allDays reports whether a day-of-week field names all seven days.
func allDays(dow string) bool {
	s, err := parser.Parse("0 0 * * " + dow)
	if err != nil {
		return false
	}
	const week = 1<<7 - 1
	return s.(*robfig.SpecSchedule).Dow&week == week
}

// randomField makes one field for values lo..hi: "*" with probability
// star, else a step, a value, a range, a stepped range or a list of those.
func randomField(rng *rand.Rand, lo, hi int, names []string, star float64) string {
	if rng.Float64() < star {
		return "*"
	}
	value := func() string {
		v := lo + rng.IntN(hi-lo+1)
		if names != nil && rng.IntN(3) == 0 {
			return names[v-lo]
		}
		return fmt.Sprint(v)
	}
	part := func() string {
		a := lo + rng.IntN(hi-lo+1)
		b := a + rng.IntN(hi-a+1)
		switch rng.IntN(4) {
		case 0:
			return value()
		case 1:
			return fmt.Sprintf("%d-%d", a, b)
		case 2:
			return fmt.Sprintf("%d-%d/%d", a, b, 1+rng.IntN(max(1, (hi-lo)/3)))
		}
		return value()
	}
	switch rng.IntN(5) {
	case 0:
		return fmt.Sprintf("*/%d", 2+rng.IntN(max(1, (hi-lo)/2)))
	case 1:
		parts := []string{part(), part()}
		if rng.IntN(2) == 0 {
			parts = append(parts, part())
		}
		return strings.Join(parts, ",")
	}
	return part()
}

// randomStart is a random whole second of 2005..2034, within two days of
// one of loc's clock changes half of the time.
func randomStart(rng *rand.Rand, loc *time.Location) time.Time {
	lo := time.Date(2005, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	hi := time.Date(2035, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	t := time.Unix(lo+rng.Int64N(hi-lo), 0)
	if rng.IntN(2) == 0 {
		if _, end := t.In(loc).ZoneBounds(); !end.IsZero() {
			t = end.Add(time.Duration(rng.Int64N(int64(96*time.Hour))) - 48*time.Hour).Truncate(time.Second)
		}
	}
	return t
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(m.Run())
}
