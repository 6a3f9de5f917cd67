package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicemq/sluice/broker/model"
)

// Message move tasks (storage.Backend).
//
// # State (migration 3)
//
// A task is one move_tasks row: its source and destination by queue id (so a
// deleted and re-created queue is not mistaken for the old one), its status,
// counts, rate and due_at, the instant from which a runner may take its next
// step. At most one task per source queue is active (RUNNING or CANCELLING):
// the partial unique index move_tasks_active enforces it across brokers. At
// most model.MaxListMoveTasks tasks are kept per source; StartMoveTask
// deletes the oldest ended ones, and the tasks of an earlier queue of the
// same name. The sweeper's reclaim deletes the tasks of a reclaimed queue.
//
// # Which messages a task moves
//
// StartMoveTask copies the ids of the messages its source holds, with their
// SentAt, into move_task_items in the transaction that creates the task: the
// items are exactly the messages present at the start (a message
// dead-lettered later keeps its row id, so an id watermark would not do).
// The items are the task's remaining work, in move order (sent_at, id).
// A step deletes the items it handled in the same transaction that moves
// their messages, so after a crash or a restart the items are still exactly
// the remainder. A replay of chosen messages (storage.Backend) copies
// only theirs (matched by message id); an edit-and-replay keeps its
// model.MessageEdit in move_tasks.edit (migration 8). So a restart, or
// another broker, resumes the same selection with the same edit. An item whose message is gone (deleted, expired, moved on
// by its own RedrivePolicy) or in flight (a live lease) is dropped without
// moving it: a message a consumer holds stays where it is. On a FIFO source
// such a held message blocks its group for the rest of the task: the step
// that finds it also deletes the items of the group's later messages, which
// stay in the source behind it.
//
// # One step, one transaction
//
// A step (moveStepTx) claims one due active task row with FOR UPDATE SKIP
// LOCKED, so that of several brokers exactly one steps a given task at a
// time, and the others pass over it. Then, in the same transaction:
//
//  1. the source and destination queue rows are locked FOR SHARE (a
//     concurrent DeleteQueue waits for the step, or the step sees the queue
//     deleted and fails the task with MoveTaskFailureNoQueue);
//  2. the next plan.MoveChunk(rate) items are read and their messages
//     locked FOR UPDATE (waiting for a receive that holds one: the lock
//     re-checks the row, so a message leased meanwhile is seen in flight);
//  3. each movable message is inserted into its destination as a new message
//     (new message id, SentAt now, receive count 0, the destination's
//     DelaySeconds; body, attributes, sender, priority and group kept; on a
//     FIFO destination a new sequence number, taken under the group rows'
//     locks as sends take theirs, and its message id as dedup id; the
//     task's edit applied, plan.ApplyEdit, and a message whose edited form
//     does not fit its destination left in the source and counted as
//     skipped) and deleted from the source. A message whose destination is
//     full (plan.MoveWait: the depth read in the step plus what the step
//     already moved there is at its MaxDepth) ends the walk: it and the
//     items after it stay for a step plan.MoveWaitRetry later;
//  4. the handled items are deleted, the task's moved count and due_at
//     (now + plan.MovePace(moved, rate)) or final status are written;
//  5. the counters of the source and destinations are updated, last, in
//     queue id order (the package's deadlock-freedom rule).
//
// So a crash leaves every message either moved and counted, or untouched.
// With no Destination, each message goes to the live queue named by its
// DeadLetterSource; a message whose source queue no longer exists (or has
// none) fails the task after the messages before it in the chunk moved.
//
// # The runner
//
// moveLoop is one goroutine per broker (started by Open, stopped by Close
// through its context). It steps due tasks until none is left to claim, then
// sleeps on one clock timer until the earliest due_at of any active task
// (at most moveIdle), or until kickMove says this broker started or
// cancelled a task. The pacing lives in due_at, in the database, so it holds
// whichever broker takes each step; a task whose broker died is resumed by
// any other broker's runner within moveIdle, and by every broker at start.
// The runner holds no task state of its own.

// moveIdle is the longest the runner sleeps on the clock: other brokers may
// start tasks (they run them themselves, but a broker may die).
const moveIdle = 10 * time.Second

// activeSQL matches the active task statuses (model.ActiveMoveTaskStatuses)
// in SQL. (The partial index move_tasks_active of migration 3 spells the same
// list: a change to it needs a migration.)
var activeSQL = func() string {
	q := make([]string, len(model.ActiveMoveTaskStatuses))
	for i, s := range model.ActiveMoveTaskStatuses {
		q[i] = "'" + string(s) + "'"
	}
	return "status IN (" + strings.Join(q, ", ") + ")"
}()

const moveTaskCols = "id, source, destination, rate, status, moved, to_move, failure, started_at, skipped"

// scanMoveTask reads the moveTaskCols of row, then the extra columns.
func scanMoveTask(row pgx.Row, extra ...any) (model.MoveTask, error) {
	var t model.MoveTask
	var status string
	err := row.Scan(append([]any{&t.ID, &t.Source, &t.Destination, &t.MaxPerSecond, &status, &t.Moved, &t.ToMove,
		&t.FailureReason, &t.StartedAt, &t.Skipped}, extra...)...)
	t.Status = model.MoveTaskStatus(status)
	return t, err
}

// txErr passes broker errors and context errors through and wraps the rest.
func txErr(op string, err error) error {
	var be *model.Error
	if err == nil || errors.As(err, &be) {
		return err
	}
	return dbErr(op, err)
}

// StartMoveTask implements storage.Backend: one transaction, holding the
// source queue row FOR UPDATE so that starts on one source are serialized.
func (b *Backend) StartMoveTask(ctx context.Context, req model.MoveTaskRequest) (_ model.MoveTask, err error) {
	defer unavailable(ctx, &err)
	if err := b.enter(ctx); err != nil {
		return model.MoveTask{}, err
	}
	defer b.life.Done()
	var out model.MoveTask
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		src, err := scanQueue(tx.QueryRow(ctx, "SELECT "+queueCols+" FROM queues WHERE "+byRef+" AND NOT deleted FOR UPDATE", req.Account, req.Source))
		switch {
		case errors.Is(err, pgx.ErrNoRows) || err == nil && uint64(src.id) != req.SourceID:
			return model.MoveSourceNotFoundError()
		case err != nil:
			return err
		}
		var destID any // SQL NULL: each message's own source
		if req.Destination != "" {
			dst, err := b.getQueue(ctx, tx, model.QueueRef{Account: req.Account, Name: req.Destination})
			switch {
			case errors.Is(err, model.ErrQueueDoesNotExist) || err == nil && uint64(dst.id) != req.DestinationID:
				return model.MoveDestinationNotFoundError()
			case err != nil:
				return err
			}
			destID = dst.id
		}
		var active bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM move_tasks WHERE source_id = $1 AND "+activeSQL+")",
			src.id).Scan(&active); err != nil {
			return err
		}
		if active {
			return model.MoveTaskRunningError()
		}
		// Forget the tasks of an earlier queue of the same name, and keep the
		// newest MaxListMoveTasks-1 ended ones (with the new one: the most
		// ListMoveTasks shows). Items go with their task (ON DELETE CASCADE).
		if _, err := tx.Exec(ctx, `DELETE FROM move_tasks WHERE account = $1 AND source = $2 AND source_id <> $3`, src.account, src.name, src.id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM move_tasks WHERE seq IN (
			SELECT seq FROM move_tasks WHERE source_id = $1 ORDER BY seq DESC OFFSET $2)`,
			src.id, model.MaxListMoveTasks-1); err != nil {
			return err
		}
		var edit []byte // SQL NULL: no edit
		if req.Edit != nil {
			if edit, err = json.Marshal(req.Edit); err != nil {
				return err
			}
		}
		var seq int64
		out, err = scanMoveTask(tx.QueryRow(ctx, `INSERT INTO move_tasks
			(id, source_id, account, source, dest_id, destination, rate, status, started_at, due_at, edit)
			VALUES ($2, $3, $4, $5, $6, $7, $8, 'RUNNING', `+nowSQL+`, `+nowSQL+`, $9)
			RETURNING `+moveTaskCols+`, seq`, b.tnow(), model.NewMessageID(), src.id, src.account, src.name, destID,
			req.Destination, req.MaxPerSecond, edit), &seq)
		if err != nil {
			return err
		}
		// The messages present now are the task's (see the top of the
		// file): all of them, or the chosen ones (ids as the uuid type
		// prints them: lower case).
		var chosen []string // SQL NULL: every message
		for _, id := range req.MessageIDs {
			chosen = append(chosen, strings.ToLower(id))
		}
		tag, err := tx.Exec(ctx, `INSERT INTO move_task_items (task, sent_at, msg)
			SELECT $1, sent_at, id FROM messages WHERE queue_id = $2
			AND ($3::text[] IS NULL OR message_id::text = ANY($3::text[]))`, seq, src.mid, chosen)
		if err != nil {
			return err
		}
		out.ToMove = tag.RowsAffected()
		_, err = tx.Exec(ctx, "UPDATE move_tasks SET to_move = $2 WHERE seq = $1", seq, out.ToMove)
		return err
	})
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "move_tasks_active" {
		return model.MoveTask{}, model.MoveTaskRunningError() // a concurrent start won
	}
	if err != nil {
		return model.MoveTask{}, txErr("start move task", err)
	}
	b.mover.Kick()
	b.log.Info("move task started", "queue", out.Source, "task_id", out.ID, "destination", out.Destination,
		"rate", out.MaxPerSecond, "to_move", out.ToMove)
	return out, nil
}

// ListMoveTasks implements storage.Backend.
func (b *Backend) ListMoveTasks(ctx context.Context, source model.QueueRef, limit int) (_ []model.MoveTask, err error) {
	defer unavailable(ctx, &err)
	if err := b.enter(ctx); err != nil {
		return nil, err
	}
	defer b.life.Done()
	src, err := b.getQueue(ctx, b.pool, source)
	if err != nil {
		return nil, err
	}
	rows, err := b.pool.Query(ctx, "SELECT "+moveTaskCols+" FROM move_tasks WHERE source_id = $1 ORDER BY seq DESC LIMIT $2",
		src.id, limit)
	if err != nil {
		return nil, dbErr("list move tasks", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.MoveTask, error) { return scanMoveTask(r) })
	if err != nil {
		return nil, dbErr("list move tasks", err)
	}
	return out, nil
}

// CancelMoveTask implements storage.Backend: the task becomes CANCELLING
// at once (due now), and CANCELLED at the next step of any broker's runner;
// this broker's runner is woken for it. The UPDATE waits for a step in
// progress, so the moved count it returns is final.
func (b *Backend) CancelMoveTask(ctx context.Context, source model.QueueRef, id string) (_ model.MoveTask, err error) {
	defer unavailable(ctx, &err)
	if err := b.enter(ctx); err != nil {
		return model.MoveTask{}, err
	}
	defer b.life.Done()
	src, err := b.getQueue(ctx, b.pool, source)
	if err != nil {
		return model.MoveTask{}, err
	}
	out, err := scanMoveTask(b.pool.QueryRow(ctx, `UPDATE move_tasks SET status = 'CANCELLING', due_at = `+nowSQL+`
		WHERE source_id = $2 AND id = $3 AND status = 'RUNNING' RETURNING `+moveTaskCols, b.tnow(), src.id, id))
	if errors.Is(err, pgx.ErrNoRows) {
		var status string
		err := b.pool.QueryRow(ctx, "SELECT status FROM move_tasks WHERE source_id = $1 AND id = $2", src.id, id).Scan(&status)
		if errors.Is(err, pgx.ErrNoRows) {
			return model.MoveTask{}, model.MoveTaskNotFoundError()
		}
		if err != nil {
			return model.MoveTask{}, dbErr("cancel move task", err)
		}
		return model.MoveTask{}, model.MoveTaskNotRunningError(model.MoveTaskStatus(status))
	}
	if err != nil {
		return model.MoveTask{}, dbErr("cancel move task", err)
	}
	b.mover.Kick()
	b.log.Info("move task cancelled", "queue", source, "task_id", id, "moved", out.Moved)
	return out, nil
}

// moveTick is the move-task runner's step (b.mover, a lifecycle.Duty; see the
// top of this file): one step of one due task, at once again while a task
// was found, else the wake-up moveNextDue names.
func (b *Backend) moveTick(ctx context.Context) (time.Time, error) {
	found, claimedAt, err := b.moveStep(ctx)
	if err != nil {
		return time.Time{}, err
	}
	if found {
		return b.clock.Now(), nil
	}
	return b.moveNextDue(ctx, claimedAt)
}

// moveNextDue returns when the runner wakes next: at the earliest due_at
// of the active tasks, at most moveIdle from now. A task that was already
// due when the runner's last claim was made (claimedAt; with the real clock
// the database's now()) but could not be claimed is being stepped by another
// broker (or its step failed): look again after PollInterval. One that fell
// due only after that claim is stepped at once.
func (b *Backend) moveNextDue(ctx context.Context, claimedAt time.Time) (time.Time, error) {
	now := b.clock.Now()
	if claimedAt.IsZero() || claimedAt.After(now) {
		claimedAt = now
	}
	var dueIn *int64 // µs from the statement's now (claimedAt with a test clock)
	err := b.pool.QueryRow(ctx, `SELECT (extract(epoch FROM min(due_at) - `+nowSQL+`) * 1000000)::bigint
		FROM move_tasks WHERE `+activeSQL, b.tnowAt(claimedAt)).Scan(&dueIn)
	if err != nil {
		return time.Time{}, dbErr("next move step", err)
	}
	switch {
	case dueIn == nil:
		return now.Add(moveIdle), nil
	case *dueIn <= 0:
		return now.Add(b.cfg.PollInterval), nil
	default:
		return claimedAt.Add(min(time.Duration(*dueIn)*time.Microsecond, moveIdle)), nil
	}
}
