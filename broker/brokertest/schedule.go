package brokertest

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
)

// Schedules (storage.Backend's schedules, through the front): runs at the
// right instants in a time zone across its clock changes, pause and
// resume, the missed-runs policies across a restart, delete, refusals.
var scheduleTests = []testCase{
	{"RunsAtItsInstants", testScheduleRunsAtItsInstants},
	{"AcrossClockChanges", testScheduleAcrossClockChanges},
	{"LateWithinGraceAcrossRestart", testScheduleLateWithinGrace},
	{"MissedSkipAcrossRestart", testScheduleMissedSkip},
	{"MissedOnceAcrossRestart", testScheduleMissedOnce},
	{"PauseResume", testSchedulePauseResume},
	{"ResumeOnce", testScheduleResumeOnce},
	{"Delete", testScheduleDelete},
	{"CreateIsIdempotent", testScheduleCreateIdempotent},
	{"List", testScheduleList},
	{"Refusals", testScheduleRefusals},
	{"QueueGoneIsRecorded", testScheduleQueueGone},
	{"FifoQueue", testScheduleFifo},
	{"AccountsKeepSchedulesApart", testScheduleAccounts},
}

// createSchedule creates a schedule of body sending to queue.
func (e *env) createSchedule(name, queue, spec, zone string, missed model.MissedPolicy, mods ...func(*broker.ScheduleRequest)) model.Schedule {
	e.t.Helper()
	req := broker.ScheduleRequest{Name: name, Queue: queue, Spec: spec, TimeZone: zone, Missed: string(missed),
		Message: model.SendEntry{Body: "run of " + name}}
	for _, m := range mods {
		m(&req)
	}
	s, err := e.b.CreateSchedule(e.ctx, req)
	if err != nil {
		e.t.Fatalf("CreateSchedule(%s, %q in %q): %v", name, spec, zone, err)
	}
	return s
}

// getSchedule returns the schedule name.
func (e *env) getSchedule(name string) model.Schedule {
	e.t.Helper()
	s, err := e.b.GetSchedule(e.ctx, name)
	if err != nil {
		e.t.Fatalf("GetSchedule(%s): %v", name, err)
	}
	return s
}

// runTo moves the clock to the schedule's next run, which must be at, and
// waits until its runner has moved past it; it returns the run's instant.
func (e *env) runTo(name string, at time.Time) {
	e.t.Helper()
	if next := e.getSchedule(name).NextRun; !next.Equal(at) {
		e.t.Fatalf("schedule %s: next run %s, want %s", name, next.UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339))
	}
	e.clock.Set(at)
	eventually(e.t, "schedule "+name+" to move past "+at.UTC().Format(time.RFC3339), func() bool {
		return e.getSchedule(name).NextRun.After(at)
	})
}

// wantRunMessages receives every message of queue and checks that they are
// the runs of schedule s at the instants given, in this order.
func (e *env) wantRunMessages(queue string, s model.Schedule, runs ...time.Time) {
	e.t.Helper()
	e.wantStats(queue, int64(len(runs)), 0, 0)
	for _, at := range runs {
		d := e.receiveOne(queue)
		if want := model.ScheduleRunMessageID(s.ID, at); d.ID != want {
			e.t.Fatalf("queue %s: message %s, want run %s's id %s", queue, d.ID, at.UTC().Format(time.RFC3339), want)
		}
		if d.Body != s.Message.Body {
			e.t.Fatalf("queue %s: body %q, want %q", queue, d.Body, s.Message.Body)
		}
		e.mustDelete(queue, d.Receipt)
	}
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// sentCounter is an Observer that counts the messages stored per queue.
type sentCounter struct {
	mu   sync.Mutex
	sent map[string]int
}

func (o *sentCounter) Count(queue string, c model.Counter, n int) {
	if c == model.CountSent {
		o.mu.Lock()
		o.sent[queue] += n
		o.mu.Unlock()
	}
}
func (o *sentCounter) Refused(string, string)    {}
func (o *sentCounter) Synced(time.Duration, int) {}
func (o *sentCounter) get(queue string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.sent[queue]
}

func testScheduleRunsAtItsInstants(t *testing.T, s suite) {
	obs := &sentCounter{sent: map[string]int{}}
	e := s.setup(t, func(c *broker.Config) { c.Observer = obs })
	e.createQueue("reports", nil)
	e.clock.Set(utc("2024-06-03T12:00:30Z"))
	sch := e.createSchedule("every-minute", "reports", "0 * * * * *", "", "", func(r *broker.ScheduleRequest) {
		r.Message.Attributes = map[string]model.MessageAttribute{"kind": {DataType: "String", StringValue: "report"}}
	})
	if sch.TimeZone != "UTC" || sch.Missed != model.MissedSkip || sch.Paused {
		t.Fatalf("defaults: %+v", sch)
	}
	first := utc("2024-06-03T12:01:00Z")
	if !sch.NextRun.Equal(first) {
		t.Fatalf("first run %v, want %v", sch.NextRun, first)
	}
	// Not a second early.
	e.clock.Set(first.Add(-time.Second))
	e.clock.Settle(realTimeout)
	e.wantStats("reports", 0, 0, 0)
	e.runTo("every-minute", first)
	e.runTo("every-minute", first.Add(time.Minute))
	e.wantRunMessages("reports", sch, first, first.Add(time.Minute))
	got := e.getSchedule("every-minute")
	if !got.LastRun.Equal(first.Add(time.Minute)) || got.LastMessageID != model.ScheduleRunMessageID(sch.ID, first.Add(time.Minute)) ||
		got.Sent != 2 || got.MissedRuns != 0 || got.LastError != "" {
		t.Fatalf("after two runs: %+v", got)
	}
	// The metrics count them as sends.
	if n := obs.get("reports"); n != 2 {
		t.Fatalf("the observer counted %d sends, want the 2 runs", n)
	}
}

// testScheduleAcrossClockChanges runs wall-clock schedules across New
// York's clock changes: a run whose time happens twice runs once, one
// whose time does not exist runs at the jump.
func testScheduleAcrossClockChanges(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	// 2024-11-03: 02:00 EDT -> 01:00 EST, so 01:30 happens twice.
	e.clock.Set(utc("2024-11-02T20:00:00Z"))
	fall := e.createSchedule("fall", "q", "30 1 * * *", "America/New_York", "")
	e.runTo("fall", utc("2024-11-03T05:30:00Z")) // 01:30 EDT
	if next := e.getSchedule("fall").NextRun; !next.Equal(utc("2024-11-04T06:30:00Z")) {
		t.Fatalf("after 01:30 EDT the next run is %v, want 01:30 EST the next day, not the repeated 01:30", next)
	}
	e.wantRunMessages("q", fall, utc("2024-11-03T05:30:00Z"))
	if err := e.b.DeleteSchedule(e.ctx, "fall"); err != nil {
		t.Fatal(err)
	}
	// 2025-03-09: 02:00 EST -> 03:00 EDT, so 02:30 does not exist.
	e.clock.Set(utc("2025-03-08T20:00:00Z"))
	spring := e.createSchedule("spring", "q", "30 2 * * *", "America/New_York", "")
	e.runTo("spring", utc("2025-03-09T07:00:00Z")) // the jump, 03:00 EDT
	if next := e.getSchedule("spring").NextRun; !next.Equal(utc("2025-03-10T06:30:00Z")) {
		t.Fatalf("next run %v, want 02:30 EDT", next)
	}
	// An hourly schedule keeps real time across the same jump.
	hourly := e.createSchedule("hourly", "q", "@hourly", "America/New_York", "")
	e.wantRunMessages("q", spring, utc("2025-03-09T07:00:00Z"))
	if !hourly.NextRun.Equal(utc("2025-03-09T08:00:00Z")) {
		t.Fatalf("hourly: next run %v", hourly.NextRun)
	}
}

// testScheduleLateWithinGrace restarts the store over a run's instant,
// for less than the grace: the run is sent, late, once.
func testScheduleLateWithinGrace(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	e.createQueue("q", nil)
	sch := e.createSchedule("s", "q", "@every 1h", "", model.MissedSkip)
	if err := e.be.Close(); err != nil {
		t.Fatal(err)
	}
	e.clock.Set(sch.NextRun.Add(40 * time.Second)) // down at the run, 40 s late
	e.reopen()
	eventually(t, "the late run", func() bool { return e.getSchedule("s").Sent == 1 })
	e.wantRunMessages("q", sch, sch.NextRun)
	if got := e.getSchedule("s"); !got.NextRun.Equal(sch.NextRun.Add(time.Hour)) || got.MissedRuns != 0 {
		t.Fatalf("after the late run: %+v", got)
	}
}

// missedAcrossRestart creates an hourly schedule with policy missed,
// keeps the store down from before its first run until 5 h 30 min after
// it, and returns the schedule as created and as the restarted runner
// left it.
func missedAcrossRestart(t *testing.T, e *env, missed model.MissedPolicy) (before, after model.Schedule) {
	e.requireReopen()
	e.createQueue("q", nil)
	before = e.createSchedule("s", "q", "@every 1h", "", missed)
	if err := e.be.Close(); err != nil {
		t.Fatal(err)
	}
	e.clock.Set(before.NextRun.Add(5*time.Hour + 30*time.Minute))
	e.reopen()
	eventually(t, "the runner to pass the missed runs", func() bool {
		return e.getSchedule("s").NextRun.After(e.clock.Now())
	})
	after = e.getSchedule("s")
	if want := before.NextRun.Add(6 * time.Hour); !after.NextRun.Equal(want) || after.MissedRuns != 6 {
		t.Fatalf("after 6 missed runs (%s policy): next run %v, missed %d; want %v, 6", missed, after.NextRun, after.MissedRuns, want)
	}
	return before, after
}

func testScheduleMissedSkip(t *testing.T, s suite) {
	e := s.setup(t)
	before, _ := missedAcrossRestart(t, e, model.MissedSkip)
	e.wantStats("q", 0, 0, 0)
	// The next run is sent as usual.
	e.runTo("s", before.NextRun.Add(6*time.Hour))
	e.wantRunMessages("q", before, before.NextRun.Add(6*time.Hour))
}

func testScheduleMissedOnce(t *testing.T, s suite) {
	e := s.setup(t)
	before, after := missedAcrossRestart(t, e, model.MissedOnce)
	// One message, the first missed run's.
	e.wantRunMessages("q", before, before.NextRun)
	if after.Sent != 1 || !after.LastRun.Equal(before.NextRun) {
		t.Fatalf("after the missed runs: %+v", after)
	}
}

func testSchedulePauseResume(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	sch := e.createSchedule("s", "q", "@every 1m", "", model.MissedSkip)
	paused, err := e.b.PauseSchedule(e.ctx, "s")
	if err != nil || !paused.Paused {
		t.Fatalf("PauseSchedule: %+v, %v", paused, err)
	}
	if again, err := e.b.PauseSchedule(e.ctx, "s"); err != nil || !again.Paused || !again.NextRun.Equal(sch.NextRun) {
		t.Fatalf("PauseSchedule again: %+v, %v", again, err)
	}
	// Runs pass while paused, even within the grace: nothing is sent.
	e.clock.Set(sch.NextRun.Add(150 * time.Second))
	e.clock.Settle(realTimeout)
	e.wantStats("q", 0, 0, 0)
	resumed, err := e.b.ResumeSchedule(e.ctx, "s")
	if err != nil || resumed.Paused {
		t.Fatalf("ResumeSchedule: %+v, %v", resumed, err)
	}
	if want := sch.NextRun.Add(3 * time.Minute); !resumed.NextRun.Equal(want) || resumed.MissedRuns != 3 {
		t.Fatalf("resumed: next run %v, missed %d; want %v, 3", resumed.NextRun, resumed.MissedRuns, want)
	}
	e.wantStats("q", 0, 0, 0)
	e.runTo("s", resumed.NextRun)
	e.wantRunMessages("q", sch, resumed.NextRun)
	if again, err := e.b.ResumeSchedule(e.ctx, "s"); err != nil || again.Paused || again.Sent != 1 {
		t.Fatalf("ResumeSchedule of a running schedule: %+v, %v", again, err)
	}
	// Created paused: nothing runs until resumed.
	p := e.createSchedule("p", "q", "@every 1m", "", model.MissedSkip, func(r *broker.ScheduleRequest) { r.Paused = true })
	if !p.Paused {
		t.Fatalf("created paused: %+v", p)
	}
	e.clock.Set(p.NextRun)
	e.clock.Settle(realTimeout)
	if got := e.getSchedule("p"); got.Sent != 0 || !got.NextRun.Equal(p.NextRun) {
		t.Fatalf("a paused schedule ran: %+v", got)
	}
}

func testScheduleResumeOnce(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	sch := e.createSchedule("s", "q", "@every 1m", "", model.MissedOnce)
	if _, err := e.b.PauseSchedule(e.ctx, "s"); err != nil {
		t.Fatal(err)
	}
	e.clock.Set(sch.NextRun.Add(10 * time.Minute))
	resumed, err := e.b.ResumeSchedule(e.ctx, "s")
	if err != nil || resumed.Sent != 1 || resumed.MissedRuns != 11 {
		t.Fatalf("ResumeSchedule: %+v, %v", resumed, err)
	}
	// The resume stored the message, durably before its answer.
	e.wantRunMessages("q", sch, sch.NextRun)
}

func testScheduleDelete(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	sch := e.createSchedule("s", "q", "@every 1m", "", "")
	if err := e.b.DeleteSchedule(e.ctx, "s"); err != nil {
		t.Fatal(err)
	}
	_, err := e.b.GetSchedule(e.ctx, "s")
	wantErr(t, "GetSchedule after delete", err, model.ErrResourceNotFound)
	wantErr(t, "DeleteSchedule again", e.b.DeleteSchedule(e.ctx, "s"), model.ErrResourceNotFound)
	_, err = e.b.PauseSchedule(e.ctx, "s")
	wantErr(t, "PauseSchedule after delete", err, model.ErrResourceNotFound)
	e.clock.Set(sch.NextRun.Add(time.Second))
	e.clock.Settle(realTimeout)
	e.wantStats("q", 0, 0, 0)
	// The name again is a new schedule: new id, new runs.
	again := e.createSchedule("s", "q", "@every 1m", "", "")
	if again.ID == sch.ID {
		t.Fatal("a schedule created again kept the deleted one's id")
	}
}

func testScheduleCreateIdempotent(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.createQueue("other", nil)
	sch := e.createSchedule("s", "q", "0 3 * * *", "Europe/Paris", model.MissedOnce)
	e.advance(time.Hour)
	same := e.createSchedule("s", "q", "0 3 * * *", "Europe/Paris", model.MissedOnce)
	if same.ID != sch.ID || !same.NextRun.Equal(sch.NextRun) {
		t.Fatalf("the same create again: %+v, want %+v", same, sch)
	}
	for setting, mod := range map[string]func(*broker.ScheduleRequest){
		"queue":    func(r *broker.ScheduleRequest) { r.Queue = "other" },
		"schedule": func(r *broker.ScheduleRequest) { r.Spec = "0 4 * * *" },
		"timeZone": func(r *broker.ScheduleRequest) { r.TimeZone = "UTC" },
		"missed":   func(r *broker.ScheduleRequest) { r.Missed = "skip" },
		"body":     func(r *broker.ScheduleRequest) { r.Message.Body = "other" },
	} {
		req := broker.ScheduleRequest{Name: "s", Queue: "q", Spec: "0 3 * * *", TimeZone: "Europe/Paris", Missed: "once",
			Message: model.SendEntry{Body: "run of s"}}
		mod(&req)
		_, err := e.b.CreateSchedule(e.ctx, req)
		wantErr(t, "CreateSchedule with another "+setting, err, model.ErrConflict)
		if !strings.Contains(err.Error(), setting) {
			t.Errorf("CreateSchedule with another %s: %v does not name it", setting, err)
		}
	}
}

func testScheduleList(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	for _, n := range []string{"b-2", "a-1", "b-1", "c"} {
		e.createSchedule(n, "q", "@daily", "", "")
	}
	names := func(prefix, after string, limit int) string {
		ss, err := e.b.ListSchedules(e.ctx, prefix, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range ss {
			out = append(out, s.Name)
		}
		return strings.Join(out, ",")
	}
	for _, c := range []struct {
		prefix, after string
		limit         int
		want          string
	}{{"", "", 0, "a-1,b-1,b-2,c"}, {"b-", "", 0, "b-1,b-2"}, {"", "b-1", 0, "b-2,c"}, {"", "", 2, "a-1,b-1"}, {"x", "", 0, ""}} {
		if got := names(c.prefix, c.after, c.limit); got != c.want {
			t.Errorf("ListSchedules(%q, %q, %d) = %s, want %s", c.prefix, c.after, c.limit, got, c.want)
		}
	}
	_, err := e.b.ListSchedules(e.ctx, "", "", model.MaxListSchedules+1)
	wantErr(t, "ListSchedules past the limit", err, model.ErrInvalidParameterValue)
}

func testScheduleRefusals(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{"MaximumMessageSize": "1024"})
	e.createQueue("f.fifo", map[string]string{"FifoQueue": "true"})
	ok := broker.ScheduleRequest{Name: "s", Queue: "q", Spec: "@daily", Message: model.SendEntry{Body: "x"}}
	for _, c := range []struct {
		what     string
		mod      func(*broker.ScheduleRequest)
		sentinel error
		says     string
	}{
		{"an invalid cron expression", func(r *broker.ScheduleRequest) { r.Spec = "61 * * * *" }, model.ErrInvalidParameterValue, "Schedule"},
		{"six fields wrong", func(r *broker.ScheduleRequest) { r.Spec = "* * * * * * *" }, model.ErrInvalidParameterValue, "Schedule"},
		{"a spec that never runs", func(r *broker.ScheduleRequest) { r.Spec = "0 0 30 2 *" }, model.ErrInvalidParameterValue, "never runs"},
		{"an interval under a second", func(r *broker.ScheduleRequest) { r.Spec = "@every 100ms" }, model.ErrInvalidParameterValue, "at least 1s"},
		{"an unknown time zone", func(r *broker.ScheduleRequest) { r.TimeZone = "Europe/Atlantis" }, model.ErrInvalidParameterValue, "TimeZone"},
		{"the broker's local zone", func(r *broker.ScheduleRequest) { r.TimeZone = "Local" }, model.ErrInvalidParameterValue, "TimeZone"},
		{"an unknown missed policy", func(r *broker.ScheduleRequest) { r.Missed = "all" }, model.ErrInvalidParameterValue, "Missed"},
		{"a bad name", func(r *broker.ScheduleRequest) { r.Name = "a b" }, model.ErrInvalidParameterValue, "Name"},
		{"a missing queue", func(r *broker.ScheduleRequest) { r.Queue = "nope" }, model.ErrQueueDoesNotExist, ""},
		{"an empty body", func(r *broker.ScheduleRequest) { r.Message.Body = "" }, model.ErrMissingParameter, ""},
		{"a body too large for the queue", func(r *broker.ScheduleRequest) { r.Message.Body = strings.Repeat("x", 2000) }, model.ErrInvalidParameterValue, ""},
		{"a bad Sluice option", func(r *broker.ScheduleRequest) {
			r.Message.Attributes = map[string]model.MessageAttribute{model.MsgAttrPriority: {DataType: "Number", StringValue: "1000"}}
		}, model.ErrInvalidParameterValue, ""},
		{"a delay", func(r *broker.ScheduleRequest) { r.Message.Delay = dur(time.Second) }, model.ErrInvalidParameterValue, "delay"},
		{"a dedup id", func(r *broker.ScheduleRequest) { r.Message.DedupID = "d" }, model.ErrInvalidParameterValue, "dedup"},
		{"a FIFO queue without a group", func(r *broker.ScheduleRequest) { r.Queue = "f.fifo" }, model.ErrMissingParameter, ""},
	} {
		req := ok
		c.mod(&req)
		_, err := e.b.CreateSchedule(e.ctx, req)
		wantErr(t, "CreateSchedule with "+c.what, err, c.sentinel)
		if !strings.Contains(err.Error(), c.says) {
			t.Errorf("CreateSchedule with %s: %q does not say %q", c.what, err, c.says)
		}
	}
	if ss, err := e.b.ListSchedules(e.ctx, "", "", 0); err != nil || len(ss) != 0 {
		t.Fatalf("refused creates left schedules: %v, %v", ss, err)
	}
	_, err := e.b.GetSchedule(e.ctx, "no such")
	wantErr(t, "GetSchedule of a name no schedule can have", err, model.ErrResourceNotFound)
}

// testScheduleQueueGone deletes a schedule's queue: the run is recorded as
// refused, the schedule goes on, and runs once the queue is back.
func testScheduleQueueGone(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	sch := e.createSchedule("s", "q", "@every 1m", "", "")
	if err := e.b.DeleteQueue(e.ctx, "q"); err != nil {
		t.Fatal(err)
	}
	e.runTo("s", sch.NextRun)
	got := e.getSchedule("s")
	if got.Sent != 0 || !got.LastErrorAt.Equal(sch.NextRun) || !strings.Contains(got.LastError, "does not exist") {
		t.Fatalf("a run into a deleted queue: %+v", got)
	}
	e.createQueue("q", nil)
	e.runTo("s", sch.NextRun.Add(time.Minute))
	e.wantRunMessages("q", sch, sch.NextRun.Add(time.Minute))
	if got := e.getSchedule("s"); got.LastError != "" || got.Sent != 1 {
		t.Fatalf("after a stored run: %+v", got)
	}
}

// testScheduleFifo sends runs to a FIFO queue: each carries its run's key
// as its dedup id, in its group, in order.
func testScheduleFifo(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("f.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"})
	sch := e.createSchedule("s", "f.fifo", "@every 10s", "", "", func(r *broker.ScheduleRequest) { r.Message.GroupID = "g" })
	e.runTo("s", sch.NextRun)
	e.runTo("s", sch.NextRun.Add(10*time.Second))
	// The same body twice, yet two messages: the dedup ids are the runs'.
	for _, at := range []time.Time{sch.NextRun, sch.NextRun.Add(10 * time.Second)} {
		d := e.receiveOne("f.fifo")
		if d.ID != model.ScheduleRunMessageID(sch.ID, at) || d.GroupID != "g" || d.DedupID != model.ScheduleRunKey(sch.ID, at) {
			t.Fatalf("FIFO run %v: %+v", at, d.Message)
		}
		e.mustDelete("f.fifo", d.Receipt)
	}
}

// testScheduleAccounts: a schedule belongs to its account, and sends to
// that account's queue of its name.
func testScheduleAccounts(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	other := model.Schedule{ID: model.NewMessageID(), Account: "111122223333", Name: "s", Queue: "q", Spec: "@every 1m",
		TimeZone: "UTC", Missed: model.MissedSkip, Message: model.ScheduleMessage{Body: "x"},
		CreatedAt: e.clock.Now(), NextRun: e.clock.Now().Add(time.Minute).Truncate(time.Second)}
	if _, created, err := e.be.CreateSchedule(e.ctx, other); err != nil || !created {
		t.Fatalf("CreateSchedule in another account: %v, %v", created, err)
	}
	_, err := e.b.GetSchedule(e.ctx, "s")
	wantErr(t, "GetSchedule of another account's schedule", err, model.ErrResourceNotFound)
	if ss, err := e.b.ListSchedules(e.ctx, "", "", 0); err != nil || len(ss) != 0 {
		t.Fatalf("ListSchedules shows another account's: %v, %v", ss, err)
	}
	e.createSchedule("s", "q", "@every 1h", "", "")
	// The other account's run finds no queue q of its own.
	e.clock.Set(other.NextRun)
	eventually(t, "the other account's run", func() bool {
		got, err := e.be.GetSchedule(e.ctx, other.Ref())
		return err == nil && got.NextRun.After(other.NextRun)
	})
	got, _ := e.be.GetSchedule(e.ctx, other.Ref())
	if got.Sent != 0 || got.LastError == "" {
		t.Fatalf("another account's run into a queue it does not have: %+v", got)
	}
	e.wantStats("q", 0, 0, 0)
}
