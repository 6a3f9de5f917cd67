package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicemq/sluice/broker/internal/cron"
	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
)

// The front of schedules (storage.Backend.CreateSchedule and the others):
// the checks that need no atomicity, then the backend's. A schedule
// belongs to the caller's account and sends to a queue of that account;
// the backend's runner sends its runs (see storage.Backend).

// ScheduleRequest is a schedule to create (Broker.CreateSchedule).
type ScheduleRequest struct {
	// Name is the schedule's name: 1 to 80 alphanumeric characters,
	// hyphens or underscores.
	Name string
	// Queue is the queue of the caller's account that every run sends to;
	// it must exist.
	Queue string
	// Spec is a cron expression (five fields, or six with seconds first),
	// a descriptor (@hourly, @daily, @weekly, @monthly, @yearly) or
	// "@every <interval>" (package broker/internal/cron has the rules).
	Spec string
	// TimeZone is the IANA time zone of a cron spec's times ("": UTC).
	TimeZone string
	// Missed is the missed-runs policy: "skip" ("", the default) or
	// "once" (model.MissedPolicy).
	Missed string
	// Paused creates the schedule paused.
	Paused bool
	// Message is what each run sends: its body, attributes (the Sluice
	// options among them) and group id. A delay or a dedup id is refused:
	// each run's dedup id is its own key (model.ScheduleRunKey).
	Message model.SendEntry
}

// CreateSchedule creates a schedule, or returns the existing schedule of
// that name when the request asks for the same one (ErrConflict when it
// asks for another). Its message is checked against its queue as a send of
// it would be now; the queue's settings may change later, and a run the
// queue then refuses is recorded on the schedule (LastError). The first
// run is the first instant of the spec after now (an interval's: now, to
// the second, plus the interval).
func (b *Broker) CreateSchedule(ctx context.Context, req ScheduleRequest) (model.Schedule, error) {
	if err := model.ValidateScheduleName(req.Name); err != nil {
		return model.Schedule{}, err
	}
	if _, err := cron.Parse(req.Spec, req.TimeZone); err != nil {
		return model.Schedule{}, err
	}
	missed, err := model.ParseMissedPolicy(req.Missed)
	if err != nil {
		return model.Schedule{}, err
	}
	e := req.Message
	switch {
	case e.Delay != nil:
		return model.Schedule{}, model.InvalidParameterError("a delay", "DelaySeconds", "a schedule's message takes no delay: give the schedule the time the message is due instead.")
	case e.DedupID != "":
		return model.Schedule{}, model.InvalidParameterError(fmt.Sprintf("%q", e.DedupID), "MessageDeduplicationId", "a schedule's message takes no dedup id: each run's message carries the run's own key.")
	case len(e.SystemAttributes) > 0:
		return model.Schedule{}, model.InvalidParameterError("system attributes", "MessageSystemAttributes", "a schedule's message takes none.")
	}
	if err := model.ValidateQueueName(req.Queue); err != nil {
		return model.Schedule{}, model.QueueNotFoundError()
	}
	account := b.refIn(b.CallerAccount(ctx), "").Account
	qref := model.QueueRef{Account: account, Name: req.Queue}
	q, err := b.backend.GetQueue(ctx, qref)
	if err != nil {
		return model.Schedule{}, err
	}
	now := b.clock.Now()
	sender := CallerFrom(ctx).AccessKey
	if sender == "" {
		sender = b.CallerAccount(ctx)
	}
	s := model.Schedule{
		ID: model.NewMessageID(), Account: account, Name: req.Name, Queue: req.Queue,
		Spec: req.Spec, TimeZone: req.TimeZone, Missed: missed, Paused: req.Paused,
		Message:   model.ScheduleMessage{Body: e.Body, Attributes: e.Attributes, GroupID: e.GroupID, SenderID: sender},
		CreatedAt: now.Truncate(time.Microsecond),
	}
	if s.TimeZone == "" {
		s.TimeZone = "UTC"
	}
	// The message as a run will send it, checked as a send of it now.
	if err := checkRun(q.Config, q.Name, s.RunEntry(now)); err != nil {
		return model.Schedule{}, err
	}
	// Runs fall on whole seconds: an interval counts from the second.
	if s.NextRun, err = plan.ScheduleFirstRun(s.Spec, s.TimeZone, now.Truncate(time.Second)); err != nil {
		return model.Schedule{}, err
	}
	got, created, err := b.backend.CreateSchedule(ctx, s)
	if err != nil {
		return model.Schedule{}, err
	}
	if !created {
		if setting := got.ConflictingSetting(s); setting != "" {
			return model.Schedule{}, model.ScheduleExistsError(req.Name, setting)
		}
		return got, nil
	}
	b.audit(ctx, "create_schedule", qref.String(), slog.String("schedule", s.Ref().String()),
		slog.String("spec", s.Spec), slog.String("time_zone", s.TimeZone))
	return got, nil
}

// checkRun checks a run's message against its queue's settings with the
// send's own rules (plan.Send), as the queue stands now.
func checkRun(c model.QueueConfig, queue string, e model.SendEntry) error {
	plans, err := plan.Send(c, queue, 0, []model.SendEntry{e})
	if err != nil {
		var full *model.DepthError
		if errors.As(err, &full) {
			return nil // a full queue may drain before the first run
		}
		return err
	}
	return plans[0].Err
}

// scheduleRef names the caller's schedule name; a name no schedule can
// have names none.
func (b *Broker) scheduleRef(ctx context.Context, name string) (model.ScheduleRef, error) {
	if model.ValidateScheduleName(name) != nil {
		return model.ScheduleRef{}, model.ScheduleNotFoundError(name)
	}
	return model.ScheduleRef{Account: b.refIn(b.CallerAccount(ctx), "").Account, Name: name}, nil
}

// GetSchedule returns the caller's schedule name (ErrResourceNotFound when
// there is none).
func (b *Broker) GetSchedule(ctx context.Context, name string) (model.Schedule, error) {
	ref, err := b.scheduleRef(ctx, name)
	if err != nil {
		return model.Schedule{}, err
	}
	return b.backend.GetSchedule(ctx, ref)
}

// ListSchedules returns the caller's schedules whose names start with
// prefix and sort after `after`, in name order, at most limit of them
// (1..MaxListSchedules; 0 means MaxListSchedules).
func (b *Broker) ListSchedules(ctx context.Context, prefix, after string, limit int) ([]model.Schedule, error) {
	if limit == 0 {
		limit = model.MaxListSchedules
	}
	if limit < 1 || limit > model.MaxListSchedules {
		return nil, model.InvalidParameterError(limit, "limit", fmt.Sprintf("must be between 1 and %d.", model.MaxListSchedules))
	}
	return b.backend.ListSchedules(ctx, b.refIn(b.CallerAccount(ctx), "").Account, prefix, after, limit)
}

// PauseSchedule pauses a schedule: it sends nothing until resumed. Pausing
// a paused schedule changes nothing.
func (b *Broker) PauseSchedule(ctx context.Context, name string) (model.Schedule, error) {
	return b.setSchedulePaused(ctx, name, true)
}

// ResumeSchedule resumes a paused schedule. The runs that fell due while
// it was paused are missed: its policy sends nothing for them (skip) or
// one message (once), and it goes on with its first run after now.
// Resuming a running schedule changes nothing.
func (b *Broker) ResumeSchedule(ctx context.Context, name string) (model.Schedule, error) {
	return b.setSchedulePaused(ctx, name, false)
}

func (b *Broker) setSchedulePaused(ctx context.Context, name string, paused bool) (model.Schedule, error) {
	ref, err := b.scheduleRef(ctx, name)
	if err != nil {
		return model.Schedule{}, err
	}
	s, err := b.backend.SetSchedulePaused(ctx, ref, paused)
	if err == nil {
		action := "resume_schedule"
		if paused {
			action = "pause_schedule"
		}
		b.audit(ctx, action, s.QueueRef().String(), slog.String("schedule", ref.String()))
	}
	return s, err
}

// DeleteSchedule deletes a schedule; its messages already sent stay.
func (b *Broker) DeleteSchedule(ctx context.Context, name string) error {
	ref, err := b.scheduleRef(ctx, name)
	if err != nil {
		return err
	}
	if err := b.backend.DeleteSchedule(ctx, ref); err != nil {
		return err
	}
	b.audit(ctx, "delete_schedule", "", slog.String("schedule", ref.String()))
	return nil
}
