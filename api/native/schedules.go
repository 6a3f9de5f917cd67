package native

import (
	"time"

	"github.com/sluicemq/sluice/api/native/wire"
	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
)

// The schedule routes: list, create, get, pause, resume, delete.

// toSchedule converts a schedule for an answer.
func toSchedule(s model.Schedule) wire.Schedule {
	body := s.Message.Body
	out := wire.Schedule{
		Name: s.Name, Queue: s.Queue, Schedule: s.Spec, TimeZone: s.TimeZone, Missed: string(s.Missed), Paused: s.Paused,
		Message:   wire.Envelope{Body: &body, GroupID: s.Message.GroupID},
		CreatedAt: s.CreatedAt.UTC(), LastMessageID: s.LastMessageID, LastError: s.LastError,
		Sent: s.Sent, MissedRuns: s.MissedRuns,
	}
	attrs := s.Message.Attributes
	if a := fromBrokerAttrs(attrs); len(a) > 0 {
		out.Message.Attributes = a
	}
	if a, ok := attrs[model.MsgAttrPriority]; ok {
		n := attrInt(a)
		out.Message.Priority = &n
	}
	if a, ok := attrs[model.MsgAttrMaxAttempts]; ok {
		n := attrInt(a)
		out.Message.MaxAttempts = &n
	}
	if a, ok := attrs[model.MsgAttrCorrelationID]; ok {
		out.Message.CorrelationID = &a.StringValue
	}
	if a, ok := attrs[model.MsgAttrTraceParent]; ok {
		out.Message.TraceContext = &a.StringValue
	}
	at := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		u := t.UTC()
		return &u
	}
	out.NextRun, out.LastRun, out.LastErrorAt = at(s.NextRun), at(s.LastRun), at(s.LastErrorAt)
	return out
}

// The list's page size.
const defaultListSchedules = 100

func (h *Handler) listSchedules(c *call) (any, error) {
	q, err := queryOf(c.r, "prefix", "limit", "after")
	if err != nil {
		return nil, err
	}
	limit, err := q.int("limit", 1, model.MaxListSchedules-1, defaultListSchedules)
	if err != nil {
		return nil, err
	}
	// One more than the page shows whether there is a next page.
	ss, err := h.broker.ListSchedules(c.ctx, q.get("prefix"), q.get("after"), limit+1)
	if err != nil {
		return nil, err
	}
	out := &wire.ScheduleList{Schedules: []wire.Schedule{}}
	if len(ss) > limit {
		ss = ss[:limit]
		out.Next = ss[limit-1].Name
	}
	for _, s := range ss {
		out.Schedules = append(out.Schedules, toSchedule(s))
	}
	return out, nil
}

func (h *Handler) createSchedule(c *call) (any, error) {
	if _, err := queryOf(c.r); err != nil {
		return nil, err
	}
	var in wire.CreateScheduleRequest
	if err := h.decode(c, &in, false); err != nil {
		return nil, err
	}
	for _, f := range []struct{ name, value string }{{"name", in.Name}, {"queue", in.Queue}, {"schedule", in.Schedule}} {
		if f.value == "" {
			return nil, errorf(model.ErrMissingParameter, "Field %s is required.", f.name)
		}
	}
	c.queue = in.Queue
	e, err := toSendEntry("message", &in.Message, h.broker.Clock().Now())
	if err != nil {
		return nil, err
	}
	s, err := h.broker.CreateSchedule(c.ctx, broker.ScheduleRequest{
		Name: in.Name, Queue: in.Queue, Spec: in.Schedule, TimeZone: in.TimeZone, Missed: in.Missed, Paused: in.Paused, Message: e,
	})
	if err != nil {
		return nil, err
	}
	return toSchedule(s), nil
}

func (h *Handler) getSchedule(c *call) (any, error) {
	if _, err := queryOf(c.r); err != nil {
		return nil, err
	}
	s, err := h.broker.GetSchedule(c.ctx, c.r.PathValue("schedule"))
	if err != nil {
		return nil, err
	}
	return toSchedule(s), nil
}

func (h *Handler) pauseSchedule(c *call) (any, error) {
	if _, err := queryOf(c.r); err != nil {
		return nil, err
	}
	s, err := h.broker.PauseSchedule(c.ctx, c.r.PathValue("schedule"))
	if err != nil {
		return nil, err
	}
	return toSchedule(s), nil
}

func (h *Handler) resumeSchedule(c *call) (any, error) {
	if _, err := queryOf(c.r); err != nil {
		return nil, err
	}
	s, err := h.broker.ResumeSchedule(c.ctx, c.r.PathValue("schedule"))
	if err != nil {
		return nil, err
	}
	return toSchedule(s), nil
}

func (h *Handler) deleteSchedule(c *call) (any, error) {
	if _, err := queryOf(c.r); err != nil {
		return nil, err
	}
	return nil, h.broker.DeleteSchedule(c.ctx, c.r.PathValue("schedule"))
}
