package client

import (
	"context"
	"net/http"
	"net/url"

	"time"

	"github.com/sluicemq/sluice/api/native/wire"
)

// Schedule is a durable schedule: it sends Message to Queue at the runs of
// its Spec in its TimeZone (docs/api.md, Schedules).
type Schedule struct {
	Name, Queue string
	// Spec is the cron expression, descriptor or "@every <interval>";
	// TimeZone its IANA time zone ("UTC" when none was given).
	Spec, TimeZone string
	// Missed is the missed-runs policy: "skip" or "once".
	Missed string
	Paused bool
	// Message is what every run sends (Delay, DeliverAt and DedupID are
	// never set: each run's message carries its run's own dedup id).
	Message   Message
	CreatedAt time.Time
	// NextRun is the next run (zero when it has none left); LastRun and
	// LastMessageID the latest run stored (zero and "" before the first).
	NextRun, LastRun time.Time
	LastMessageID    string
	// LastError says why the latest run was not stored (its queue was gone,
	// full, or refused it), at the run time LastErrorAt; "" when it was.
	LastError   string
	LastErrorAt time.Time
	// Sent counts the messages stored; MissedRuns the runs no broker sent
	// on time, or that fell due while the schedule was paused.
	Sent, MissedRuns int64
}

// ScheduleSpec is a schedule to create (CreateSchedule).
type ScheduleSpec struct {
	// Name is 1 to 80 letters, digits, hyphens or underscores.
	Name string
	// Queue is the queue every run sends to (it must exist).
	Queue string
	// Spec is when it runs: a cron expression of five fields (minute hour
	// day-of-month month day-of-week) or six (seconds first), a descriptor
	// (@hourly, @daily, @weekly, @monthly, @yearly), or "@every 5m".
	Spec string
	// TimeZone is the IANA time zone of a cron expression ("": UTC).
	TimeZone string
	// Missed is "skip" (the default: runs no broker sent on time send
	// nothing) or "once" (they send one message).
	Missed string
	// Paused creates it paused.
	Paused bool
	// Message is what every run sends; Delay, DeliverAt and DedupID must
	// be zero.
	Message Message
}

// scheduleOf converts a schedule.
func scheduleOf(s *wire.Schedule) (Schedule, error) {
	attrs, err := fromWireAttrs(s.Message.Attributes)
	if err != nil {
		return Schedule{}, err
	}
	m := Message{Attributes: attrs, GroupID: s.Message.GroupID}
	if s.Message.Body != nil {
		m.Body = *s.Message.Body
	}
	if s.Message.Priority != nil {
		m.Priority = *s.Message.Priority
	}
	if s.Message.MaxAttempts != nil {
		m.MaxAttempts = *s.Message.MaxAttempts
	}
	if s.Message.CorrelationID != nil {
		m.CorrelationID = *s.Message.CorrelationID
	}
	if s.Message.TraceContext != nil {
		m.TraceContext = *s.Message.TraceContext
	}
	return Schedule{
		Name: s.Name, Queue: s.Queue, Spec: s.Schedule, TimeZone: s.TimeZone, Missed: s.Missed, Paused: s.Paused,
		Message: m, CreatedAt: s.CreatedAt, NextRun: timeOf(s.NextRun), LastRun: timeOf(s.LastRun),
		LastMessageID: s.LastMessageID, LastError: s.LastError, LastErrorAt: timeOf(s.LastErrorAt),
		Sent: s.Sent, MissedRuns: s.MissedRuns,
	}, nil
}

// schedulePath is the path of schedule name, and of rest under it.
func schedulePath(name string, rest ...string) string {
	p := "/schedules/" + url.PathEscape(name)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

// oneSchedule runs r, whose answer is a schedule.
func (c *Client) oneSchedule(ctx context.Context, r request) (Schedule, error) {
	var out wire.Schedule
	if err := c.do(ctx, r, &out); err != nil {
		return Schedule{}, err
	}
	return scheduleOf(&out)
}

// CreateSchedule creates a schedule and answers it, with its first run
// (NextRun). A create of an existing name answers that schedule when spec
// asks for the same one, else ErrConflict. A bad expression or time zone
// is ErrInvalidParameter, a missing queue ErrQueueNotFound.
func (c *Client) CreateSchedule(ctx context.Context, spec ScheduleSpec) (Schedule, error) {
	in := wire.CreateScheduleRequest{Name: spec.Name, Queue: spec.Queue, Schedule: spec.Spec, TimeZone: spec.TimeZone,
		Missed: spec.Missed, Paused: spec.Paused, Message: toEnvelope(&spec.Message)}
	return c.oneSchedule(ctx, request{method: http.MethodPost, path: "/schedules", body: in, idempotent: true})
}

// GetSchedule answers a schedule (ErrNotFound when there is none).
func (c *Client) GetSchedule(ctx context.Context, name string) (Schedule, error) {
	return c.oneSchedule(ctx, request{method: http.MethodGet, path: schedulePath(name), idempotent: true})
}

// SchedulePage is a page of schedules in name order. Next, when not "",
// names the page's last schedule: pass it with After for the next page.
type SchedulePage struct {
	Schedules []Schedule
	Next      string
}

// ListSchedules answers a page of schedules in name order; Prefix, After
// and PageSize (1..999, default 100) apply.
func (c *Client) ListSchedules(ctx context.Context, opts ...ListOption) (SchedulePage, error) {
	q := url.Values{}
	for _, o := range opts {
		o(q)
	}
	var out wire.ScheduleList
	if err := c.do(ctx, request{method: http.MethodGet, path: "/schedules", query: q, idempotent: true}, &out); err != nil {
		return SchedulePage{}, err
	}
	page := SchedulePage{Schedules: make([]Schedule, len(out.Schedules)), Next: out.Next}
	for i := range out.Schedules {
		s, err := scheduleOf(&out.Schedules[i])
		if err != nil {
			return SchedulePage{}, err
		}
		page.Schedules[i] = s
	}
	return page, nil
}

// PauseSchedule pauses a schedule (it sends nothing until resumed) and
// answers it.
func (c *Client) PauseSchedule(ctx context.Context, name string) (Schedule, error) {
	return c.oneSchedule(ctx, request{method: http.MethodPost, path: schedulePath(name, "pause"), idempotent: true})
}

// ResumeSchedule resumes a paused schedule and answers it: it goes on with
// its first run after now, and the runs that fell due while it was paused
// are missed runs (its Missed policy decides).
func (c *Client) ResumeSchedule(ctx context.Context, name string) (Schedule, error) {
	return c.oneSchedule(ctx, request{method: http.MethodPost, path: schedulePath(name, "resume"), idempotent: true})
}

// DeleteSchedule deletes a schedule (the messages it sent stay). Not
// retried after an ambiguous failure (the repeat would answer
// ErrNotFound).
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: schedulePath(name)}, nil)
}
