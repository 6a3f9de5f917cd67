package metrics_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/health"
	"github.com/sluicemq/sluice/internal/testbroker"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/live"
	"github.com/sluicemq/sluice/metrics"
	"github.com/sluicemq/sluice/server"
)

// healthEnv is a real server with both /metrics and /v1/stats on a fake
// clock, the two given the same thresholds, as sluice serve does.
type healthEnv struct {
	*env
	lv    *live.Live
	clock *clocktest.FakeClock
}

func setupHealth(t *testing.T, th health.Thresholds) *healthEnv {
	t.Helper()
	clock := clocktest.NewFakeClock(time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC))
	m := metrics.New()
	m.SetThresholds(th)
	cfg := live.DefaultConfig()
	cfg.Interval, cfg.Thresholds = time.Minute, th // the test samples itself
	lv, err := live.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := testbroker.Start(t, testbroker.Config{Clock: clock, Observer: model.Observers(m, lv),
		Server: func(c *server.Config) { c.Metrics, c.Live = m, lv }})
	m.Attach(b.Front)
	return &healthEnv{env: &env{t: t, b: b}, lv: lv, clock: clock}
}

// getJSON GETs path into v.
func (e *healthEnv) getJSON(path string, v any) {
	e.t.Helper()
	resp, err := http.Get(e.b.URL + path)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		e.t.Fatalf("GET %s: %s %s", path, resp.Status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		e.t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}

// view is a queue as /v1/stats, the queue's own stats and /metrics give it.
type view struct {
	stats  live.QueueStats
	own    *int64 // GET /v1/queues/{queue}: stats.deadLetters
	fams   map[string]*dto.MetricFamily
	health float64
}

// read samples, then reads /v1/stats, every queue's own stats and /metrics,
// and checks that they agree on each queue: the health state
// (sluice_queue_health), each check, the wait of the longest-visible
// message, and the dead-letter count (null, and no series, without a
// dead-letter queue).
func (e *healthEnv) read(names ...string) map[string]view {
	e.t.Helper()
	if _, err := e.lv.Sample(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	var snap live.Snapshot
	e.getJSON("/v1/stats", &snap)
	fams := e.scrape()
	out := map[string]view{}
	for _, name := range names {
		var s live.QueueStats
		for _, q := range snap.Queues {
			if q.Name == name {
				s = q
			}
		}
		if s.Name != name {
			e.t.Fatalf("%s not in /v1/stats", name)
		}
		var own struct {
			Stats struct {
				DeadLetters             *int64 `json:"deadLetters"`
				OldestVisibleAgeSeconds int64  `json:"oldestVisibleAgeSeconds"`
			} `json:"stats"`
		}
		e.getJSON("/v1/queues/"+name, &own)
		v := view{stats: s, own: own.Stats.DeadLetters, fams: fams}
		h, ok := value(fams, "sluice_queue_health", "queue="+name)
		if !ok {
			e.t.Fatalf("no sluice_queue_health for %s", name)
		}
		v.health = h
		if want := float64(s.Health.Level()); h != want {
			e.t.Errorf("%s: sluice_queue_health %v, /v1/stats %s (%v)", name, h, s.Health, s.HealthReasons)
		}
		worst := 0.0
		for _, c := range health.Checks {
			if l, ok := value(fams, "sluice_queue_health_check", "queue="+name, "check="+string(c)); ok {
				worst = max(worst, l)
			}
		}
		if worst != h {
			e.t.Errorf("%s: the worst check is %v, the health %v", name, worst, h)
		}
		if age, _ := value(fams, "sluice_queue_oldest_visible_age_seconds", "queue="+name); age != s.OldestVisibleAgeSeconds || int64(age) != own.Stats.OldestVisibleAgeSeconds {
			e.t.Errorf("%s: visible for %v s (/metrics), %v s (/v1/stats), %v s (its stats)", name, age, s.OldestVisibleAgeSeconds, own.Stats.OldestVisibleAgeSeconds)
		}
		dead, ok := value(fams, "sluice_queue_dead_letters", "queue="+name)
		switch {
		case (s.DeadLetters == nil) != (own.Stats.DeadLetters == nil) || (s.DeadLetters == nil) == ok:
			e.t.Errorf("%s: deadLetters %v (/v1/stats), %v (its stats), series %v", name, s.DeadLetters, own.Stats.DeadLetters, ok)
		case s.DeadLetters != nil && (*s.DeadLetters != *own.Stats.DeadLetters || float64(*s.DeadLetters) != dead):
			e.t.Errorf("%s: deadLetters %d (/v1/stats), %d (its stats), %v (/metrics)", name, *s.DeadLetters, *own.Stats.DeadLetters, dead)
		}
		out[name] = v
	}
	return out
}

// TestHealthAgreesWithStats: on a real server, /v1/stats, the queues' own
// stats and /metrics agree on a source queue, its dead-letter queue, a
// queue of delayed messages only, a late queue and a plain one; a
// dead-letter queue holding one 15-minute-old message warns and does not
// page, one holding 100 is critical.
func TestHealthAgreesWithStats(t *testing.T) {
	t.Parallel()
	e := setupHealth(t, health.DefaultThresholds())
	ctx := context.Background()
	f := e.b.Front
	for _, q := range []struct {
		name  string
		attrs map[string]string
	}{
		{"orders-dlq", map[string]string{model.AttrMessageRetentionPeriod: "1209600"}},
		{"orders", map[string]string{model.AttrRedrivePolicy: `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:orders-dlq","maxReceiveCount":1}`}},
		{"scheduled", nil},
		{"late", nil},
		{"plain", nil},
	} {
		if _, err := f.CreateQueue(ctx, q.name, q.attrs, nil); err != nil {
			t.Fatal(err)
		}
	}
	send := func(queue string, e model.SendEntry) {
		t.Helper()
		if _, err := f.Send(ctx, queue, []model.SendEntry{e}); err != nil {
			t.Fatal(err)
		}
	}
	// A dead letter: its one receive failed.
	send("orders", model.SendEntry{Body: "charge"})
	ds, err := f.Receive(ctx, model.ReceiveRequest{Queue: "orders", MaxMessages: 1})
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive: %v, %v", ds, err)
	}
	if _, err := f.ChangeVisibility(ctx, "orders", []model.VisibilityEntry{{ID: "1", Receipt: ds[0].Receipt, Timeout: 0}}); err != nil {
		t.Fatal(err)
	}
	delay := 15 * time.Minute
	send("scheduled", model.SendEntry{Body: "tomorrow", Delay: &delay})
	send("late", model.SendEntry{Body: "waiting"})
	e.clock.Advance(14*time.Minute + 59*time.Second) // the seed's 14m56s and more

	v := e.read("orders-dlq", "orders", "scheduled", "late", "plain")
	dlq := v["orders-dlq"].stats
	if !dlq.IsDeadLetterQueue || dlq.Health != health.HealthWarning || strings.Join(dlq.HealthReasons, ";") != "1 dead letter ≥ 1" || dlq.OldestVisibleAgeSeconds < 899 {
		t.Errorf("orders-dlq: %s %q (visible for %v s), want a warning for its one dead letter, not its age", dlq.Health, dlq.HealthReasons, dlq.OldestVisibleAgeSeconds)
	}
	if _, ok := value(v["orders-dlq"].fams, "sluice_queue_health_check", "queue=orders-dlq", "check=age"); ok {
		t.Error("a dead-letter queue has an age check")
	}
	if src := v["orders"].stats; src.Health != health.HealthWarning || src.DeadLetters == nil || *src.DeadLetters != 1 || src.IsDeadLetterQueue {
		t.Errorf("orders: %s %q, dead letters %v; want a warning for the dead letter in orders-dlq", src.Health, src.HealthReasons, src.DeadLetters)
	}
	if s := v["scheduled"].stats; s.Health != health.HealthOK || s.OldestVisibleAgeSeconds != 0 || s.OldestAgeSeconds < 899 {
		t.Errorf("scheduled (delayed only): %s %q, visible for %v s, oldest %v s; want ok", s.Health, s.HealthReasons, s.OldestVisibleAgeSeconds, s.OldestAgeSeconds)
	}
	if s := v["late"].stats; s.Health != health.HealthCritical || s.OldestVisibleAgeSeconds < 899 {
		t.Errorf("late: %s %q; want critical for its message waiting 15 minutes", s.Health, s.HealthReasons)
	}
	if s := v["plain"]; s.stats.Health != health.HealthOK || s.stats.DeadLetters != nil || s.own != nil {
		t.Errorf("plain: %s, deadLetters %v (/v1/stats) %v (its stats); want ok and null in both", s.stats.Health, s.stats.DeadLetters, s.own)
	}

	// 100 dead letters page.
	for range 99 {
		send("orders-dlq", model.SendEntry{Body: "x"})
	}
	v = e.read("orders-dlq", "orders")
	if dlq := v["orders-dlq"]; dlq.stats.Health != health.HealthCritical || dlq.health != 2 {
		t.Errorf("orders-dlq with 100 dead letters: %s %q, sluice_queue_health %v; want critical", dlq.stats.Health, dlq.stats.HealthReasons, dlq.health)
	}
}

// TestDeadLetterQueueKeptFourteenDays is docs/examples.md's dead-letter
// scenario: a dead-letter queue keeps its dead letters 14 days
// (MessageRetentionPeriod 1209600) and pages only at 100. One dead letter
// is a warning on /v1/stats and /metrics for as long as it is kept (13
// days on), never critical; 100 are critical; 14 days after it was sent,
// the first expires, and 99 are a warning again.
func TestDeadLetterQueueKeptFourteenDays(t *testing.T) {
	t.Parallel()
	e := setupHealth(t, health.DefaultThresholds())
	ctx := context.Background()
	f := e.b.Front
	if _, err := f.CreateQueue(ctx, "payments-dlq", map[string]string{model.AttrMessageRetentionPeriod: "1209600"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.CreateQueue(ctx, "payments", map[string]string{
		model.AttrRedrivePolicy: `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:payments-dlq","maxReceiveCount":1}`}, nil); err != nil {
		t.Fatal(err)
	}
	fail := func(n int) {
		t.Helper()
		for range n {
			if _, err := f.Send(ctx, "payments", []model.SendEntry{{Body: "charge $100"}}); err != nil {
				t.Fatal(err)
			}
			ds, err := f.Receive(ctx, model.ReceiveRequest{Queue: "payments", MaxMessages: 1})
			if err != nil || len(ds) != 1 {
				t.Fatalf("receive: %v, %v", ds, err)
			}
			if _, err := f.ChangeVisibility(ctx, "payments", []model.VisibilityEntry{{ID: "1", Receipt: ds[0].Receipt}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	level := func(check string) float64 {
		t.Helper()
		v, ok := value(e.scrape(), "sluice_queue_health_check", "queue=payments-dlq", "check="+check)
		if !ok {
			t.Fatalf("no %s check on payments-dlq", check)
		}
		return v
	}
	fail(1)
	for _, after := range []time.Duration{15 * time.Minute, 24 * time.Hour, 13 * 24 * time.Hour} {
		e.clock.Set(e.clock.Now().Add(after - e.elapsed()))
		dlq := e.read("payments-dlq")["payments-dlq"]
		if dlq.stats.Health != health.HealthWarning || dlq.health != 1 || level("dead_letters") != 1 || dlq.stats.Visible != 1 {
			t.Fatalf("one dead letter after %v: %s %q, sluice_queue_health %v; want a warning (SluiceDeadLetters), not a page",
				after, dlq.stats.Health, dlq.stats.HealthReasons, dlq.health)
		}
	}
	fail(99)
	dlq := e.read("payments-dlq")["payments-dlq"]
	if dlq.stats.Health != health.HealthCritical || dlq.health != 2 || level("dead_letters") != 2 {
		t.Fatalf("100 dead letters: %s %q, sluice_queue_health %v; want critical (SluiceDeadLettersCritical)", dlq.stats.Health, dlq.stats.HealthReasons, dlq.health)
	}
	// 14 days after it was sent, the first dead letter expires: 99 are
	// left, a warning again.
	e.clock.Advance(24*time.Hour + time.Minute)
	testutil.Eventually(t, 10*time.Second, "the first dead letter to expire", func() bool {
		q, err := f.GetQueue(ctx, "payments-dlq")
		return err == nil && q.Stats.Depth() == 99
	})
	dlq = e.read("payments-dlq")["payments-dlq"]
	if dlq.stats.Health != health.HealthWarning || dlq.health != 1 || strings.Join(dlq.stats.HealthReasons, ";") != "99 dead letters ≥ 1" {
		t.Fatalf("99 dead letters: %s %q, sluice_queue_health %v; want a warning", dlq.stats.Health, dlq.stats.HealthReasons, dlq.health)
	}
}

// elapsed is how far the fake clock moved since the start.
func (e *healthEnv) elapsed() time.Duration {
	return e.clock.Now().Sub(time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC))
}
