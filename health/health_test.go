package health_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/health"
)

var now = time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)

// queue builds a QueueInfo: depth visible messages (the longest-visible
// one visible for visibleFor, 0: none visible), delayed messages, and the
// given attributes.
func queue(t *testing.T, name string, visible, delayed int64, visibleFor time.Duration, attrs map[string]string) model.QueueInfo {
	t.Helper()
	cfg, err := model.ParseAttributes(name, attrs)
	if err != nil {
		t.Fatal(err)
	}
	q := model.QueueInfo{Queue: model.Queue{Name: name, Config: cfg}, Stats: model.QueueStats{Visible: visible, Delayed: delayed}}
	if visible+delayed > 0 {
		q.Stats.OldestSentAt = now.Add(-time.Hour)
	}
	if visibleFor > 0 {
		q.Stats.OldestVisibleSince = now.Add(-visibleFor)
	}
	return q
}

func redrive(dlq string) map[string]string {
	return map[string]string{model.AttrRedrivePolicy: `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:` + dlq + `","maxReceiveCount":3}`}
}

func byName(as []health.Queue) map[string]health.Queue {
	m := map[string]health.Queue{}
	for _, a := range as {
		m[a.Name] = a
	}
	return m
}

func want(t *testing.T, a health.Queue, h health.Health, reasons ...string) {
	t.Helper()
	if a.Health != h || strings.Join(a.Reasons, "; ") != strings.Join(reasons, "; ") {
		t.Errorf("%s: %s %q, want %s %q", a.Name, a.Health, a.Reasons, h, reasons)
	}
}

// TestDepthAndAge: a queue's depth and how long its longest-visible message
// has waited, against the defaults (1,000 / 10,000; 1 min / 5 min).
func TestDepthAndAge(t *testing.T) {
	t.Parallel()
	th := health.DefaultThresholds()
	for _, c := range []struct {
		visible int64
		waited  time.Duration
		want    health.Health
		why     string
	}{
		{999, 59 * time.Second, health.HealthOK, ""},
		{1200, 0, health.HealthWarning, "depth 1,200 ≥ 1,000"},
		{10000, 0, health.HealthCritical, "depth 10,000 ≥ 10,000"},
		{1, 61 * time.Second, health.HealthWarning, "oldest visible message 1m1s ≥ 1m0s"},
		{1, 6 * time.Minute, health.HealthCritical, "oldest visible message 6m0s ≥ 5m0s"},
	} {
		a := th.Assess([]model.QueueInfo{queue(t, "q", c.visible, 0, c.waited, nil)}, now)[0]
		var why []string
		if c.why != "" {
			why = []string{c.why}
		}
		want(t, a, c.want, why...)
		if a.Checks[health.CheckDepth] == "" || a.Checks[health.CheckAge] == "" || len(a.Checks) != 2 {
			t.Errorf("checks %v, want depth and age", a.Checks)
		}
	}
}

// TestDelayedIsNotOld: delayed and backing-off messages are not waiting: a
// queue of delayed messages sent an hour ago is ok, however old they are.
func TestDelayedIsNotOld(t *testing.T) {
	t.Parallel()
	a := health.DefaultThresholds().Assess([]model.QueueInfo{queue(t, "scheduled", 0, 50, 0, nil)}, now)[0]
	want(t, a, health.HealthOK)
	if a.OldestAge != time.Hour || a.VisibleAge != 0 {
		t.Errorf("ages %v (oldest) and %v (visible), want 1h and 0", a.OldestAge, a.VisibleAge)
	}
	// Once one is visible, its wait counts from when it became visible.
	a = health.DefaultThresholds().Assess([]model.QueueInfo{queue(t, "scheduled", 1, 49, 2*time.Minute, nil)}, now)[0]
	want(t, a, health.HealthWarning, "oldest visible message 2m0s ≥ 1m0s")
}

// TestDeadLetterQueueByCount: a dead-letter queue is judged by its count
// (1 warning, 100 critical by default), never by age; its source gets the
// dead-letter level; a queue without a RedrivePolicy has no dead-letter
// count (nil), one whose dead-letter queue is empty has 0.
func TestDeadLetterQueueByCount(t *testing.T) {
	t.Parallel()
	th := health.DefaultThresholds()
	for _, c := range []struct {
		n, want string
		dead    int64
	}{{"empty", "ok", 0}, {"one", "warning", 1}, {"99", "warning", 99}, {"100", "critical", 100}} {
		all := []model.QueueInfo{
			queue(t, "orders", 0, 0, 0, redrive("orders-dlq")),
			// Its messages have waited 14 days: no matter.
			queue(t, "orders-dlq", c.dead, 0, 14*24*time.Hour, nil),
			queue(t, "plain", 0, 0, 0, nil),
		}
		if c.dead == 0 {
			all[1].Stats.OldestVisibleSince = time.Time{}
		}
		m := byName(th.Assess(all, now))
		dlq, src, plain := m["orders-dlq"], m["orders"], m["plain"]
		if string(dlq.Health) != c.want || !dlq.IsDeadLetterQueue || src.IsDeadLetterQueue || dlq.Checks[health.CheckAge] != "" || dlq.Checks[health.CheckDepth] != "" {
			t.Errorf("%s: the DLQ is %s (%q, checks %v), want %s judged by its count only", c.n, dlq.Health, dlq.Reasons, dlq.Checks, c.want)
		}
		if dlq.Limits.AgeWarning != 0 || dlq.Limits.DepthWarning != 1 || dlq.Limits.DepthCritical != 100 {
			t.Errorf("%s: the DLQ's limits %+v, want 1 and 100, no age", c.n, dlq.Limits)
		}
		if src.DeadLetters == nil || *src.DeadLetters != c.dead || plain.DeadLetters != nil || dlq.DeadLetters != nil {
			t.Errorf("%s: dead letters %v (source), %v (plain), %v (the DLQ), want %d, nil, nil", c.n, src.DeadLetters, plain.DeadLetters, dlq.DeadLetters, c.dead)
		}
		wantSrc := health.HealthOK
		if c.dead > 0 {
			wantSrc = health.HealthWarning
		}
		if src.Health != wantSrc {
			t.Errorf("%s: the source is %s %q, want %s", c.n, src.Health, src.Reasons, wantSrc)
		}
	}
	m := byName(th.Assess([]model.QueueInfo{
		queue(t, "orders", 0, 0, 0, redrive("orders-dlq")),
		queue(t, "orders-dlq", 100, 0, 15*time.Minute, nil),
	}, now))
	want(t, m["orders-dlq"], health.HealthCritical, "100 dead letters ≥ 100")
	want(t, m["orders"], health.HealthWarning, "100 dead letters in orders-dlq")
	m = byName(th.Assess([]model.QueueInfo{
		queue(t, "orders", 0, 0, 0, redrive("orders-dlq")),
		queue(t, "orders-dlq", 1, 0, 15*time.Minute, nil),
	}, now))
	want(t, m["orders-dlq"], health.HealthWarning, "1 dead letter ≥ 1")
	// A RedrivePolicy naming a queue that does not exist: no count.
	a := th.Assess([]model.QueueInfo{queue(t, "orphan", 0, 0, 0, redrive("gone"))}, now)[0]
	if a.DeadLetters != nil || a.DeadLetterQueue != "gone" {
		t.Errorf("orphan: dead letters %v of %q, want nil of gone", a.DeadLetters, a.DeadLetterQueue)
	}
	// --health-dead-letters ignore: the source stays ok, the DLQ is judged.
	th.DeadLetters = health.DeadLettersIgnore
	m = byName(th.Assess([]model.QueueInfo{
		queue(t, "orders", 0, 0, 0, redrive("orders-dlq")),
		queue(t, "orders-dlq", 3, 0, time.Minute, nil),
	}, now))
	want(t, m["orders"], health.HealthOK)
	want(t, m["orders-dlq"], health.HealthWarning, "3 dead letters ≥ 1")
}

// TestOverrides: a queue's HealthDepth and HealthAge take the place of the
// broker's thresholds; on a dead-letter queue HealthDepth takes the place
// of the dead-letter thresholds, and HealthAge changes nothing.
func TestOverrides(t *testing.T) {
	t.Parallel()
	th := health.DefaultThresholds()
	m := byName(th.Assess([]model.QueueInfo{
		queue(t, "bulk", 5000, 0, 10*time.Minute, map[string]string{model.AttrHealthDepth: "100000,1000000", model.AttrHealthAge: "3600,0"}),
		queue(t, "urgent", 5, 0, 20*time.Second, map[string]string{model.AttrHealthDepth: "2,5", model.AttrHealthAge: "10,15"}),
		queue(t, "src", 0, 0, 0, redrive("dlq")),
		queue(t, "dlq", 20, 0, time.Hour, map[string]string{model.AttrHealthDepth: "50,500", model.AttrHealthAge: "1,2"}),
		queue(t, "off", 50000, 0, time.Hour, map[string]string{model.AttrHealthDepth: "0,0", model.AttrHealthAge: "0,0"}),
	}, now))
	want(t, m["bulk"], health.HealthOK)
	if l := m["bulk"].Limits; l.DepthWarning != 100000 || l.AgeWarning != time.Hour || l.AgeCritical != 0 {
		t.Errorf("bulk's limits %+v", l)
	}
	want(t, m["urgent"], health.HealthCritical, "depth 5 ≥ 5", "oldest visible message 20s ≥ 15s")
	want(t, m["dlq"], health.HealthOK)
	want(t, m["off"], health.HealthOK)
	m = byName(th.Assess([]model.QueueInfo{
		queue(t, "src", 0, 0, 0, redrive("dlq")),
		queue(t, "dlq", 60, 0, time.Hour, map[string]string{model.AttrHealthDepth: "50,500"}),
	}, now))
	want(t, m["dlq"], health.HealthWarning, "60 dead letters ≥ 50")
}

func TestParseThresholds(t *testing.T) {
	t.Parallel()
	th := health.DefaultThresholds()
	if err := th.ParseDLQDepthThresholds("5,50"); err != nil || th.DLQDepthWarning != 5 || th.DLQDepthCritical != 50 {
		t.Errorf("ParseDLQDepthThresholds(5,50): %v, %+v", err, th)
	}
	for _, bad := range []string{"5", "50,5", "a,b", "-1,5"} {
		if err := th.ParseDLQDepthThresholds(bad); err == nil {
			t.Errorf("ParseDLQDepthThresholds(%q) accepted", bad)
		}
	}
	if th.DLQDepthWarning != 5 || th.DLQDepthCritical != 50 {
		t.Errorf("a refused value changed the thresholds: %+v", th)
	}
	bad := health.DefaultThresholds()
	bad.DLQDepthWarning, bad.DLQDepthCritical = 10, 5
	if bad.Validate() == nil {
		t.Error("Validate accepts DLQDepthCritical below DLQDepthWarning")
	}
	if health.HealthOK.Level() != 0 || health.HealthWarning.Level() != 1 || health.HealthCritical.Level() != 2 {
		t.Error("levels are not 0, 1, 2")
	}
}
