package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
)

// One step of a move task: see "One step, one transaction" in movetask.go.

// stepTask is the claimed task row a step works on.
type stepTask struct {
	seq      int64
	id       string
	sourceID int64
	source   string
	destID   *int64
	rate     int
	status   string
	edit     *model.MessageEdit // an edit-and-replay's edit; nil: none
}

// stepOutcome is what a committed step did, for the work after the commit
// (wake-ups, logs). It is rebuilt from scratch when the transaction is retried.
type stepOutcome struct {
	// at is the clock reading the step's claim was made at (test clock
	// only; see moveNextDue).
	at      time.Time
	task    stepTask
	moved   int64
	skipped int64                // edited messages that did not fit (plan.ApplyEdit)
	ended   model.MoveTaskStatus // "" while the task still runs
	failure string
	targets []queueRow // the queues that received messages
}

// movePlan is the messages of one step going to one destination, in move order.
type movePlan struct {
	target queueRow
	ids    []int64  // source message row ids
	mids   []string // their new message ids
	groups []string // FIFO groups, sorted and distinct
	// The new messages' options, and for an edit their body (nil: the old
	// one) and attrs column (edited false: the old one).
	priority, maxAttempts []int32
	bodies                []*string
	attrs                 [][]byte
	edited                []bool
}

// stepMsg is a locked source message as a step sees it.
type stepMsg struct {
	state       rowState
	dlSource    string
	group       *string
	held        bool // in flight under a live lease
	expired     bool // past the source's retention, or past its time to live and held by no lease: the sweeper's
	priority    int
	maxAttempts int
	messageID   string
	// body and attrs are read for an edit only: attrs always (the system
	// attributes stay), body when the edit keeps it (its size counts).
	body  *string
	attrs []byte
}

// moveStep claims one due task (of any broker) and takes one step of it in
// one transaction. It reports whether it found a due task to step, and the
// clock reading its last claim was made at.
func (b *Backend) moveStep(ctx context.Context) (bool, time.Time, error) {
	var o stepOutcome
	var found bool
	err := retry(func() error {
		o, found = stepOutcome{at: b.clock.Now()}, false
		return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			var err error
			found, err = b.moveStepTx(ctx, tx, &o)
			return err
		})
	})
	if err != nil {
		return false, o.at, txErr("move task step", err)
	}
	if !found {
		return false, o.at, nil
	}
	now := b.clock.Now()
	for _, q := range o.targets {
		b.changed(q.id, now.Add(q.cfg.Delay), false)
		b.noteExpiry(q, 0)
	}
	if o.ended != "" {
		b.log.Info("move task ended", "queue", o.task.source, "task_id", o.task.id, "status", string(o.ended),
			"moved_in_last_step", o.moved, "failure", o.failure)
	}
	return true, o.at, nil
}

// moveStepTx is one step inside tx, in the order of "One step, one
// transaction" (movetask.go). It returns false when no active task is due,
// or every due one is being stepped by another transaction.
func (b *Backend) moveStepTx(ctx context.Context, tx pgx.Tx, o *stepOutcome) (bool, error) {
	t := &o.task
	var edit []byte
	err := tx.QueryRow(ctx, `SELECT seq, id, source_id, source, dest_id, rate, status, edit FROM move_tasks
		WHERE `+activeSQL+` AND due_at <= `+nowSQL+` ORDER BY due_at LIMIT 1 FOR UPDATE SKIP LOCKED`, b.tnowAt(o.at)).
		Scan(&t.seq, &t.id, &t.sourceID, &t.source, &t.destID, &t.rate, &t.status, &edit)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if edit != nil {
		t.edit = new(model.MessageEdit)
		if err := json.Unmarshal(edit, t.edit); err != nil {
			return true, fmt.Errorf("move task %s: edit: %w", t.id, err)
		}
	}
	if t.status == string(model.MoveTaskCancelling) {
		return true, b.endMoveTask(ctx, tx, o, model.MoveTaskCancelled, "")
	}
	fail := func() error { return b.endMoveTask(ctx, tx, o, model.MoveTaskFailed, model.MoveTaskFailureNoQueue) }
	src, dst, ok, err := stepQueues(ctx, tx, t)
	if err != nil {
		return true, err
	}
	if !ok {
		return true, fail()
	}
	rate := model.MoveTask{MaxPerSecond: t.rate}.MoveRate()
	items, sentAt, err := stepItems(ctx, tx, t.seq, plan.MoveChunk(rate))
	if err != nil {
		return true, err
	}
	if len(items) == 0 {
		return true, b.endMoveTask(ctx, tx, o, model.MoveTaskCompleted, "")
	}
	byName, err := stepTargets(ctx, tx, t, src, items)
	if err != nil {
		return true, err
	}
	msgs, err := b.lockStepMessages(ctx, tx, src, items, t.edit)
	if err != nil {
		return true, err
	}
	depths, err := targetDepths(ctx, tx, dst, t.destID != nil, byName)
	if err != nil {
		return true, err
	}
	p := planStep(src, dst, t.destID != nil, byName, depths, t.edit, items, msgs)
	if err := b.recordReplayed(ctx, tx, src, p); err != nil { // before applyStep deletes the rows
		return true, err
	}
	if err := b.applyStep(ctx, tx, o, p); err != nil {
		return true, err
	}
	for _, sk := range p.skipped {
		b.log.Warn("move task: edited message does not fit its destination; left in the source",
			"queue", src.name, "task_id", t.id, "message_id", sk.id, "destination", sk.target, "err", sk.err)
	}
	if p.failed {
		err = fail() // after the messages before the failing one moved
	} else {
		err = b.advanceTask(ctx, tx, o, src, p, items, sentAt, rate)
	}
	if err != nil {
		return true, err
	}
	return true, addStepCounts(ctx, tx, src, p)
}

// stepQueues is step 1: the source and destination rows, locked FOR SHARE so
// that no DeleteQueue commits between this check and the commit of the
// moves. ok is false when one of them is gone (the task fails).
func stepQueues(ctx context.Context, tx pgx.Tx, t *stepTask) (src, dst queueRow, ok bool, err error) {
	qids := []int64{t.sourceID}
	if t.destID != nil {
		qids = append(qids, *t.destID)
	}
	queues, err := lockQueues(ctx, tx, "id = ANY($1::bigint[])", qids)
	if err != nil {
		return src, dst, false, err
	}
	if src, ok = queues[t.sourceID]; !ok {
		return src, dst, false, nil
	}
	if t.destID != nil {
		if dst, ok = queues[*t.destID]; !ok {
			return src, dst, false, nil
		}
	}
	return src, dst, true, nil
}

// stepItems is step 2: the next chunk (at most n) of the task's items,
// oldest first, and their sent_at.
func stepItems(ctx context.Context, tx pgx.Tx, task int64, n int) (items []int64, sentAt []time.Time, err error) {
	rows, err := tx.Query(ctx, `SELECT msg, sent_at FROM move_task_items WHERE task = $1
		ORDER BY sent_at, msg LIMIT $2`, task, n)
	if err != nil {
		return nil, nil, err
	}
	var id int64
	var at time.Time
	_, err = pgx.ForEachRow(rows, []any{&id, &at}, func() error {
		items, sentAt = append(items, id), append(sentAt, at)
		return nil
	})
	return items, sentAt, err
}

// targetDepths reads the depth (model.QueueStats.Depth, from the counters)
// of the step's targets that have a MaxDepth or LowPriorityMaxDepth, by
// mid: the others admit any move. Like a send's, the read is of the
// committed counters, so brokers moving and sending at once may overshoot
// the limit by what they add together (docs/postgres.md).
func targetDepths(ctx context.Context, tx pgx.Tx, dst queueRow, fixed bool, byName map[string]queueRow) (map[int64]int64, error) {
	var mids []int64
	limited := func(q queueRow) {
		if q.cfg.MaxDepth > 0 || q.cfg.LowPriorityMaxDepth > 0 {
			mids = append(mids, q.mid)
		}
	}
	if fixed {
		limited(dst)
	}
	for _, q := range byName {
		limited(q)
	}
	depths := map[int64]int64{}
	if len(mids) == 0 {
		return depths, nil
	}
	rows, err := tx.Query(ctx, `SELECT queue_id, sum(ready + inflight + delayed)::bigint FROM counts
		WHERE queue_id = ANY($1::bigint[]) GROUP BY queue_id`, mids)
	if err != nil {
		return nil, err
	}
	var mid, d int64
	_, err = pgx.ForEachRow(rows, []any{&mid, &d}, func() error {
		depths[mid] = d
		return nil
	})
	return depths, err
}

// stepTargets locks, when the task has no destination, the queues its items
// go back to (named by their DeadLetterSource, in the source's account),
// before any message row, and returns them by name.
func stepTargets(ctx context.Context, tx pgx.Tx, t *stepTask, src queueRow, items []int64) (map[string]queueRow, error) {
	byName := map[string]queueRow{}
	if t.destID != nil {
		return byName, nil
	}
	targets, err := lockQueues(ctx, tx, `account = $2 AND name IN (SELECT dl_source FROM messages
		WHERE id = ANY($1::bigint[]) AND dl_source IS NOT NULL)`, items, src.account)
	for _, q := range targets {
		byName[q.name] = q
	}
	return byName, err
}

// lockStepMessages is step 3: it locks the items' messages. FOR UPDATE waits
// for a receive holding a row and re-checks it: a message leased meanwhile
// shows as held.
func (b *Backend) lockStepMessages(ctx context.Context, tx pgx.Tx, src queueRow, items []int64, edit *model.MessageEdit) (map[int64]stepMsg, error) {
	rows, err := tx.Query(ctx, `SELECT id, state::text, coalesce(dl_source, ''), group_id,
			state = 'i' AND visible_at > `+nowSQL+`, sent_at <= `+nowSQL+` - $4 * interval '1 microsecond'
				OR (coalesce(expires_at <= `+nowSQL+`, false) AND NOT (state = 'i' AND visible_at > `+nowSQL+`)),
			priority, max_attempts, message_id::text, CASE WHEN $5 THEN body END, CASE WHEN $6 THEN attrs END
		FROM messages WHERE id = ANY($2::bigint[]) AND queue_id = $3 ORDER BY id FOR UPDATE`,
		b.tnow(), items, src.mid, micros(src.cfg.Retention), edit != nil && edit.Body == nil, edit != nil)
	if err != nil {
		return nil, err
	}
	msgs := map[int64]stepMsg{}
	var id int64
	var m stepMsg
	_, err = pgx.ForEachRow(rows, []any{&id, &m.state, &m.dlSource, &m.group, &m.held, &m.expired,
		&m.priority, &m.maxAttempts, &m.messageID, &m.body, &m.attrs}, func() error {
		msgs[id] = m
		return nil
	})
	return msgs, err
}

// stepPlan is what the walk of one chunk decided.
type stepPlan struct {
	plans    map[int64]*movePlan // by target queue id
	movedIDs []int64             // source rows moved, in move order
	// srcReady, srcInflight and srcDelayed leave the source's counters.
	srcReady, srcInflight, srcDelayed int64
	blocked                           []string // FIFO groups held by a consumer
	failed                            bool     // a message had no live target
	// handled is how many items (a prefix) the step decided: all of them,
	// unless a full target stopped it (waiting).
	handled int
	waiting bool
	skipped []skippedMsg // edited messages that do not fit their target
	// replayedAs are the moved messages' new ids, in move order (one per
	// movedIDs: the source's replayed records, when it keeps records).
	replayedAs []string
}

// skippedMsg is an edited message a step left in the source (plan.ApplyEdit).
type skippedMsg struct {
	id, target string
	err        error
}

// planStep walks the items in move order (plan.MoveWalk): a message
// without a live destination fails the task after the ones before it moved;
// a message held by a consumer blocks its FIFO group (in this chunk, and in
// later ones: advanceTask drops their items); a message whose destination is
// full ends the walk (its item and the later ones stay). fixed tells whether
// the task has a destination (dst); depths are the targets' depths before
// the step (targetDepths), by mid; edit is the task's edit (nil: none).
func planStep(src, dst queueRow, fixed bool, byName map[string]queueRow, depths map[int64]int64,
	edit *model.MessageEdit, items []int64, msgs map[int64]stepMsg) stepPlan {
	p := stepPlan{plans: map[int64]*movePlan{}}
	target := func(name string) queueRow {
		if fixed {
			return dst
		}
		return byName[name]
	}
	walk := plan.MoveWalk{Source: src.name, Live: func(name string) bool { _, ok := byName[name]; return ok },
		Depth: func(name string) (model.QueueConfig, int64) {
			to := target(name)
			d := depths[to.mid]
			if mp := p.plans[to.id]; mp != nil {
				d += int64(len(mp.ids)) // what this step moves there already
			}
			return to.cfg, d
		}}
	if fixed {
		walk.Destination = dst.name
	}
	for i, id := range items {
		m, ok := msgs[id]
		it := plan.MoveItem{Gone: !ok || m.expired, Held: m.held, DeadLetterSource: m.dlSource,
			Low: plan.EditedPriority(edit, m.priority) < 0}
		if m.group != nil && src.cfg.Fifo { // a standard queue's group ids order nothing
			it.Group = *m.group
		}
		action, name := walk.Next(it)
		if action == plan.MoveWait {
			p.waiting = true
			return p
		}
		p.handled = i + 1
		switch action {
		case plan.MoveHold:
			if it.Group != "" {
				p.blocked = append(p.blocked, it.Group)
			}
			continue
		case plan.MoveFail:
			p.failed = true
			return p
		case plan.MoveSkip:
			continue
		}
		to := target(name)
		moved, err := newContent(edit, to.cfg, m)
		if err != nil {
			p.skipped = append(p.skipped, skippedMsg{id: m.messageID, target: to.name, err: err})
			continue
		}
		mp := p.plans[to.id]
		if mp == nil {
			mp = &movePlan{target: to}
			p.plans[to.id] = mp
		}
		mp.ids = append(mp.ids, id)
		newID := model.NewMessageID()
		mp.mids = append(mp.mids, newID)
		p.replayedAs = append(p.replayedAs, newID)
		if m.group != nil {
			mp.groups = append(mp.groups, *m.group)
		}
		mp.priority = append(mp.priority, int32(moved.opts.Priority))
		mp.maxAttempts = append(mp.maxAttempts, int32(moved.opts.MaxAttempts))
		mp.bodies = append(mp.bodies, moved.body)
		mp.attrs = append(mp.attrs, moved.attrs)
		mp.edited = append(mp.edited, edit != nil)
		p.movedIDs = append(p.movedIDs, id)
		switch m.state {
		case rowReady:
			p.srcReady++
		case rowInFlight:
			p.srcInflight++ // a lease that ended but was not promoted yet
		default:
			p.srcDelayed++
		}
	}
	return p
}

// movedContent is what a moved message becomes (newContent).
type movedContent struct {
	opts  model.MessageOptions
	body  *string // nil: the old body
	attrs []byte  // the attrs column, for an edit only
}

// newContent applies the task's edit to m bound for a queue with settings
// c (plan.ApplyEdit); without an edit the message keeps its content and
// options.
func newContent(edit *model.MessageEdit, c model.QueueConfig, m stepMsg) (movedContent, error) {
	opts := model.MessageOptions{Priority: m.priority, MaxAttempts: m.maxAttempts}
	if edit == nil {
		return movedContent{opts: opts}, nil
	}
	var old storedAttrs
	if m.attrs != nil {
		if err := json.Unmarshal(m.attrs, &old); err != nil {
			return movedContent{}, fmt.Errorf("stored attributes: %w", err)
		}
	}
	var body string
	if m.body != nil {
		body = *m.body
	}
	body, attrs, opts, err := plan.ApplyEdit(edit, c, body, old.A, opts)
	if err != nil {
		return movedContent{}, err
	}
	return movedContent{opts: opts, body: &body,
		attrs: encodeAttrs(&model.SendEntry{Attributes: attrs, SystemAttributes: old.S})}, nil
}

// applyStep is step 4: the new messages (targets in id order) and the
// deletes from the source.
func (b *Backend) applyStep(ctx context.Context, tx pgx.Tx, o *stepOutcome, p stepPlan) error {
	targetIDs := make([]int64, 0, len(p.plans))
	for qid := range p.plans {
		targetIDs = append(targetIDs, qid)
	}
	slices.Sort(targetIDs)
	for _, qid := range targetIDs {
		if err := b.insertMoved(ctx, tx, p.plans[qid]); err != nil {
			return err
		}
		o.targets = append(o.targets, p.plans[qid].target)
	}
	if len(p.movedIDs) > 0 {
		if err := deleteRows(ctx, tx, p.movedIDs); err != nil {
			return err
		}
	}
	o.moved, o.skipped = int64(len(p.movedIDs)), int64(len(p.skipped))
	return nil
}

// recordReplayed writes, on a source that keeps records (its
// CompletedRetention), a replayed record of each message the step moved,
// naming its new id (model.MessageRecord).
func (b *Backend) recordReplayed(ctx context.Context, tx pgx.Tx, src queueRow, p stepPlan) error {
	keep := src.cfg.CompletedRetention.Microseconds()
	if keep <= 0 || len(p.movedIDs) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `INSERT INTO message_records AS x (queue_id, message_id, state, at, due, attempts, replayed_as, reason, source)
		SELECT $2, m.message_id, 'p', `+nowSQL+`, `+nowSQL+` + $3 * interval '1 microsecond',
			coalesce(m.attempts, m.receive_count), u.n, m.reason, m.dl_source
		FROM unnest($4::bigint[], $5::text[]) u (id, n) JOIN messages m ON m.id = u.id
		`+recordConflictSQL,
		b.tnow(), src.id, keep, p.movedIDs, p.replayedAs)
	if err == nil {
		b.noteDeadline(b.clock.Now().Add(src.cfg.CompletedRetention))
	}
	return err
}

// advanceTask records the task's progress after a step that did not fail:
// the handled items are deleted (a range of the primary key, up to the last
// one handled: every one read unless a full target stopped the walk), the
// later items of a blocked group are dropped (they stay in the source,
// behind the message that stayed), and the task ends or is paced (waiting
// for room: plan.MoveWaitRetry at least).
func (b *Backend) advanceTask(ctx context.Context, tx pgx.Tx, o *stepOutcome, src queueRow, p stepPlan, items []int64, sentAt []time.Time, rate int) error {
	t := &o.task
	if h := p.handled; h > 0 {
		if _, err := tx.Exec(ctx, `DELETE FROM move_task_items WHERE task = $1 AND (sent_at, msg) <= ($2, $3)`,
			t.seq, sentAt[h-1], items[h-1]); err != nil {
			return err
		}
	}
	if len(p.blocked) > 0 {
		if _, err := tx.Exec(ctx, `DELETE FROM move_task_items i USING messages m
			WHERE i.task = $1 AND m.id = i.msg AND m.queue_id = $2 AND m.seq IS NOT NULL
			AND m.group_id = ANY($3::text[])`, t.seq, src.mid, p.blocked); err != nil {
			return err
		}
	}
	var more bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM move_task_items WHERE task = $1)", t.seq).Scan(&more); err != nil {
		return err
	}
	if !more {
		return b.endMoveTask(ctx, tx, o, model.MoveTaskCompleted, "")
	}
	// The next step is due one pace after this one was due, not after it
	// ran: a step that starts late (a busy broker, a clock that moved on)
	// does not push the whole schedule back. GREATEST keeps a task that fell
	// far behind (all brokers were down) from bursting: it resumes at its
	// rate from now. A task waiting for room tries again MoveWaitRetry
	// from now.
	pace := plan.MovePace(len(p.movedIDs), rate)
	if p.waiting {
		pace = max(pace, plan.MoveWaitRetry)
	}
	_, err := tx.Exec(ctx, `UPDATE move_tasks SET moved = moved + $2, skipped = skipped + $5,
		due_at = CASE WHEN $6 THEN `+nowSQL+` + $3 * interval '1 microsecond'
			ELSE greatest(due_at + $3 * interval '1 microsecond', `+nowSQL+`) END
		WHERE seq = $4`, b.tnowAt(o.at), o.moved, micros(pace), t.seq, o.skipped, p.waiting)
	return err
}

// addStepCounts is step 5: the counters last, in queue mid order (counters
// are keyed by the queues' mids, see PurgeQueue).
func addStepCounts(ctx context.Context, tx pgx.Tx, src queueRow, p stepPlan) error {
	type delta struct{ ready, inflight, delayed int64 }
	deltas := map[int64]*delta{src.mid: {-p.srcReady, -p.srcInflight, -p.srcDelayed}}
	order := []int64{src.mid}
	for _, mp := range p.plans {
		n := int64(len(mp.ids))
		if mp.target.cfg.Delay > 0 {
			deltas[mp.target.mid] = &delta{delayed: n}
		} else {
			deltas[mp.target.mid] = &delta{ready: n}
		}
		order = append(order, mp.target.mid)
	}
	slices.Sort(order)
	for _, qid := range order {
		d := deltas[qid]
		if *d == (delta{}) {
			continue
		}
		if err := addCounts(ctx, tx, qid, shard(), d.ready, d.inflight, d.delayed); err != nil {
			return err
		}
	}
	return nil
}

// lockQueues locks FOR SHARE, in id order, the live queues matching where
// (with args as $1, $2, …) and returns them by id.
func lockQueues(ctx context.Context, tx pgx.Tx, where string, args ...any) (map[int64]queueRow, error) {
	rows, err := tx.Query(ctx, "SELECT "+queueCols+" FROM queues WHERE ("+where+") AND NOT deleted ORDER BY id FOR SHARE", args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]queueRow{}
	for rows.Next() {
		q, err := scanQueue(rows)
		if err != nil {
			return nil, err
		}
		out[q.id] = q
	}
	return out, rows.Err()
}

// insertMoved inserts p's messages into p.target as new messages, in move
// order (so that on a standard queue they are received oldest first, and on
// a FIFO queue their sequence numbers follow that order). On a FIFO target the
// group rows are locked first, as a send does, so that within a group
// sequence order is commit order.
func (b *Backend) insertMoved(ctx context.Context, tx pgx.Tx, p *movePlan) error {
	fifo := p.target.cfg.Fifo
	if fifo && len(p.groups) > 0 {
		groups := slices.Clone(p.groups)
		slices.Sort(groups)
		groups = slices.Compact(groups)
		if _, err := tx.Exec(ctx, lockGroupsSQL, p.target.mid, groups); err != nil {
			return err
		}
	}
	state := rowReady
	if p.target.cfg.Delay > 0 {
		state = rowDelayed
	}
	// Volatile expressions (nextval) in the select list are evaluated after
	// the ORDER BY, so sequence numbers follow u.ord. On a standard target
	// each takes a fair-queue turn as a send does (t, in u.ord order within
	// its tenant: fair.go; at its new priority, which an edit may change),
	// computed apart from nextval's select.
	_, err := tx.Exec(ctx, `
		WITH t AS (`+turnsSQL("$2::bigint", `(SELECT x.id AS k, s.group_id, x.priority, x.ord
			FROM unnest($6::bigint[], $8::smallint[]) WITH ORDINALITY AS x (id, priority, ord)
			JOIN messages s ON s.id = x.id WHERE NOT $5)`)+`)
		INSERT INTO messages (queue_id, state, visible_at, sent_at, priority, seq, message_id,
			group_id, dedup_id, sender_id, attrs, body, max_attempts, turn)
		SELECT $2, $3::"char", `+nowSQL+` + $4 * interval '1 microsecond', `+nowSQL+`, u.priority,
			CASE WHEN $5 THEN nextval('fifo_seq') END, u.mid::uuid,
			m.group_id, CASE WHEN $5 THEN u.mid END, m.sender_id,
			CASE WHEN u.edited THEN u.attrs ELSE m.attrs END, coalesce(u.body, m.body), u.max_attempts, coalesce(t.turn, 0)
		FROM unnest($6::bigint[], $7::text[], $8::smallint[], $9::integer[], $10::text[], $11::bytea[], $12::boolean[])
			WITH ORDINALITY AS u (id, mid, priority, max_attempts, body, attrs, edited, ord)
		JOIN messages m ON m.id = u.id LEFT JOIN t ON t.k = u.id
		ORDER BY u.ord`,
		b.tnow(), p.target.mid, state, micros(p.target.cfg.Delay), fifo, p.ids, p.mids,
		p.priority, p.maxAttempts, p.bodies, p.attrs, p.edited)
	return err
}

// endMoveTask ends the task of o with status (adding o.moved to its count)
// and deletes its remaining items.
func (b *Backend) endMoveTask(ctx context.Context, tx pgx.Tx, o *stepOutcome, status model.MoveTaskStatus, failure string) error {
	o.ended, o.failure = status, failure
	if _, err := tx.Exec(ctx, "UPDATE move_tasks SET status = $2, failure = $3, moved = moved + $4, skipped = skipped + $5 WHERE seq = $1",
		o.task.seq, string(status), failure, o.moved, o.skipped); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "DELETE FROM move_task_items WHERE task = $1", o.task.seq)
	return err
}
