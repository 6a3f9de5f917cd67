package main

// sluice schedule create|list|show|pause|resume|delete.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	sclient "github.com/sluicemq/sluice/client"
)

var scheduleCommands = map[string]command{
	"create": {"create a schedule that sends a message to a queue on a cron expression or an interval", scheduleCreate},
	"list":   {"list the schedules with their next and last runs", scheduleList},
	"show":   {"show a schedule: its expression, message, and last and next runs", scheduleShow},
	"pause":  {"stop a schedule's runs", schedulePause},
	"resume": {"start a paused schedule's runs again", scheduleResume},
	"delete": {"delete a schedule (the messages it sent stay)", scheduleDelete},
}

func init() {
	register("schedule", command{"create, list, show, pause, resume and delete schedules (messages sent on a cron expression or an interval)", func(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
		return group(ctx, "schedule", scheduleCommands, args, env, stdout, stderr)
	}})
}

// scheduleJSON is a schedule as --json prints it.
type scheduleJSON struct {
	Name          string            `json:"name"`
	Queue         string            `json:"queue"`
	Schedule      string            `json:"schedule"`
	TimeZone      string            `json:"timeZone"`
	Missed        string            `json:"missed"`
	Paused        bool              `json:"paused"`
	Body          string            `json:"body"`
	Attributes    map[string]string `json:"attributes,omitempty"`
	Priority      int               `json:"priority,omitempty"`
	MaxAttempts   int               `json:"maxAttempts,omitempty"`
	CorrelationID string            `json:"correlationId,omitempty"`
	GroupID       string            `json:"groupId,omitempty"`
	CreatedAt     time.Time         `json:"createdAt"`
	NextRun       *time.Time        `json:"nextRun,omitempty"`
	LastRun       *time.Time        `json:"lastRun,omitempty"`
	LastMessageID string            `json:"lastMessageId,omitempty"`
	LastError     string            `json:"lastError,omitempty"`
	LastErrorAt   *time.Time        `json:"lastErrorAt,omitempty"`
	Sent          int64             `json:"sent"`
	MissedRuns    int64             `json:"missedRuns"`
}

func toScheduleJSON(s sclient.Schedule) scheduleJSON {
	at := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		u := t.UTC()
		return &u
	}
	out := scheduleJSON{Name: s.Name, Queue: s.Queue, Schedule: s.Spec, TimeZone: s.TimeZone, Missed: s.Missed, Paused: s.Paused,
		Body: s.Message.Body, Priority: s.Message.Priority, MaxAttempts: s.Message.MaxAttempts,
		CorrelationID: s.Message.CorrelationID, GroupID: s.Message.GroupID, CreatedAt: s.CreatedAt.UTC(),
		NextRun: at(s.NextRun), LastRun: at(s.LastRun), LastMessageID: s.LastMessageID, LastError: s.LastError,
		LastErrorAt: at(s.LastErrorAt), Sent: s.Sent, MissedRuns: s.MissedRuns}
	for k, a := range s.Message.Attributes {
		if out.Attributes == nil {
			out.Attributes = map[string]string{}
		}
		out.Attributes[k] = a.Value
	}
	return out
}

// runText is a run's time for a table, in the schedule's zone: "-" for
// none.
func runText(t time.Time, zone string) string {
	if t.IsZero() {
		return "-"
	}
	if loc, err := time.LoadLocation(zone); err == nil {
		t = t.In(loc)
	}
	return t.Format("2006-01-02 15:04:05 MST")
}

func scheduleCreate(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI(ctx, cmdSpec{name: "schedule create", args: "NAME QUEUE [BODY]",
		summary: "Create a schedule NAME that sends BODY (or the whole of --file) to QUEUE at every run of\n" +
			"--cron (five fields, or six with seconds first; or @hourly, @daily, @weekly, @monthly,\n" +
			"@yearly) in --tz, or --every interval. The broker runs it: durably, across restarts, on\n" +
			"whichever broker is up. --missed says what runs no broker sent within a minute of their\n" +
			"time (or that fell due while paused) do: skip (send nothing for them) or once (send one\n" +
			"message for them). Creating an existing schedule with the same settings answers it.",
		examples: []string{
			`sluice schedule create nightly-report reports '{"report": "daily-sales"}' --cron '0 2 * * *' --tz Europe/Berlin --missed once`,
			"sluice schedule create heartbeat pings ping --every 30s",
			`sluice schedule create weekday-digest digests --file digest.json --cron '30 8 * * mon-fri' --tz America/New_York`,
			"sluice schedule create ledger-close ledger.fifo close --cron @monthly --group ledger",
		}}, env, stdout, stderr)
	cronExpr := c.fs.String("cron", "", "a cron expression: '0 2 * * *', '*/10 * * * * *' (seconds first), or @daily and the like")
	every := c.fs.Duration("every", 0, "an interval instead of --cron: 30s, 5m, 1h30m (whole seconds)")
	zone := c.fs.String("tz", "", "the IANA time zone of --cron's times: Europe/Berlin, America/New_York (default UTC)")
	missed := c.fs.String("missed", "skip", "missed runs: skip (send nothing for them) or once (send one message for them)")
	paused := c.fs.Bool("paused", false, "create it paused (sluice schedule resume NAME starts it)")
	file := c.fs.String("file", "", "send the file's whole content at every run")
	attrs := pairsFlag{}
	c.fs.Var(attrs, "attr", "a String attribute NAME=VALUE (repeat it)")
	var m sclient.Message
	c.fs.IntVar(&m.Priority, "priority", 0, "priority, -100..100 (standard queues)")
	c.fs.IntVar(&m.MaxAttempts, "max-attempts", 0, "attempts before the message is a dead letter (1..1000; the queue needs a dead-letter queue)")
	c.fs.StringVar(&m.GroupID, "group", "", "message group (FIFO queues: required)")
	c.fs.StringVar(&m.CorrelationID, "correlation-id", "", "correlation id, kept through the dead-letter queue")
	pos, code, ok := c.parse(args, 2, 3)
	if !ok {
		return code
	}
	spec := *cronExpr
	switch {
	case spec != "" && *every != 0:
		return c.usageErr("give --cron or --every, not both")
	case *every != 0:
		if *every < time.Second || *every%time.Second != 0 {
			return c.usageErr("--every %s: give whole seconds, at least 1s (30s, 5m, 1h30m)", *every)
		}
		spec = "@every " + every.String()
	case spec == "":
		return c.usageErr("say when it runs: --cron '0 2 * * *' (with --tz ZONE), or --every 5m")
	}
	switch {
	case len(pos) == 3 && *file != "":
		return c.usageErr("give BODY or --file, not both")
	case len(pos) == 3:
		m.Body = pos[2]
	case *file != "":
		b, err := os.ReadFile(*file)
		if err != nil {
			return c.usageErr("--file: %v", err)
		}
		m.Body = string(b)
	default:
		return c.usageErr("give the message: BODY, or --file FILE")
	}
	for k, v := range attrs {
		if m.Attributes == nil {
			m.Attributes = map[string]sclient.Attribute{}
		}
		m.Attributes[k] = sclient.String(v)
	}
	s, err := c.c.CreateSchedule(ctx, sclient.ScheduleSpec{Name: pos[0], Queue: pos[1], Spec: spec, TimeZone: *zone,
		Missed: *missed, Paused: *paused, Message: m})
	if err != nil {
		return c.fail(err)
	}
	if c.json {
		c.printJSON(toScheduleJSON(s))
		return 0
	}
	state := "next run " + runText(s.NextRun, s.TimeZone)
	if s.Paused {
		state = "paused: `sluice schedule resume " + s.Name + "` starts it"
	}
	fmt.Fprintf(stdout, "created schedule %s: %s (%s) to queue %s; %s\n", s.Name, s.Spec, s.TimeZone, s.Queue, state)
	return 0
}

// allSchedules pages through the schedule list.
func (c *cli) allSchedules(prefix string) ([]sclient.Schedule, error) {
	var out []sclient.Schedule
	after := ""
	for {
		opts := []sclient.ListOption{sclient.PageSize(999)}
		if prefix != "" {
			opts = append(opts, sclient.Prefix(prefix))
		}
		if after != "" {
			opts = append(opts, sclient.After(after))
		}
		page, err := c.c.ListSchedules(c.ctx, opts...)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Schedules...)
		if page.Next == "" {
			return out, nil
		}
		after = page.Next
	}
}

func scheduleList(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI(ctx, cmdSpec{name: "schedule list", args: "",
		summary: "List the schedules in name order: their queue, expression and time zone, state, next\nrun and last run (in the schedule's time zone), and messages sent.",
		examples: []string{
			"sluice schedule list",
			"sluice schedule list --prefix nightly-",
			"sluice schedule list --json | jq -r '.[] | select(.lastError) | .name'",
		}}, env, stdout, stderr)
	prefix := c.fs.String("prefix", "", "only the schedules whose name starts with this")
	if _, code, ok := c.parse(args, 0, 0); !ok {
		return code
	}
	ss, err := c.allSchedules(*prefix)
	if err != nil {
		return c.fail(err)
	}
	if c.json {
		out := make([]scheduleJSON, len(ss))
		for i, s := range ss {
			out[i] = toScheduleJSON(s)
		}
		c.printJSON(out)
		return 0
	}
	if len(ss) == 0 {
		fmt.Fprintln(stderr, "no schedules; create one with `sluice schedule create NAME QUEUE BODY --cron EXPR` (or --every 5m)")
		return 0
	}
	rows := make([][]string, len(ss))
	for i, s := range ss {
		state := "active"
		switch {
		case s.Paused:
			state = "paused"
		case s.LastError != "":
			state = "failing"
		}
		rows[i] = []string{s.Name, s.Queue, s.Spec, s.TimeZone, state, runText(s.NextRun, s.TimeZone), runText(s.LastRun, s.TimeZone), itoa(s.Sent)}
	}
	table(stdout, []string{"NAME", "QUEUE", "SCHEDULE", "ZONE", "STATE", "NEXT RUN", "LAST RUN", "SENT"}, rows)
	return 0
}

func scheduleShow(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI(ctx, cmdSpec{name: "schedule show", args: "NAME",
		summary:  "Show a schedule: its queue, expression, time zone, policy, message, and its last and next\nruns (in its time zone and in UTC); a run its queue refused, and why.",
		examples: []string{"sluice schedule show nightly-report", "sluice schedule show nightly-report --json | jq .nextRun"}}, env, stdout, stderr)
	pos, code, ok := c.parse(args, 1, 1)
	if !ok {
		return code
	}
	s, err := c.c.GetSchedule(ctx, pos[0])
	if err != nil {
		return c.fail(err)
	}
	if c.json {
		c.printJSON(toScheduleJSON(s))
		return 0
	}
	printSchedule(stdout, s)
	return 0
}

func printSchedule(w io.Writer, s sclient.Schedule) {
	when := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return runText(t, s.TimeZone) + " (" + t.UTC().Format(time.RFC3339) + ")"
	}
	state := "active"
	if s.Paused {
		state = "paused"
	}
	body := s.Message.Body
	if len(body) > 80 {
		body = body[:77] + "..."
	}
	rows := [][]string{
		{"queue", s.Queue}, {"schedule", s.Spec}, {"time zone", s.TimeZone}, {"missed runs", s.Missed}, {"state", state},
		{"next run", when(s.NextRun)}, {"last run", when(s.LastRun)}, {"last message", dash(s.LastMessageID)},
		{"sent", itoa(s.Sent)}, {"missed", itoa(s.MissedRuns)}, {"created", s.CreatedAt.UTC().Format(time.RFC3339)},
		{"body", strconv.Quote(body)},
	}
	if s.LastError != "" {
		rows = append(rows, []string{"last error", s.LastError + " (run of " + when(s.LastErrorAt) + ")"})
	}
	m := s.Message
	for _, f := range []struct{ k, v string }{
		{"priority", intText(m.Priority)}, {"max attempts", intText(m.MaxAttempts)},
		{"correlation id", m.CorrelationID}, {"trace context", m.TraceContext}, {"group", m.GroupID},
	} {
		if f.v != "" {
			rows = append(rows, []string{f.k, f.v})
		}
	}
	for _, k := range sortedKeys(m.Attributes) {
		rows = append(rows, []string{"attribute " + k, m.Attributes[k].Value})
	}
	table(w, []string{"SCHEDULE", s.Name}, rows)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// intText is n for a table, "" for 0 (not set).
func intText(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// simpleSchedule is a command that takes one schedule name and does one
// call.
func simpleSchedule(name, summary string, examples []string, do func(c *cli, name string) (string, *sclient.Schedule, error)) func(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	return func(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
		c := newCLI(ctx, cmdSpec{name: name, args: "NAME", summary: summary, examples: examples}, env, stdout, stderr)
		pos, code, ok := c.parse(args, 1, 1)
		if !ok {
			return code
		}
		msg, s, err := do(c, pos[0])
		if err != nil {
			return c.fail(err)
		}
		if c.json {
			if s != nil {
				c.printJSON(toScheduleJSON(*s))
			} else {
				c.printJSON(map[string]any{"schedule": pos[0], "ok": true})
			}
			return 0
		}
		fmt.Fprintln(stdout, msg)
		return 0
	}
}

var (
	schedulePause = simpleSchedule("schedule pause", "Stop a schedule's runs until it is resumed.",
		[]string{"sluice schedule pause nightly-report"},
		func(c *cli, name string) (string, *sclient.Schedule, error) {
			s, err := c.c.PauseSchedule(c.ctx, name)
			return "paused schedule " + name + " (sluice schedule resume " + name + " starts it again)", &s, err
		})
	scheduleResume = simpleSchedule("schedule resume", "Start a paused schedule's runs again, from its first run after now. The runs that fell\ndue while it was paused are missed runs: its --missed policy sends nothing for them\n(skip) or one message (once).",
		[]string{"sluice schedule resume nightly-report"},
		func(c *cli, name string) (string, *sclient.Schedule, error) {
			s, err := c.c.ResumeSchedule(c.ctx, name)
			return fmt.Sprintf("resumed schedule %s; next run %s", name, runText(s.NextRun, s.TimeZone)), &s, err
		})
	scheduleDelete = simpleSchedule("schedule delete", "Delete a schedule. The messages it sent stay in their queue.",
		[]string{"sluice schedule delete nightly-report"},
		func(c *cli, name string) (string, *sclient.Schedule, error) {
			return "deleted schedule " + name, nil, c.c.DeleteSchedule(c.ctx, name)
		})
)

// scheduleHint says what to do next after a schedule command's err ("" to
// fall back on the common hints).
func scheduleHint(name string, err error) string {
	if !strings.HasPrefix(name, "schedule") {
		return ""
	}
	switch {
	case errors.Is(err, sclient.ErrNotFound):
		return "list the schedules with `sluice schedule list`, or create it with `sluice schedule create NAME QUEUE BODY --cron EXPR`."
	case errors.Is(err, sclient.ErrConflict):
		return "a schedule of that name exists with other settings: see it with `sluice schedule show NAME`, delete it first, or use another name."
	case errors.Is(err, sclient.ErrInvalidParameter):
		return "--cron takes five fields (minute hour day-of-month month day-of-week) or six (seconds first), or @hourly, @daily, @weekly, @monthly, @yearly; --tz an IANA name such as Europe/Berlin; `sluice schedule create --help` has examples."
	}
	return ""
}
