package live_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/health"
	"github.com/sluicemq/sluice/internal/testbroker"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/live"
	"github.com/sluicemq/sluice/server"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// setup starts a broker with a Live (changed by edit) as its observer and
// the server's; on a fake clock unless clock is nil.
func setup(t testing.TB, clock model.Clock, edit func(*live.Config)) (*testbroker.Broker, *live.Live) {
	t.Helper()
	cfg := live.DefaultConfig()
	if clock != nil {
		cfg.Interval = time.Minute // the test samples itself
	}
	if edit != nil {
		edit(&cfg)
	}
	lv, err := live.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := testbroker.Start(t, testbroker.Config{Clock: clock, Observer: lv, Server: func(c *server.Config) { c.Live = lv }})
	return b, lv
}

func createQueue(t *testing.T, b *broker.Broker, name string, attrs map[string]string) {
	t.Helper()
	if _, err := b.CreateQueue(context.Background(), name, attrs, nil); err != nil {
		t.Fatal(err)
	}
}

func send(t *testing.T, b *broker.Broker, queue string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := b.Send(context.Background(), queue, []model.SendEntry{{Body: fmt.Sprint("m", i)}}); err != nil {
			t.Fatal(err)
		}
	}
}

func getJSON(t *testing.T, url string, into any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if into != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, into); err != nil {
			t.Fatalf("GET %s: %v in %s", url, err, body)
		}
	}
	return resp.StatusCode
}

func queueOf(t *testing.T, s live.Snapshot, name string) live.QueueStats {
	t.Helper()
	for _, q := range s.Queues {
		if q.Name == name {
			return q
		}
	}
	t.Fatalf("queue %s not in the snapshot %+v", name, s.Queues)
	return live.QueueStats{}
}

func TestStatsMatchAllStats(t *testing.T) {
	t.Parallel()
	clock := clocktest.NewFakeClock(epoch)
	tb, lv := setup(t, clock, nil)
	b := tb.Front
	createQueue(t, b, "orders-dlq", nil)
	createQueue(t, b, "orders", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:orders-dlq","maxReceiveCount":"5"}`})
	createQueue(t, b, "jobs.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"})
	send(t, b, "orders", 5)
	send(t, b, "orders-dlq", 2)
	delay := 30 * time.Second
	if _, err := b.Send(context.Background(), "orders", []model.SendEntry{{Body: "later", Delay: &delay}}); err != nil {
		t.Fatal(err)
	}
	lease := 10 * time.Minute
	if _, err := b.Receive(context.Background(), model.ReceiveRequest{Queue: "orders", MaxMessages: 2, Visibility: &lease}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetPaused(context.Background(), "jobs.fifo", true); err != nil {
		t.Fatal(err)
	}
	clock.Advance(90 * time.Second)
	// The delayed message becomes visible when the backend's duty runs.
	testutil.Eventually(t, 10*time.Second, "the delayed message to show", func() bool {
		all, err := b.AllStats(context.Background())
		return err == nil && all[1].Stats.Delayed == 0
	})
	if _, err := lv.Sample(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got live.Snapshot
	if code := getJSON(t, tb.URL+"/v1/stats", &got); code != 200 {
		t.Fatalf("GET /v1/stats: %d", code)
	}
	all, err := b.AllStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Queues) != len(all) {
		t.Fatalf("%d queues, AllStats has %d", len(got.Queues), len(all))
	}
	for i, q := range all {
		g := got.Queues[i]
		if g.Name != q.Name || g.Visible != q.Stats.Visible || g.InFlight != q.Stats.InFlight || g.Delayed != q.Stats.Delayed {
			t.Errorf("queue %d: %+v, AllStats %s %+v", i, g, q.Name, q.Stats)
		}
	}
	orders := queueOf(t, got, "orders")
	// The delayed message became visible after 30 s; 2 leases are in flight.
	if orders.Visible != 4 || orders.InFlight != 2 || orders.DeadLetterQueue != "orders-dlq" || orders.DeadLetters == nil || *orders.DeadLetters != 2 {
		t.Errorf("orders: %+v, want 4 visible or delayed, 2 in flight, DLQ orders-dlq holding 2", orders)
	}
	if orders.OldestAgeSeconds != 90 || orders.OldestVisibleAgeSeconds != 90 || orders.IsDeadLetterQueue {
		t.Errorf("orders: oldest age %v s, visible for %v s, want 90 and 90 (the fake clock moved 90 s)", orders.OldestAgeSeconds, orders.OldestVisibleAgeSeconds)
	}
	if orders.Health != health.HealthWarning || len(orders.HealthReasons) != 2 || orders.HealthThresholds.AgeCriticalSeconds != 300 {
		t.Errorf("orders: health %s %q (thresholds %+v), want warning for its age and its 2 dead letters", orders.Health, orders.HealthReasons, orders.HealthThresholds)
	}
	// The dead-letter queue: judged by its count (2 ≥ 1), not by its age.
	dlq := queueOf(t, got, "orders-dlq")
	if !dlq.IsDeadLetterQueue || dlq.Health != health.HealthWarning || len(dlq.HealthReasons) != 1 || dlq.HealthReasons[0] != "2 dead letters ≥ 1" ||
		dlq.HealthThresholds.DepthWarning != 1 || dlq.HealthThresholds.DepthCritical != 100 || dlq.HealthThresholds.AgeWarningSeconds != 0 {
		t.Errorf("orders-dlq: %+v, want a dead-letter queue warning for its 2 dead letters", dlq)
	}
	// No RedrivePolicy: deadLetters is null, as in the queue's own stats.
	jobs := queueOf(t, got, "jobs.fifo")
	if !jobs.Fifo || !jobs.Paused || jobs.Health != health.HealthOK || jobs.DeadLetterQueue != "" || jobs.DeadLetters != nil {
		t.Errorf("jobs.fifo: %+v, want fifo, paused, ok, no DLQ (deadLetters null)", jobs)
	}
	if got.Thresholds.DepthWarning != 1000 || got.Thresholds.AgeCriticalSeconds != 300 || got.Thresholds.DeadLetters != "warning" ||
		got.Thresholds.DLQDepthWarning != 1 || got.Thresholds.DLQDepthCritical != 100 {
		t.Errorf("thresholds %+v, want the defaults", got.Thresholds)
	}
	if !got.Time.Equal(clock.Now()) {
		t.Errorf("time %v, want the broker's clock %v", got.Time, clock.Now())
	}
	if code := getJSON(t, tb.URL+"/v1/stats?x=1", nil); code != http.StatusBadRequest {
		t.Errorf("GET /v1/stats?x=1: %d, want 400", code)
	}
}

func TestRatesMoveAfterSends(t *testing.T) {
	t.Parallel()
	clock := clocktest.NewFakeClock(epoch)
	tb, lv := setup(t, clock, nil)
	b := tb.Front
	createQueue(t, b, "q", nil)
	if _, err := lv.Sample(context.Background()); err != nil {
		t.Fatal(err)
	}
	send(t, b, "q", 30)
	ds, err := b.Receive(context.Background(), model.ReceiveRequest{Queue: "q", MaxMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	var dels []model.DeleteEntry
	for i, d := range ds[:6] {
		dels = append(dels, model.DeleteEntry{ID: fmt.Sprint("d", i), Receipt: d.Receipt})
	}
	if _, err := b.Delete(context.Background(), "q", dels); err != nil {
		t.Fatal(err)
	}
	clock.Advance(30 * time.Second)
	s, err := lv.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r := queueOf(t, s, "q").Rates
	if r.Sent != 1 || r.Received != float64(len(ds))/30 || r.Deleted != 0.2 {
		t.Errorf("rates %+v after 30 sends, %d receives and 6 deletes in 30 s", r, len(ds))
	}
	// A minute later with nothing sent, the window holds no sends.
	clock.Advance(31 * time.Second)
	if _, err := lv.Sample(context.Background()); err != nil {
		t.Fatal(err)
	}
	clock.Advance(60 * time.Second)
	s, err = lv.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r := queueOf(t, s, "q").Rates; r.Sent != 0 {
		t.Errorf("sent rate %v a minute after the last send, want 0", r.Sent)
	}
}

func TestHistoryFills(t *testing.T) {
	t.Parallel()
	clock := clocktest.NewFakeClock(epoch)
	tb, lv := setup(t, clock, func(c *live.Config) { c.HistoryWindow = 30 * time.Second })
	b := tb.Front
	createQueue(t, b, "q", nil)
	if _, err := lv.Sample(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 8; i++ {
		send(t, b, "q", 10)
		clock.Advance(5 * time.Second)
		if _, err := lv.Sample(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var h live.History
	if code := getJSON(t, tb.URL+"/v1/queues/q/history", &h); code != 200 {
		t.Fatalf("history: %d", code)
	}
	if h.Queue != "q" || h.StepSeconds != 5 || len(h.Points) != 6 {
		t.Fatalf("history %+v, want 6 points (30 s of 5 s steps)", h)
	}
	for i, p := range h.Points {
		if p.Sent != 2 || p.Visible != int64(30+10*i) {
			t.Errorf("point %d: %+v, want 2 sent/s and %d visible", i, p, 30+10*i)
		}
		if i > 0 && p.Time.Sub(h.Points[i-1].Time) != 5*time.Second {
			t.Errorf("point %d at %v, 5 s after the previous one expected", i, p.Time)
		}
	}
	if err := b.DeleteQueue(context.Background(), "q"); err != nil {
		t.Fatal(err)
	}
	if _, err := lv.Sample(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code := getJSON(t, tb.URL+"/v1/queues/q/history", nil); code != http.StatusNotFound {
		t.Errorf("history of a deleted queue: %d, want 404", code)
	}
}

// TestHistoryOfANewQueue: a queue created since the last sample has an
// empty history, not a 404 (the dashboard opens a queue's page at once after
// creating it); a queue that does not exist is still a 404.
func TestHistoryOfANewQueue(t *testing.T) {
	t.Parallel()
	clock := clocktest.NewFakeClock(epoch)
	tb, lv := setup(t, clock, nil)
	if _, err := lv.Sample(context.Background()); err != nil {
		t.Fatal(err)
	}
	createQueue(t, tb.Front, "fresh", nil)
	if _, ok := lv.QueueHistory("fresh"); ok {
		t.Fatal("the sampler has seen a queue created after its last sample")
	}
	resp, err := http.Get(tb.URL + "/v1/queues/fresh/history")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != `{"queue":"fresh","stepSeconds":5,"points":[]}`+"\n" {
		t.Fatalf("history of a queue not sampled yet: %d %s, want 200 with no points", resp.StatusCode, body)
	}
	for _, name := range []string{"nosuch", "no%20such", "bad%00name", strings.Repeat("x", 81)} {
		if code := getJSON(t, tb.URL+"/v1/queues/"+name+"/history", nil); code != http.StatusNotFound {
			t.Errorf("history of queue %q, which does not exist: %d, want 404", name, code)
		}
	}
}

// TestHealthLevels: the thresholds of Config decide the states (package
// health has the cases of the assessment itself).
func TestHealthLevels(t *testing.T) {
	t.Parallel()
	// Through the broker: small thresholds, a queue crossing them.
	clock := clocktest.NewFakeClock(epoch)
	tb, lv := setup(t, clock, func(c *live.Config) {
		c.Thresholds = health.Thresholds{DepthWarning: 3, DepthCritical: 5, DeadLetters: health.DeadLettersIgnore}
	})
	createQueue(t, tb.Front, "q", nil)
	for _, step := range []struct {
		n    int
		want health.Health
	}{{2, health.HealthOK}, {1, health.HealthWarning}, {2, health.HealthCritical}} {
		send(t, tb.Front, "q", step.n)
		s, err := lv.Sample(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if q := queueOf(t, s, "q"); q.Health != step.want {
			t.Errorf("depth %d: %s %q, want %s", q.Visible, q.Health, q.HealthReasons, step.want)
		}
	}
}

// event is one server-sent event.
type event struct {
	name string
	data string
}

// readEvents reads events from an SSE body into a channel (closed at the
// stream's end); comment lines are counted in keepAlives.
func readEvents(body io.Reader) (<-chan event, <-chan int) {
	out := make(chan event, 100)
	comments := make(chan int, 100)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		var e event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if e.name != "" {
					out <- e
				}
				e = event{}
			case strings.HasPrefix(line, ":"):
				select {
				case comments <- 1:
				default:
				}
			case strings.HasPrefix(line, "event: "):
				e.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				e.data += strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return out, comments
}

func nextEvent(t *testing.T, ch <-chan event) live.Snapshot {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("the stream ended")
		}
		if e.name != "stats" {
			t.Fatalf("event %q, want stats", e.name)
		}
		var s live.Snapshot
		if err := json.Unmarshal([]byte(e.data), &s); err != nil {
			t.Fatalf("event data %q: %v", e.data, err)
		}
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
	}
	return live.Snapshot{}
}

func TestEventsStreamAndEndOnShutdown(t *testing.T) {
	t.Parallel()
	tb, lv := setup(t, nil, func(c *live.Config) { c.Interval = 20 * time.Millisecond; c.KeepAlive = 10 * time.Millisecond })
	createQueue(t, tb.Front, "a", nil)
	createQueue(t, tb.Front, "b", nil)

	resp, err := http.Get(tb.URL + "/v1/events?queue=b")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	events, comments := readEvents(resp.Body)
	first := nextEvent(t, events)
	// Successive events, the sends showing up in them.
	send(t, tb.Front, "b", 3)
	var last live.Snapshot
	testutil.Eventually(t, 10*time.Second, "an event with b's 3 messages", func() bool {
		last = nextEvent(t, events)
		return len(last.Queues) == 1 && last.Queues[0].Visible == 3
	})
	if last.Queues[0].Name != "b" || !last.Time.After(first.Time) {
		t.Errorf("event %+v after %v: want queue b only, later", last, first.Time)
	}
	testutil.Eventually(t, 10*time.Second, "a keep-alive comment", func() bool {
		select {
		case <-comments:
			return true
		default:
			return false
		}
	})
	if lv.Streams() != 1 {
		t.Errorf("%d streams open, want 1", lv.Streams())
	}

	// Shutdown ends the stream, and does not wait for it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := tb.Server.Stop(ctx); err != nil {
		t.Fatalf("Stop with a stream open: %v", err)
	}
	t.Logf("Stop took %v with a stream open (its context's 5 s bound it)", time.Since(start))
	testutil.Eventually(t, 5*time.Second, "the stream to end", func() bool {
		for {
			select {
			case _, ok := <-events:
				if !ok {
					return true
				}
			default:
				return false
			}
		}
	})
}

func TestEventsClientGoes(t *testing.T) {
	t.Parallel()
	tb, lv := setup(t, nil, func(c *live.Config) { c.Interval = 20 * time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, tb.URL+"/v1/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	events, _ := readEvents(resp.Body)
	nextEvent(t, events)
	testutil.Eventually(t, 5*time.Second, "one stream", func() bool { return lv.Streams() == 1 })
	cancel()
	resp.Body.Close()
	testutil.Eventually(t, 5*time.Second, "the stream to close after the client went", func() bool { return lv.Streams() == 0 })
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, edit := range []func(*live.Config){
		func(c *live.Config) { c.Interval = time.Millisecond },
		func(c *live.Config) { c.HistoryWindow = time.Second },
		func(c *live.Config) { c.Thresholds.DepthCritical = 10 },
		func(c *live.Config) { c.Thresholds.DeadLetters = "loud" },
	} {
		c := live.DefaultConfig()
		edit(&c)
		if _, err := live.New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
	if err := live.DefaultConfig().Validate(); err != nil {
		t.Error(err)
	}
}

// A stream outlives the server's read and write timeouts (net/http would
// otherwise cancel it when the read deadline passes).
func TestEventsOutliveServerTimeouts(t *testing.T) {
	t.Parallel()
	tb, lv := setup(t, nil, func(c *live.Config) { c.Interval = 20 * time.Millisecond })
	_ = tb
	mux := http.NewServeMux()
	done := make(chan struct{})
	lv.Register(mux, done)
	ts := httptest.NewUnstartedServer(mux)
	ts.Config.ReadTimeout = 100 * time.Millisecond
	ts.Config.WriteTimeout = 100 * time.Millisecond
	ts.Start()
	t.Cleanup(func() { close(done); ts.Close() })
	resp, err := http.Get(ts.URL + "/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events, _ := readEvents(resp.Body)
	first := nextEvent(t, events)
	testutil.Eventually(t, 10*time.Second, "an event 500 ms after the first", func() bool {
		return nextEvent(t, events).Time.Sub(first.Time) > 500*time.Millisecond
	})
}

// TestHistoryCarriesNacksAndDeadLetters: a history point has the step's
// nack and dead-letter rates beside the sent, received and deleted ones.
func TestHistoryCarriesNacksAndDeadLetters(t *testing.T) {
	t.Parallel()
	clock := clocktest.NewFakeClock(epoch)
	tb, lv := setup(t, clock, nil)
	b := tb.Front
	ctx := context.Background()
	createQueue(t, b, "dlq", nil)
	createQueue(t, b, "q", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":1}`})
	if _, err := lv.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	send(t, b, "q", 10)
	ds, err := b.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 10})
	if err != nil || len(ds) != 10 {
		t.Fatalf("receive: %d messages, %v", len(ds), err)
	}
	var nacks []model.VisibilityEntry
	for i, d := range ds[:5] {
		nacks = append(nacks, model.VisibilityEntry{ID: fmt.Sprint("n", i), Receipt: d.Receipt})
	}
	if _, err := b.ChangeVisibility(ctx, "q", nacks); err != nil {
		t.Fatal(err)
	}
	// A nack at the last receive allowed (maxReceiveCount 1) moves the
	// message to the dead-letter queue at once.
	clock.Advance(5 * time.Second)
	if _, err := lv.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	h, ok := lv.QueueHistory("q")
	if !ok || len(h.Points) != 1 {
		t.Fatalf("history %+v, want 1 point", h)
	}
	if p := h.Points[0]; p.Sent != 2 || p.Received != 2 || p.Nacked != 1 || p.DeadLettered != 1 {
		t.Errorf("step %+v: want 2 sent/s, 2 received/s, 1 nacked/s and 1 dead-lettered/s (10, 10, 5 and 5 in 5 s)", p)
	}
}
