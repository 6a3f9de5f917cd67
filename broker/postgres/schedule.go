package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
)

// Schedules (storage.Backend), migration 15: a schedules row per schedule.
//
// # The runner and exactly once
//
// Every broker runs the schedules (b.scheduler, a lifecycle.Duty on the
// clock): it wakes at the earliest next_run of the schedules that are not
// paused, at most scheduleIdle later (to see schedules created on other
// brokers), and at once when a schedule is created or resumed here. For
// each due schedule, one step is one transaction (fireOne): it locks the
// row FOR UPDATE SKIP LOCKED where next_run has come, plans the step with
// the transaction's instant (plan.ScheduleDue), stores the run's message
// with the one send code (sendOn, in a savepoint), and moves next_run past
// the run, compared and set on the value it read. Brokers racing for a run
// therefore store it once: the one that locks the row stores the message
// and moves next_run in one commit; the others skip the locked row, or,
// once it is committed, find next_run moved and store nothing. A broker
// killed inside the transaction leaves nothing: PostgreSQL rolls it back
// when the connection drops, the row is unlocked with next_run unchanged,
// and another broker's runner sends the run on its next look (within
// PollInterval), well within the grace (model.ScheduleGrace).
//
// The run's message also carries the run's key as its dedup id
// (model.ScheduleRunKey), so the queue's deduplication window would answer
// a second store of the same run with the first one's message id.

// scheduleIdle is the longest sleep of the runner: how soon a schedule
// created on another broker is run by this one too.
const scheduleIdle = 10 * time.Second

// maxScheduleSteps bounds the runs of one runner pass (then again at once).
const maxScheduleSteps = 256

// scheduleCols are the columns scanSchedule reads, in its order.
const scheduleCols = `id, account, name, queue, spec, time_zone, missed, body, attrs, group_id, sender_id,
	paused, created_at, next_run, last_run, last_message_id, last_error, last_error_at, sent, missed_runs`

// scanSchedule reads a row of scheduleCols, then extra.
func scanSchedule(row pgx.Row, extra ...any) (model.Schedule, error) {
	var s model.Schedule
	var attrs []byte
	var next, last, errAt *time.Time
	var missed string
	dest := append([]any{&s.ID, &s.Account, &s.Name, &s.Queue, &s.Spec, &s.TimeZone, &missed,
		&s.Message.Body, &attrs, &s.Message.GroupID, &s.Message.SenderID, &s.Paused, &s.CreatedAt,
		&next, &last, &s.LastMessageID, &s.LastError, &errAt, &s.Sent, &s.MissedRuns}, extra...)
	if err := row.Scan(dest...); err != nil {
		return model.Schedule{}, err
	}
	s.Missed = model.MissedPolicy(missed)
	if len(attrs) > 0 {
		var a storedAttrs
		if err := json.Unmarshal(attrs, &a); err != nil {
			return model.Schedule{}, fmt.Errorf("schedule %s: attributes: %w", s.Name, err)
		}
		s.Message.Attributes = a.A
	}
	for _, t := range []struct {
		src *time.Time
		dst *time.Time
	}{{next, &s.NextRun}, {last, &s.LastRun}, {errAt, &s.LastErrorAt}} {
		if t.src != nil {
			*t.dst = *t.src
		}
	}
	return s, nil
}

// nullTime is t for SQL, NULL when zero.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// CreateSchedule implements storage.Backend: an insert that a unique name
// makes win once; a loser (or a repeat) reads the existing row.
func (b *Backend) CreateSchedule(ctx context.Context, s model.Schedule) (_ model.Schedule, _ bool, err error) {
	defer unavailable(ctx, &err)
	if err := b.enter(ctx); err != nil {
		return model.Schedule{}, false, err
	}
	defer b.life.Done()
	var attrs []byte
	if len(s.Message.Attributes) > 0 {
		attrs, _ = json.Marshal(storedAttrs{A: s.Message.Attributes})
	}
	tag, err := b.pool.Exec(ctx, `INSERT INTO schedules (id, account, name, queue, spec, time_zone, missed, body, attrs,
			group_id, sender_id, paused, created_at, next_run)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
		ON CONFLICT (account, name) DO NOTHING`,
		s.ID, s.Account, s.Name, s.Queue, s.Spec, s.TimeZone, string(s.Missed), s.Message.Body, attrs,
		s.Message.GroupID, s.Message.SenderID, s.Paused, s.CreatedAt, nullTime(s.NextRun))
	if err != nil {
		return model.Schedule{}, false, dbErr("create schedule", err)
	}
	if tag.RowsAffected() == 0 {
		old, err := b.readSchedule(ctx, s.Ref())
		return old, false, err
	}
	b.scheduler.Kick()
	out, err := b.readSchedule(ctx, s.Ref()) // as stored (instants in microseconds)
	return out, true, err
}

// readSchedule reads the schedule ref names.
func (b *Backend) readSchedule(ctx context.Context, ref model.ScheduleRef) (model.Schedule, error) {
	s, err := scanSchedule(b.pool.QueryRow(ctx, "SELECT "+scheduleCols+" FROM schedules WHERE account = $1 AND name = $2",
		ref.Account, ref.Name))
	if errors.Is(err, pgx.ErrNoRows) {
		return model.Schedule{}, model.ScheduleNotFoundError(ref.Name)
	}
	if err != nil {
		return model.Schedule{}, dbErr("read schedule", err)
	}
	return s, nil
}

// GetSchedule implements storage.Backend.
func (b *Backend) GetSchedule(ctx context.Context, ref model.ScheduleRef) (_ model.Schedule, err error) {
	defer unavailable(ctx, &err)
	if err := b.enter(ctx); err != nil {
		return model.Schedule{}, err
	}
	defer b.life.Done()
	return b.readSchedule(ctx, ref)
}

// ListSchedules implements storage.Backend.
func (b *Backend) ListSchedules(ctx context.Context, account, prefix, after string, limit int) (_ []model.Schedule, err error) {
	defer unavailable(ctx, &err)
	if err := b.enter(ctx); err != nil {
		return nil, err
	}
	defer b.life.Done()
	lim := any(nil) // SQL NULL: no limit
	if limit > 0 {
		lim = limit
	}
	rows, err := b.pool.Query(ctx, "SELECT "+scheduleCols+` FROM schedules
		WHERE account = $1 AND starts_with(name, $2) AND name > $3 ORDER BY name LIMIT $4`, account, prefix, after, lim)
	if err != nil {
		return nil, dbErr("list schedules", err)
	}
	defer rows.Close()
	var out []model.Schedule
	for rows.Next() {
		s, err := scanSchedule(rows)
		if err != nil {
			return nil, dbErr("list schedules", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("list schedules", err)
	}
	return out, nil
}

// SetSchedulePaused implements storage.Backend: the row is locked (FOR
// UPDATE: a runner's step in progress finishes first), and a resume is
// planned (plan.ScheduleResume) and written as a runner's step is.
func (b *Backend) SetSchedulePaused(ctx context.Context, ref model.ScheduleRef, paused bool) (_ model.Schedule, err error) {
	defer unavailable(ctx, &err)
	if err := b.enter(ctx); err != nil {
		return model.Schedule{}, err
	}
	defer b.life.Done()
	var woke func()
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		woke = nil
		var now time.Time
		s, err := scanSchedule(tx.QueryRow(ctx, "SELECT "+scheduleCols+", "+nowSQL+` FROM schedules
			WHERE account = $2 AND name = $3 FOR UPDATE`, b.tnow(), ref.Account, ref.Name), &now)
		if errors.Is(err, pgx.ErrNoRows) {
			return model.ScheduleNotFoundError(ref.Name)
		}
		if err != nil || s.Paused == paused {
			return err
		}
		if paused {
			_, err := tx.Exec(ctx, "UPDATE schedules SET paused = true WHERE id = $1", s.ID)
			return err
		}
		step, err := plan.ScheduleResume(s, now)
		if err != nil {
			return err
		}
		woke, err = b.stepTx(ctx, tx, s, step, now, false)
		return err
	})
	if err != nil {
		var me *model.Error
		if errors.As(err, &me) {
			return model.Schedule{}, err
		}
		return model.Schedule{}, dbErr("pause or resume schedule", err)
	}
	if woke != nil {
		woke()
	}
	if !paused {
		b.scheduler.Kick()
	}
	return b.readSchedule(ctx, ref)
}

// DeleteSchedule implements storage.Backend (a step in progress holds the
// row: the delete waits for it).
func (b *Backend) DeleteSchedule(ctx context.Context, ref model.ScheduleRef) (err error) {
	defer unavailable(ctx, &err)
	if err := b.enter(ctx); err != nil {
		return err
	}
	defer b.life.Done()
	tag, err := b.pool.Exec(ctx, "DELETE FROM schedules WHERE account = $1 AND name = $2", ref.Account, ref.Name)
	if err != nil {
		return dbErr("delete schedule", err)
	}
	if tag.RowsAffected() == 0 {
		return model.ScheduleNotFoundError(ref.Name)
	}
	return nil
}

// scheduleTick is the runner's step (see the top of this file): one
// transaction per due step, then the wake-up scheduleNextDue names.
func (b *Backend) scheduleTick(ctx context.Context) (time.Time, error) {
	var looked time.Time // the instant the due schedules were looked for
	var ids []string
	err := b.pool.QueryRow(ctx, `SELECT `+nowSQL+`, array(SELECT id FROM schedules
		WHERE NOT paused AND next_run <= `+nowSQL+` ORDER BY next_run LIMIT $2)`, b.tnow(), maxScheduleSteps).Scan(&looked, &ids)
	if err != nil {
		return time.Time{}, dbErr("due schedules", err)
	}
	steps := 0
	for _, id := range ids {
		for steps < maxScheduleSteps {
			fired, err := b.fireOne(ctx, id)
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
		return b.clock.Now(), nil
	}
	return b.scheduleNextDue(ctx, looked)
}

// scheduleNextDue returns when the runner wakes next: at the earliest
// next_run of the schedules that are not paused, at most scheduleIdle from
// now. A run that was due when this pass looked (looked: the pass's
// instant, on the database's clock with the real clock) and is still there
// is being stored by another broker (this pass found its row locked), or
// its step failed: look again after PollInterval. One that fell due only
// since is stepped at once.
func (b *Backend) scheduleNextDue(ctx context.Context, looked time.Time) (time.Time, error) {
	now := b.clock.Now()
	var sinceLook, dueIn *int64 // µs: the earliest next_run after looked, and after the statement's now
	err := b.pool.QueryRow(ctx, `SELECT (extract(epoch FROM min(next_run) - $2::timestamptz) * 1000000)::bigint,
			(extract(epoch FROM min(next_run) - `+nowSQL+`) * 1000000)::bigint
		FROM schedules WHERE NOT paused`, b.tnowAt(now), looked).Scan(&sinceLook, &dueIn)
	if err != nil {
		return time.Time{}, dbErr("next schedule run", err)
	}
	switch {
	case dueIn == nil:
		return now.Add(scheduleIdle), nil
	case *sinceLook <= 0:
		return now.Add(b.cfg.PollInterval), nil
	default:
		// On this broker's clock: the database's may be skewed from it.
		return now.Add(min(max(time.Duration(*dueIn)*time.Microsecond, 0), scheduleIdle)), nil
	}
}

// fireOne takes one step of schedule id, if one is due and no other broker
// holds the row, in one transaction; fired says whether it took one.
func (b *Backend) fireOne(ctx context.Context, id string) (fired bool, err error) {
	var woke func()
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		fired, woke = false, nil
		var now time.Time
		s, err := scanSchedule(tx.QueryRow(ctx, "SELECT "+scheduleCols+", "+nowSQL+` FROM schedules
			WHERE id = $2 AND NOT paused AND next_run <= `+nowSQL+` FOR UPDATE SKIP LOCKED`, b.tnow(), id), &now)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // not due any more, or another broker is stepping it
		}
		if err != nil {
			return err
		}
		step, ok, err := plan.ScheduleDue(s, now)
		if err != nil || !ok {
			return err
		}
		woke, err = b.stepTx(ctx, tx, s, step, now, true)
		fired = err == nil
		return err
	})
	if err != nil {
		return false, dbErr("schedule run", err)
	}
	if woke != nil {
		woke()
	}
	return fired, nil
}

// stepTx writes one step of schedule s in tx, whose row it has locked: the
// run's message, if the step has one and the queue takes it, and the row
// moved on, compared and set on the next_run it read. It returns what to
// do once tx commits (wake the queue's receives), nil when nothing was
// stored.
func (b *Backend) stepTx(ctx context.Context, tx pgx.Tx, s model.Schedule, step plan.ScheduleStep, now time.Time, running bool) (func(), error) {
	var woke func()
	lastRun, lastID, lastErr, lastErrAt, sent := nullTime(s.LastRun), s.LastMessageID, s.LastError, nullTime(s.LastErrorAt), int64(0)
	if !step.Run.IsZero() {
		id, wake, err := b.sendRunTx(ctx, tx, s, step.Run)
		switch {
		case err == nil:
			lastRun, lastID, lastErr, lastErrAt, sent, woke = step.Run, id, "", nil, 1, wake
		case refusal(err):
			lastErr, lastErrAt = model.ScheduleRunError(err), step.Run
			b.log.Warn("a schedule's run was not stored", "schedule", s.Ref().String(), "queue", s.Queue,
				"run", step.Run, "err", model.ErrorMessage(err))
		default:
			return nil, err
		}
	}
	if step.Missed > 0 {
		b.log.Info("a schedule missed runs", "schedule", s.Ref().String(), "missed", step.Missed,
			"policy", string(s.Missed), "next_run", step.Next)
	}
	tag, err := tx.Exec(ctx, `UPDATE schedules SET next_run = $2, last_run = $3, last_message_id = $4, last_error = $5,
			last_error_at = $6, sent = sent + $7, missed_runs = missed_runs + $8, paused = paused AND $9
		WHERE id = $1 AND next_run IS NOT DISTINCT FROM $10`,
		s.ID, nullTime(step.Next), lastRun, lastID, lastErr, lastErrAt, sent, step.Missed, running, nullTime(s.NextRun))
	if err != nil {
		return nil, err
	}
	if tag.RowsAffected() != 1 {
		// The row is locked by this transaction: next_run cannot have moved.
		return nil, fmt.Errorf("schedule %s: next_run moved under the row lock", s.Name)
	}
	return woke, nil
}

// sendRunTx stores the message of s's run at instant at in tx, with the
// one send code (sendOn, in a savepoint, so that a refusal leaves tx
// usable), and returns its message id and what wakes the queue's
// receives after the commit. A refusal (the queue is gone, full, or
// refuses the message) is a *model.Error or *model.DepthError.
func (b *Backend) sendRunTx(ctx context.Context, tx pgx.Tx, s model.Schedule, at time.Time) (string, func(), error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return "", nil, err
	}
	defer sp.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after the release it does nothing
	send := sendOn{db: sp, now: b.tnow(), run: once, share: true, whole: true}
	entry := s.RunEntry(at)
	results, q, delay, err := send.send(ctx, s.QueueRef(), []model.SendEntry{entry})
	if err != nil {
		return "", nil, err
	}
	if err := sp.Commit(ctx); err != nil { // releases the savepoint
		return "", nil, err
	}
	wake := func() {
		switch {
		case delay <= 0 && q.cfg.ReceiveRate > 0:
			b.changed(q.id, time.Time{}, false) // every waiter looks (Send says why)
		case delay <= 0:
			b.readied(q.id, 1)
		default:
			b.changed(q.id, b.clock.Now().Add(delay), false)
		}
		b.noteExpiry(q, plan.MessageTTL(q.cfg, entry.Options))
		if o := b.cfg.Observer; o != nil {
			// The front counts the other sends; a run's never passes
			// through it.
			o.Count(s.QueueRef().String(), model.CountSent, 1)
		}
	}
	return results[0].MessageID, wake, nil
}

// refusal reports whether err is a queue's refusal of a send (a message
// for the user), not a failure of the database.
func refusal(err error) bool {
	var me *model.Error
	var de *model.DepthError
	var pe *pgconn.PgError
	return (errors.As(err, &me) || errors.As(err, &de)) && !errors.As(err, &pe)
}
