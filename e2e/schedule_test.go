package e2e

import (
	"context"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
	sclient "github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/testutil"
)

// The schedules' exactly-once tests: a schedule every second, brokers
// killed with SIGKILL at the instant a run is due, and then every run from
// the first to the last is stored exactly once.

// nativeClient is a client of the native API at url, closed at cleanup.
func nativeClient(t *testing.T, url string) *sclient.Client {
	t.Helper()
	c, err := sclient.New(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// untilRunDue sleeps until a run of an every-second schedule is due (the
// next whole second of the wall clock, which the brokers run on) plus a few
// random milliseconds, within which the brokers' runners are storing it.
// It times the kill that follows; it does not wait for a condition.
func untilRunDue(rng *rand.Rand) {
	now := time.Now()
	time.Sleep(now.Truncate(time.Second).Add(time.Second).Sub(now) + time.Duration(rng.IntN(4000))*time.Microsecond)
}

// waitForRun waits until schedule name stores a run after the call (its
// Sent count grows twice: the first may be a run already under way).
func waitForRun(t *testing.T, ctx context.Context, c *sclient.Client, name string) {
	t.Helper()
	s, err := c.GetSchedule(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "a run of "+name, func() bool {
		got, err := c.GetSchedule(ctx, name)
		return err == nil && got.Sent >= s.Sent+2
	})
}

// checkEveryRunOnce pauses schedule name (of queue), then checks that the
// queue holds exactly one message for every run from its first (first) to
// its last (LastRun): each message's dedup id is its run's key, its id
// the run's derived id, the runs are consecutive seconds with none missed
// or stored twice, and the schedule counted as many stores as there are
// messages (a run stored by two brokers would count twice even if the
// queue's deduplication dropped the second message).
func checkEveryRunOnce(t *testing.T, ctx context.Context, c *sclient.Client, name, queue string, first time.Time) {
	t.Helper()
	s, err := c.PauseSchedule(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	last := s.LastRun
	runs := int64(last.Sub(first)/time.Second) + 1
	t.Logf("schedule %s: runs %s..%s (%d), sent %d, missed %d", name, first.Format(time.RFC3339), last.Format(time.RFC3339), runs, s.Sent, s.MissedRuns)
	if s.MissedRuns != 0 || s.Sent != runs {
		t.Errorf("schedule %s: sent %d and missed %d, want %d runs sent and none missed", name, s.Sent, s.MissedRuns, runs)
	}
	st, err := c.Stats(ctx, queue)
	if err != nil {
		t.Fatal(err)
	}
	if st.Depth != runs {
		t.Errorf("queue %s holds %d messages, want %d (one per run)", queue, st.Depth, runs)
	}
	seen := map[int64]int{}
	var scheduleID string
	for {
		ds, err := c.Receive(ctx, queue, sclient.MaxMessages(10), sclient.WaitTime(0), sclient.VisibilityTimeout(10*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			id, unix, ok := strings.Cut(d.DedupID, "@")
			sec, err := strconv.ParseInt(unix, 10, 64)
			if !ok || err != nil {
				t.Fatalf("message %s: dedup id %q is not a run's key", d.ID, d.DedupID)
			}
			if scheduleID == "" {
				scheduleID = id
			}
			at := time.Unix(sec, 0)
			if id != scheduleID || d.ID != model.ScheduleRunMessageID(id, at) {
				t.Errorf("message %s: run key %s, not the schedule's run's message", d.ID, d.DedupID)
			}
			seen[sec]++
		}
	}
	var dup, missing []string
	for sec := first.Unix(); sec <= last.Unix(); sec++ {
		switch n := seen[sec]; {
		case n == 0:
			missing = append(missing, time.Unix(sec, 0).UTC().Format(time.TimeOnly))
		case n > 1:
			dup = append(dup, time.Unix(sec, 0).UTC().Format(time.TimeOnly)+"×"+strconv.Itoa(n))
		}
		delete(seen, sec)
	}
	var extra []int64
	for sec := range seen {
		extra = append(extra, sec)
	}
	sort.Slice(extra, func(i, j int) bool { return extra[i] < extra[j] })
	if len(dup) > 0 || len(missing) > 0 || len(extra) > 0 {
		t.Errorf("schedule %s: runs stored twice %v, runs missing %v, messages of no run in the range %v", name, dup, missing, extra)
	}
}

// TestScheduleThreeBrokersKilled runs three brokers on one PostgreSQL
// database with a schedule every second and kills one of them with
// SIGKILL right when a run is due, again and again (each restarted
// after): every run is stored exactly once. The brokers race for every
// run (FOR UPDATE SKIP LOCKED on the schedule's row, and a
// compare-and-set on its next run in the transaction that stores the
// message), so a killed broker is often the one inside that transaction;
// PostgreSQL then rolls it back and another broker stores the run.
// SLUICE_CRASH_CYCLES sets the number of kills (default 6; 20 at full
// scale).
func TestScheduleThreeBrokersKilled(t *testing.T) {
	url := pgDatabase(t)
	kills := testutil.Scale(t, "SLUICE_CRASH_CYCLES", 6, 20, 1)
	ctx := ctxT(t)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 26))
	// Broker 0 creates the schedule; brokers 1 and 2 start after it, so
	// their runners' first look (at start) finds it, and all three race
	// for every run from then on.
	procs := []*brokerProc{startBroker(t, t.TempDir(), "--store", url)}
	c := nativeClient(t, procs[0].URL)
	if _, err := c.CreateQueue(ctx, "ticks", nil); err != nil {
		t.Fatal(err)
	}
	s, err := c.CreateSchedule(ctx, sclient.ScheduleSpec{Name: "tick", Queue: "ticks", Spec: "* * * * * *", Message: sclient.Message{Body: "tick"}})
	if err != nil {
		t.Fatal(err)
	}
	first := s.NextRun
	procs = append(procs, startBroker(t, t.TempDir(), "--store", url), startBroker(t, t.TempDir(), "--store", url))
	for k := range kills {
		i := 1 + k%2 // brokers 1 and 2; broker 0 serves the test's client
		waitForRun(t, ctx, c, "tick")
		untilRunDue(rng)
		procs[i].kill()
		t.Logf("kill %d: broker %d killed at %s", k+1, i, time.Now().Format("15:04:05.000"))
		procs[i] = startBroker(t, t.TempDir(), "--store", url)
	}
	waitForRun(t, ctx, c, "tick")
	checkEveryRunOnce(t, ctx, c, "tick", "ticks", first)
}

// TestScheduleEmbeddedKill9 runs a schedule every second on the embedded
// store and kills the broker with kill -9 right when a run is due, again
// and again, restarting it on the same data directory: a run whose batch
// (the message and the schedule moved past it, one Pebble batch) was
// written before the kill is not sent again, and one whose batch was not
// is sent after the restart, late but within the grace: every run is
// stored exactly once. SLUICE_CRASH_CYCLES sets the number of kills
// (default 4; 20 at full scale).
func TestScheduleEmbeddedKill9(t *testing.T) {
	kills := testutil.Scale(t, "SLUICE_CRASH_CYCLES", 4, 20, 1)
	dir := t.TempDir()
	ctx := ctxT(t)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 9))
	p := startBroker(t, dir)
	c := nativeClient(t, p.URL)
	if _, err := c.CreateQueue(ctx, "ticks", nil); err != nil {
		t.Fatal(err)
	}
	s, err := c.CreateSchedule(ctx, sclient.ScheduleSpec{Name: "tick", Queue: "ticks", Spec: "@every 1s", Message: sclient.Message{Body: "tick"}})
	if err != nil {
		t.Fatal(err)
	}
	first := s.NextRun
	for k := range kills {
		waitForRun(t, ctx, c, "tick")
		untilRunDue(rng)
		p.kill()
		t.Logf("kill %d at %s", k+1, time.Now().Format("15:04:05.000"))
		p = startBroker(t, dir)
		c = nativeClient(t, p.URL)
	}
	// The runs due while the broker was down are sent once it is up.
	waitForRun(t, ctx, c, "tick")
	checkEveryRunOnce(t, ctx, c, "tick", "ticks", first)
}
