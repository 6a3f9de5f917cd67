package embedded

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
)

// Schedules (storage.Backend).
//
// # State
//
// A schedule is one record, 0x05 <name> (or 0x05 <account>:<name>, as a
// queue record is keyed), JSON scheduleRecord. Backend.schedules holds
// every schedule in memory, by account and name, guarded by Backend.mu;
// Open loads them.
//
// # The runner and exactly once
//
// b.scheduler is a lifecycle.Duty (started by Open, stopped by Close)
// whose step (scheduleTick) steps every due schedule and sleeps until the
// earliest NextRun; a create or a resume kicks it. One step of a schedule
// (fireLocked) runs under Backend.mu and writes one Pebble batch: the
// run's message, planned with plan.Send and stored as Send stores it, and
// the schedule record with its NextRun moved past the run. The batch is
// atomic in the log, so after a crash (kill -9 included) either both are
// there or neither: a run whose batch was lost is still due when the store
// opens again, and is sent then (late, or missed past the grace); one
// whose batch was synced is never sent again.

// pfxSchedule prefixes the schedule records (see codec.go for the others).
const pfxSchedule byte = 0x05

// scheduleIdle is how long the runner sleeps when no schedule is due
// sooner: every change to the schedules is made here and kicks it.
const scheduleIdle = time.Hour

// scheduleRetry is the sleep after a failed step (the disk below its
// reserve): the runs stay due, and are sent once a step succeeds, within
// the grace, or are missed runs.
const scheduleRetry = 10 * time.Second

// maxScheduleSteps bounds the steps of one runner pass: a pass that did as
// many runs again at once, after letting calls waiting for Backend.mu in.
const maxScheduleSteps = 256

func scheduleKey(r model.ScheduleRef) []byte {
	k := []byte{pfxSchedule}
	if r.Account != "" {
		k = append(append(k, r.Account...), ':')
	}
	return append(k, r.Name...)
}

// scheduleRecord is the stored form of a schedule.
type scheduleRecord struct {
	ID            string                            `json:"id"`
	Account       string                            `json:"account,omitempty"`
	Name          string                            `json:"name"`
	Queue         string                            `json:"queue"`
	Spec          string                            `json:"spec"`
	TimeZone      string                            `json:"tz"`
	Missed        model.MissedPolicy                `json:"missed"`
	Body          string                            `json:"body"`
	Attributes    map[string]model.MessageAttribute `json:"attrs,omitempty"`
	GroupID       string                            `json:"group,omitempty"`
	SenderID      string                            `json:"sender,omitempty"`
	Paused        bool                              `json:"paused,omitempty"`
	CreatedAt     time.Time                         `json:"created"`
	NextRun       time.Time                         `json:"next"`
	LastRun       time.Time                         `json:"last"`
	LastMessageID string                            `json:"lastId,omitempty"`
	LastError     string                            `json:"lastError,omitempty"`
	LastErrorAt   time.Time                         `json:"lastErrorAt"`
	Sent          int64                             `json:"sent,omitempty"`
	MissedRuns    int64                             `json:"missedRuns,omitempty"`
}

func toScheduleRecord(s *model.Schedule) scheduleRecord {
	return scheduleRecord{
		ID: s.ID, Account: s.Account, Name: s.Name, Queue: s.Queue, Spec: s.Spec, TimeZone: s.TimeZone, Missed: s.Missed,
		Body: s.Message.Body, Attributes: s.Message.Attributes, GroupID: s.Message.GroupID, SenderID: s.Message.SenderID,
		Paused: s.Paused, CreatedAt: s.CreatedAt, NextRun: s.NextRun, LastRun: s.LastRun, LastMessageID: s.LastMessageID,
		LastError: s.LastError, LastErrorAt: s.LastErrorAt, Sent: s.Sent, MissedRuns: s.MissedRuns,
	}
}

func (r *scheduleRecord) schedule() *model.Schedule {
	return &model.Schedule{
		ID: r.ID, Account: r.Account, Name: r.Name, Queue: r.Queue, Spec: r.Spec, TimeZone: r.TimeZone, Missed: r.Missed,
		Message: model.ScheduleMessage{Body: r.Body, Attributes: r.Attributes, GroupID: r.GroupID, SenderID: r.SenderID},
		Paused:  r.Paused, CreatedAt: r.CreatedAt, NextRun: r.NextRun, LastRun: r.LastRun, LastMessageID: r.LastMessageID,
		LastError: r.LastError, LastErrorAt: r.LastErrorAt, Sent: r.Sent, MissedRuns: r.MissedRuns,
	}
}

func encodeSchedule(s *model.Schedule) []byte {
	b, err := json.Marshal(toScheduleRecord(s))
	if err != nil {
		panic(err) // plain data
	}
	return b
}

// recoverSchedules loads the schedule records (Open, before any goroutine).
func (b *Backend) recoverSchedules() error {
	b.schedules = map[model.ScheduleRef]*model.Schedule{}
	it, err := b.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxSchedule}, UpperBound: []byte{pfxSchedule + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		var rec scheduleRecord
		if err := json.Unmarshal(it.Value(), &rec); err != nil {
			return fmt.Errorf("embedded: schedule record %q: %w", it.Key(), err)
		}
		s := rec.schedule()
		b.schedules[s.Ref()] = s
	}
	return it.Error()
}

// CreateSchedule implements storage.Backend.
func (b *Backend) CreateSchedule(ctx context.Context, s model.Schedule) (model.Schedule, bool, error) {
	if err := b.enter(ctx); err != nil {
		return model.Schedule{}, false, err
	}
	defer b.life.Done()
	batch := b.db.NewBatch()
	b.mu.Lock()
	if old := b.schedules[s.Ref()]; old != nil {
		// Reported once the change that created it is durable.
		syncEarlierToo(batch)
		err := b.applyLocked(batch)
		out := old.Clone()
		b.mu.Unlock()
		return out, false, b.wait(batch, err)
	}
	stored := s.Clone()
	_ = batch.Set(scheduleKey(s.Ref()), encodeSchedule(&stored), nil)
	err := b.applyLocked(batch)
	if err == nil {
		b.schedules[s.Ref()] = &stored
	}
	b.mu.Unlock()
	if err := b.wait(batch, err); err != nil {
		return model.Schedule{}, false, err
	}
	b.scheduler.Kick()
	return s, true, nil
}

// GetSchedule implements storage.Backend.
func (b *Backend) GetSchedule(ctx context.Context, ref model.ScheduleRef) (model.Schedule, error) {
	if err := ctx.Err(); err != nil {
		return model.Schedule{}, err
	}
	if err := b.space.stalledRefusal(); err != nil { // the lock may be held by a stalled write
		return model.Schedule{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.refusal(); err != nil {
		return model.Schedule{}, err
	}
	s := b.schedules[ref]
	if s == nil {
		return model.Schedule{}, model.ScheduleNotFoundError(ref.Name)
	}
	return s.Clone(), nil
}

// ListSchedules implements storage.Backend.
func (b *Backend) ListSchedules(ctx context.Context, account, prefix, after string, limit int) ([]model.Schedule, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := b.space.stalledRefusal(); err != nil { // the lock may be held by a stalled write
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.refusal(); err != nil {
		return nil, err
	}
	var out []model.Schedule
	for r, s := range b.schedules {
		if r.Account == account && strings.HasPrefix(r.Name, prefix) && r.Name > after {
			out = append(out, s.Clone())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// SetSchedulePaused implements storage.Backend.
func (b *Backend) SetSchedulePaused(ctx context.Context, ref model.ScheduleRef, paused bool) (model.Schedule, error) {
	if err := b.enter(ctx); err != nil {
		return model.Schedule{}, err
	}
	defer b.life.Done()
	if !paused {
		// A resume may store a message (MissedOnce).
		if err := b.space.check(); err != nil {
			return model.Schedule{}, err
		}
	}
	batch := b.db.NewBatch()
	b.mu.Lock()
	s := b.schedules[ref]
	if s == nil {
		b.mu.Unlock()
		_ = batch.Close()
		return model.Schedule{}, model.ScheduleNotFoundError(ref.Name)
	}
	stored := false
	switch {
	case s.Paused == paused:
		syncEarlierToo(batch) // the change that made it so may be syncing
	case paused:
		next := *s
		next.Paused = true
		_ = batch.Set(scheduleKey(ref), encodeSchedule(&next), nil)
		*s = next
	default:
		step, err := plan.ScheduleResume(*s, b.clock.Now())
		if err != nil {
			b.mu.Unlock()
			_ = batch.Close()
			return model.Schedule{}, err
		}
		stored = b.stepLocked(s, batch, step, false)
	}
	err := b.applyLocked(batch)
	out := s.Clone()
	b.mu.Unlock()
	if err := b.wait(batch, err); err != nil {
		return model.Schedule{}, err
	}
	if stored {
		b.countRun(out)
	}
	if !paused {
		b.scheduler.Kick()
	}
	return out, nil
}

// DeleteSchedule implements storage.Backend.
func (b *Backend) DeleteSchedule(ctx context.Context, ref model.ScheduleRef) error {
	if err := b.enter(ctx); err != nil {
		return err
	}
	defer b.life.Done()
	batch := b.db.NewBatch()
	b.mu.Lock()
	if b.schedules[ref] == nil {
		b.mu.Unlock()
		_ = batch.Close()
		return model.ScheduleNotFoundError(ref.Name)
	}
	_ = batch.Delete(scheduleKey(ref), nil)
	err := b.applyLocked(batch)
	if err == nil {
		delete(b.schedules, ref)
	}
	b.mu.Unlock()
	return b.wait(batch, err)
}

// scheduleTick is the runner's step (b.scheduler, a lifecycle.Duty; see the
// top of this file): every due step of every schedule, each one batch,
// then the earliest NextRun.
func (b *Backend) scheduleTick(context.Context) (time.Time, error) {
	if b.refusal() != nil {
		return time.Time{}, nil // closing (the duty is stopped next), or failed
	}
	if err := b.space.check(); err != nil {
		return time.Time{}, err // no run is lost: it is still due
	}
	now := b.clock.Now()
	b.mu.Lock()
	var due []model.ScheduleRef
	for r, s := range b.schedules {
		if !s.Paused && !s.NextRun.IsZero() && !s.NextRun.After(now) {
			due = append(due, r)
		}
	}
	b.mu.Unlock()
	steps := 0
	for _, r := range due {
		for steps < maxScheduleSteps {
			fired, err := b.fire(r, now)
			if err != nil {
				return time.Time{}, err
			}
			if !fired {
				break
			}
			steps++
		}
	}
	if steps >= maxScheduleSteps {
		return now, nil // more is due: again at once
	}
	var next time.Time
	b.mu.Lock()
	for _, s := range b.schedules {
		if !s.Paused && !s.NextRun.IsZero() && (next.IsZero() || s.NextRun.Before(next)) {
			next = s.NextRun
		}
	}
	b.mu.Unlock()
	return next, nil
}

// fire takes one step of schedule r at now (plan.ScheduleDue), if one is
// due, in one batch; fired says whether it took one.
func (b *Backend) fire(r model.ScheduleRef, now time.Time) (fired bool, err error) {
	batch := b.db.NewBatch()
	b.mu.Lock()
	s := b.schedules[r]
	if s == nil {
		b.mu.Unlock()
		_ = batch.Close()
		return false, nil
	}
	step, ok, err := plan.ScheduleDue(*s, now)
	if err != nil || !ok {
		b.mu.Unlock()
		_ = batch.Close()
		return false, err
	}
	stored := b.stepLocked(s, batch, step, true)
	out := *s
	err = b.applyLocked(batch)
	b.mu.Unlock()
	if err := b.wait(batch, err); err != nil {
		return false, err
	}
	if stored {
		b.countRun(out)
	}
	return true, nil
}

// countRun tells the observer of the message a run of s stored (the
// front counts the other sends; a run's send never passes through it).
func (b *Backend) countRun(s model.Schedule) {
	if b.opts.Observer != nil {
		b.opts.Observer.Count(s.QueueRef().String(), model.CountSent, 1)
	}
}

// stepLocked writes one step of schedule s into batch: the run's message,
// if the step has one and the queue takes it (stored), and the record with
// the schedule moved on (s is changed in place). b.mu must be held.
func (b *Backend) stepLocked(s *model.Schedule, batch *pebble.Batch, step plan.ScheduleStep, running bool) (stored bool) {
	next := *s
	next.NextRun = step.Next
	next.MissedRuns += step.Missed
	if !running {
		next.Paused = false
	}
	if !step.Run.IsZero() {
		id, err := b.sendRunLocked(s, batch, step.Run)
		if err != nil {
			next.LastError, next.LastErrorAt = model.ScheduleRunError(err), step.Run
			b.log.Warn("a schedule's run was not stored", "schedule", s.Ref().String(), "queue", s.Queue,
				"run", step.Run, "err", model.ErrorMessage(err))
		} else {
			next.LastRun, next.LastMessageID, next.LastError, next.LastErrorAt = step.Run, id, "", time.Time{}
			next.Sent++
			stored = true
		}
	}
	if step.Missed > 0 {
		b.log.Info("a schedule missed runs", "schedule", s.Ref().String(), "missed", step.Missed,
			"policy", string(s.Missed), "next_run", step.Next)
	}
	_ = batch.Set(scheduleKey(s.Ref()), encodeSchedule(&next), nil)
	*s = next
	return stored
}

// sendRunLocked stores the message of s's run at instant at into batch, as
// Send stores one (plan.Send: the queue's rules, MaxDepth and
// deduplication), and returns its message id; an error is the queue's
// refusal, and nothing is stored. b.mu must be held.
func (b *Backend) sendRunLocked(s *model.Schedule, batch *pebble.Batch, at time.Time) (string, error) {
	q := b.queues[s.QueueRef()]
	if q == nil {
		return "", model.QueueNotFoundError()
	}
	entries := []model.SendEntry{s.RunEntry(at)}
	now := b.now()
	plans, err := plan.Send(q.Config, q.Name, q.admitDepth(now), entries)
	if err != nil {
		return "", err
	}
	if err := plans[0].Err; err != nil {
		return "", err
	}
	results := []model.SendResult{{MessageID: plans[0].MessageID}}
	b.storeLocked(q, batch, entries, plans, [][]byte{encodeBody(plans[0].MessageID, &entries[0])}, results, now)
	return results[0].MessageID, nil
}
