package embedded

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
)

// Message move tasks (storage.Backend).
//
// # State
//
// A task is one record, 0x04 <seq:8> (JSON moveTaskRecord), where seq is a
// counter handed out in start order, so the store holds the tasks in the
// order ListMoveTasks wants (reversed). In memory, moveTasks keeps every
// task by source queue name, oldest first, with its working state. At most
// maxTasksPerSource ended tasks are kept per source; older ones are deleted
// when a new task starts.
//
// # Which messages a task moves
//
// The task's watermark is the message key counter (Backend.nextKey) when it
// started: keys only grow, so the source's messages with a key below it are
// exactly the messages it held then. The runner turns them into a list of
// keys ordered by (SentAt, key), oldest first, and walks it with a cursor.
// The list is not stored: after a restart it is rebuilt from the watermark,
// and since a moved message is deleted from the source, the rebuilt list is
// the remainder. A key whose message is gone (deleted, expired) or in flight
// is passed over: a message that a consumer holds stays where it is.
//
// A replay of chosen messages (storage.Backend) stores their keys in
// the record (Selective, Keys: at most broker.MaxDeleteByID of them, found
// by message id when the task starts), and the list is made of those keys
// only; an edit-and-replay stores its model.MessageEdit there too. So a
// restart resumes the same selection with the same edit.
//
// On a FIFO source, passing over a message in flight blocks its group for
// the rest of the task (moveTaskRecord.Blocked): every later message of the
// group stays in the source too, behind it, so that the destination never
// receives a group's messages out of order.
//
// # One step, one write
//
// A step moves up to plan.MoveChunk(rate) messages under Backend.mu in one
// Pebble batch: for each, the new message on the destination (new key, new
// message id, SentAt now), the delete of the old one from the source, and the
// task record with the new Moved count. The batch is synced before the next
// step, so a crash leaves every message either moved (and counted) or not,
// never both or neither.
//
// # The runner
//
// b.mover is a lifecycle.Duty (started by Open, stopped by Close) whose step
// (moveTick) steps every due task and returns the earliest due time; a start
// or a cancel kicks it. After a step that moved n messages, the task is due again
// plan.MovePace(n, rate) later on the injected clock, so a FakeClock drives
// it. A step that stops before a message whose destination is full
// (plan.MoveWait: the destination's depth, which counts the messages the
// step already moved there, is at its MaxDepth) leaves the cursor on it, and
// the task is due again plan.MoveWaitRetry later. All task state is
// guarded by Backend.mu; the loop holds no state of its own but its timer.

// pfxMoveTask prefixes the move task records (see codec.go for the others).
const pfxMoveTask byte = 0x04

// maxTasksPerSource is how many ended tasks are kept per source queue
// (ListMessageMoveTasks shows at most 10).
const maxTasksPerSource = model.MaxListMoveTasks

func moveTaskKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{pfxMoveTask}, seq)
}

// moveTaskRecord is the stored form of a task.
type moveTaskRecord struct {
	Seq uint64 `json:"seq"`
	ID  string `json:"id"`
	// Account owns the source and destination ("" = the broker's own).
	Account       string               `json:"account,omitempty"`
	Source        string               `json:"source"`
	SourceID      uint64               `json:"sourceId"`
	Destination   string               `json:"dest,omitempty"`
	DestinationID uint64               `json:"destId,omitempty"`
	MaxPerSecond  int                  `json:"rate,omitempty"`
	Status        model.MoveTaskStatus `json:"status"`
	Moved         int64                `json:"moved"`
	ToMove        int64                `json:"toMove"`
	FailureReason string               `json:"failure,omitempty"`
	StartedAt     time.Time            `json:"started"`
	// Watermark: the source's messages with keys below it belong to the task.
	Watermark uint64 `json:"watermark"`
	// Blocked lists the FIFO groups of which the task passed over a message
	// in flight: it moves no later message of them (see "Which messages a
	// task moves"). Stored, so that a resumed task keeps them blocked.
	Blocked []string `json:"blocked,omitempty"`
	// Selective: the task moves only the messages of Keys (a replay of
	// chosen messages), not every one below Watermark.
	Selective bool     `json:"selective,omitempty"`
	Keys      []uint64 `json:"keys,omitempty"`
	// Edit is applied to each moved message (an edit-and-replay).
	Edit *model.MessageEdit `json:"edit,omitempty"`
	// Skipped counts the edited messages that did not fit their destination.
	Skipped int64 `json:"skipped,omitempty"`
}

// sourceRef is the task's source queue.
func (r *moveTaskRecord) sourceRef() model.QueueRef {
	return model.QueueRef{Account: r.Account, Name: r.Source}
}

func (r *moveTaskRecord) encode() []byte {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // plain data
	}
	return b
}

func (r *moveTaskRecord) task() model.MoveTask {
	return model.MoveTask{
		ID: r.ID, Source: r.Source, Destination: r.Destination, MaxPerSecond: r.MaxPerSecond,
		Status: r.Status, Moved: r.Moved, ToMove: r.ToMove, Skipped: r.Skipped, FailureReason: r.FailureReason,
		StartedAt: r.StartedAt,
	}
}

// moveTask is one task and, while it is active, its working state.
type moveTask struct {
	moveTaskRecord
	cands  []uint64 // keys to move, oldest first; nil until the first step
	cursor int      // next index in cands
	// blocked is the set of Blocked, built on first use.
	blocked map[string]bool
	due     int64 // Unix ns: when the runner may take the next step
}

// moveTasks is the move-task state of a Backend, guarded by Backend.mu.
type moveTasks struct {
	bySource map[model.QueueRef][]*moveTask // oldest first
	nextSeq  uint64
}

// recoverMoveTasks loads the task records (Open, before any goroutine). A
// RUNNING task resumes where it stopped; a CANCELLING one is CANCELLED.
func (b *Backend) recoverMoveTasks() error {
	b.moves = &moveTasks{bySource: map[model.QueueRef][]*moveTask{}, nextSeq: 1}
	it, err := b.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxMoveTask}, UpperBound: []byte{pfxMoveTask + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	now := b.now()
	batch := b.db.NewBatch()
	defer batch.Close()
	for it.First(); it.Valid(); it.Next() {
		t := &moveTask{due: now}
		if err := json.Unmarshal(it.Value(), &t.moveTaskRecord); err != nil {
			return fmt.Errorf("embedded: move task record %x: %w", it.Key(), err)
		}
		if t.Status == model.MoveTaskCancelling {
			t.Status = model.MoveTaskCancelled
			_ = batch.Set(moveTaskKey(t.Seq), t.encode(), nil)
		}
		b.moves.bySource[t.sourceRef()] = append(b.moves.bySource[t.sourceRef()], t)
		b.moves.nextSeq = max(b.moves.nextSeq, t.Seq+1)
	}
	if err := it.Error(); err != nil {
		return err
	}
	return b.db.Apply(batch, pebble.Sync)
}

// StartMoveTask implements storage.Backend.
func (b *Backend) StartMoveTask(ctx context.Context, req model.MoveTaskRequest) (model.MoveTask, error) {
	if err := b.enter(ctx); err != nil {
		return model.MoveTask{}, err
	}
	defer b.life.Done()
	b.mu.Lock()
	src := b.queues[model.QueueRef{Account: req.Account, Name: req.Source}]
	if src == nil || src.ID != req.SourceID {
		b.mu.Unlock()
		return model.MoveTask{}, model.MoveSourceNotFoundError()
	}
	rec := moveTaskRecord{
		ID: model.NewMessageID(), Account: src.Account, Source: src.Name, SourceID: src.ID, MaxPerSecond: req.MaxPerSecond,
		Status: model.MoveTaskRunning, StartedAt: b.clock.Now(),
	}
	if req.Destination != "" {
		if dst := b.queues[model.QueueRef{Account: req.Account, Name: req.Destination}]; dst == nil || dst.ID != req.DestinationID {
			b.mu.Unlock()
			return model.MoveTask{}, model.MoveDestinationNotFoundError()
		}
		rec.Destination, rec.DestinationID = req.Destination, req.DestinationID
	}
	tasks := b.liveTasksLocked(src)
	for _, t := range tasks {
		if t.Status.Active() {
			b.mu.Unlock()
			return model.MoveTask{}, model.MoveTaskRunningError()
		}
	}
	batch := b.db.NewBatch()
	// Forget the tasks of an earlier queue of the same name.
	for _, t := range b.moves.bySource[src.ref()] {
		if t.SourceID != src.ID {
			_ = batch.Delete(moveTaskKey(t.Seq), nil)
		}
	}
	// Keep the newest ended tasks only; delete the records of older ones.
	for len(tasks) >= maxTasksPerSource {
		_ = batch.Delete(moveTaskKey(tasks[0].Seq), nil)
		tasks = tasks[1:]
	}
	rec.Seq = b.moves.nextSeq
	b.moves.nextSeq++
	rec.Watermark = b.nextKey
	rec.ToMove = int64(len(src.msgs))
	if len(req.MessageIDs) > 0 {
		rec.Selective, rec.Keys = true, chosenKeys(src, req.MessageIDs)
		rec.ToMove = int64(len(rec.Keys))
	}
	rec.Edit = req.Edit
	t := &moveTask{moveTaskRecord: rec, due: b.now()}
	b.moves.bySource[src.ref()] = append(tasks, t)
	_ = batch.Set(moveTaskKey(rec.Seq), rec.encode(), nil)
	err := b.applyLocked(batch)
	out := t.task()
	b.mu.Unlock()
	if err := b.wait(batch, err); err != nil {
		return model.MoveTask{}, err
	}
	b.mover.Kick()
	b.log.Info("move task started", "queue", rec.Source, "task_id", rec.ID, "destination", rec.Destination,
		"rate", rec.MaxPerSecond, "to_move", rec.ToMove)
	return out, nil
}

// chosenKeys returns the keys of src's messages whose ids are among ids, in
// key order (ids not in src are left out). Ids compare as UUIDs do, in any
// case (message ids are stored in lower case), as on PostgreSQL.
func chosenKeys(src *queue, ids []string) []uint64 {
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[strings.ToLower(id)] = true
	}
	var keys []uint64
	for k, m := range src.msgs {
		if want[m.id()] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// liveTasksLocked returns the tasks of the queue src (by name), dropping from
// memory those of an earlier queue of the same name (their records stay until
// pruned by a later start).
func (b *Backend) liveTasksLocked(src *queue) []*moveTask {
	all := b.moves.bySource[src.ref()]
	out := all[:0:0]
	for _, t := range all {
		if t.SourceID == src.ID {
			out = append(out, t)
		}
	}
	return out
}

// ListMoveTasks implements storage.Backend.
func (b *Backend) ListMoveTasks(ctx context.Context, source model.QueueRef, limit int) ([]model.MoveTask, error) {
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
	src := b.queues[source]
	if src == nil {
		return nil, model.QueueNotFoundError()
	}
	tasks := b.liveTasksLocked(src)
	out := make([]model.MoveTask, 0, min(limit, len(tasks)))
	for i := len(tasks) - 1; i >= 0 && len(out) < limit; i-- {
		out = append(out, tasks[i].task())
	}
	return out, nil
}

// CancelMoveTask implements storage.Backend: the task becomes CANCELLING
// at once (durably) and CANCELLED at the runner's next step, which the
// cancel triggers.
func (b *Backend) CancelMoveTask(ctx context.Context, source model.QueueRef, id string) (model.MoveTask, error) {
	if err := b.enter(ctx); err != nil {
		return model.MoveTask{}, err
	}
	defer b.life.Done()
	b.mu.Lock()
	src := b.queues[source]
	if src == nil {
		b.mu.Unlock()
		return model.MoveTask{}, model.QueueNotFoundError()
	}
	var t *moveTask
	for _, x := range b.liveTasksLocked(src) {
		if x.ID == id {
			t = x
		}
	}
	if t == nil {
		b.mu.Unlock()
		return model.MoveTask{}, model.MoveTaskNotFoundError()
	}
	if t.Status != model.MoveTaskRunning {
		b.mu.Unlock()
		return model.MoveTask{}, model.MoveTaskNotRunningError(t.Status)
	}
	t.Status = model.MoveTaskCancelling
	t.due = b.now()
	batch := b.db.NewBatch()
	_ = batch.Set(moveTaskKey(t.Seq), t.encode(), nil)
	err := b.applyLocked(batch)
	out := t.task()
	b.mu.Unlock()
	if err := b.wait(batch, err); err != nil {
		return model.MoveTask{}, err
	}
	b.mover.Kick()
	b.log.Info("move task cancelled", "queue", source, "task_id", id, "moved", out.Moved)
	return out, nil
}

// moveIdle is how long the runner sleeps when no task is active.
const moveIdle = time.Hour

// moveTick is the mover's step: it steps every due task and returns the
// earliest due time of the active tasks (zero when none is active).
func (b *Backend) moveTick(context.Context) (time.Time, error) {
	next, ok := b.moveDue()
	if !ok {
		return time.Time{}, nil
	}
	return fromNanos(next), nil
}

// moveDue runs one step of every active task that is due, each in its own
// synced batch, and returns the earliest due time of the active tasks.
func (b *Backend) moveDue() (next int64, ok bool) {
	b.mu.Lock()
	if b.refusal() != nil {
		b.mu.Unlock()
		return 0, false
	}
	var due []*moveTask
	now := b.now()
	for _, ts := range b.moves.bySource {
		for _, t := range ts {
			if t.Status.Active() && t.due <= now {
				due = append(due, t)
			}
		}
	}
	b.mu.Unlock()
	for _, t := range due {
		if err := b.moveStep(t); err != nil {
			b.log.Error("move task step failed", "queue", t.Source, "task_id", t.ID, "err", err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, ts := range b.moves.bySource {
		for _, t := range ts {
			if t.Status.Active() && (!ok || t.due < next) {
				next, ok = t.due, true
			}
		}
	}
	return next, ok
}

// moveStep takes one step of t in one synced batch (see "One step, one write").
func (b *Backend) moveStep(t *moveTask) error {
	batch := b.db.NewBatch()
	b.mu.Lock()
	if b.life.Closed() || !t.Status.Active() {
		b.mu.Unlock()
		_ = batch.Close()
		return nil
	}
	now := b.now()
	b.moveStepLocked(t, batch, now)
	_ = batch.Set(moveTaskKey(t.Seq), t.encode(), nil)
	err := b.applyLocked(batch)
	status, moved := t.Status, t.Moved
	b.mu.Unlock()
	if err := b.wait(batch, err); err != nil {
		return err
	}
	if status != model.MoveTaskRunning {
		b.log.Info("move task ended", "queue", t.Source, "task_id", t.ID, "status", string(status), "moved", moved,
			"failure", t.FailureReason)
	}
	return nil
}

// moveStepLocked moves up to one chunk of t's messages into batch and
// updates t (b.mu held; the caller writes t's record in the same batch).
func (b *Backend) moveStepLocked(t *moveTask, batch *pebble.Batch, now int64) {
	fail := func() {
		t.Status, t.FailureReason = model.MoveTaskFailed, model.MoveTaskFailureNoQueue
	}
	if t.Status == model.MoveTaskCancelling {
		t.Status = model.MoveTaskCancelled
		return
	}
	src := b.byID[t.SourceID]
	if src == nil {
		fail()
		return
	}
	var dst *queue
	if t.Destination != "" {
		if dst = b.byID[t.DestinationID]; dst == nil {
			fail()
			return
		}
	}
	if t.cands == nil {
		t.cands = moveCandidates(src, t.Watermark)
		if t.Selective {
			t.cands = slices.DeleteFunc(t.cands, func(k uint64) bool { _, ok := slices.BinarySearch(t.Keys, k); return !ok })
		}
	}
	if t.blocked == nil {
		t.blocked = make(map[string]bool, len(t.Blocked))
		for _, g := range t.Blocked {
			t.blocked[g] = true
		}
	}
	b.promoteLocked(src, batch, now) // a lease that ended is held by no consumer: its message moves
	target := func(name string) *queue {
		if dst != nil && dst.Name == name {
			return dst
		}
		return b.queues[model.QueueRef{Account: src.Account, Name: name}]
	}
	walk := plan.MoveWalk{Source: src.Name, Destination: t.Destination, Blocked: t.blocked,
		Live: func(name string) bool { return target(name) != nil },
		// The live depth: it counts what this step moved there already.
		Depth: func(name string) (model.QueueConfig, int64) { q := target(name); return q.Config, q.depth() }}
	rate := t.task().MoveRate()
	n := plan.MoveChunk(rate)
	moved, waiting := 0, false
	for moved < n && t.cursor < len(t.cands) && !waiting {
		m := src.msgs[t.cands[t.cursor]]
		it := plan.MoveItem{Gone: m == nil}
		if m != nil {
			it = plan.MoveItem{Gone: src.expired(m, now) || (m.ttlPassed(now) && m.state != stateInflight), Held: m.state == stateInflight,
				DeadLetterSource: m.deadLetterSource(), Low: plan.EditedPriority(t.Edit, int(m.priority)) < 0}
			if src.fifo != nil { // a standard queue's group ids order nothing
				it.Group = m.groupID()
			}
		}
		action, to := walk.Next(it)
		switch action {
		case plan.MoveFail:
			t.Moved += int64(moved)
			fail()
			return
		case plan.MoveWait:
			waiting = true // the cursor stays on m
			continue
		case plan.MoveHold:
			if it.Group != "" {
				t.Blocked = append(t.Blocked, it.Group)
			}
		}
		t.cursor++
		if action != plan.MoveOut {
			continue
		}
		var skip *editSkip
		switch err := b.moveOutLocked(src, target(to), m, t.Edit, batch, now); {
		case errors.As(err, &skip):
			// The edited message does not fit its destination: it stays.
			t.Skipped++
			b.log.Warn("move task: edited message does not fit its destination; left in the source",
				"queue", src.Name, "task_id", t.ID, "message_id", m.id(), "destination", to, "err", skip.error)
		case err != nil:
			// Its body cannot be read: it stays in the source, uncounted.
			b.log.Error("move task: message not moved", "queue", src.Name, "key", m.key, "err", err)
		default:
			moved++
		}
	}
	t.Moved += int64(moved)
	if !waiting && t.cursor >= len(t.cands) {
		t.Status = model.MoveTaskCompleted
		t.cands, t.blocked, t.Blocked = nil, nil, nil
		return
	}
	pace := plan.MovePace(moved, rate)
	if waiting {
		pace = max(pace, plan.MoveWaitRetry)
	}
	t.due = now + int64(pace)
}

// editSkip is moveOutLocked's answer for a message whose edited form does
// not fit its destination (plan.ApplyEdit).
type editSkip struct{ error }

// moveCandidates returns the keys of src's messages below watermark, oldest
// (SentAt, then key) first.
func moveCandidates(src *queue, watermark uint64) []uint64 {
	ms := make([]*msg, 0, len(src.msgs))
	for k, m := range src.msgs {
		if k < watermark {
			ms = append(ms, m)
		}
	}
	sort.Slice(ms, func(i, j int) bool {
		if ms[i].sentAt != ms[j].sentAt {
			return ms[i].sentAt < ms[j].sentAt
		}
		return ms[i].key < ms[j].key
	})
	keys := make([]uint64, len(ms))
	for i, m := range ms {
		keys[i] = m.key
	}
	return keys
}

// moveOutLocked moves m (not in flight) from src to dst in batch as a new
// message: new key and message id, SentAt now, receive and attempt counts 0,
// dst's DelaySeconds; body, attributes, system attributes, sender, priority,
// Sluice.MaxAttempts and group kept, the body and attributes (and with them
// the options) as edit changes them (plan.ApplyEdit; an *editSkip error
// when the result does not fit dst: nothing is written). On a FIFO
// destination its sequence number is its new key and its dedup id its new
// message id (it is not deduplicated).
func (b *Backend) moveOutLocked(src, dst *queue, m *msg, edit *model.MessageEdit, batch *pebble.Batch, now int64) error {
	v, closer, err := b.db.Get(msgKey(src.ID, kindBody, m.key))
	if err != nil {
		return err
	}
	var old model.Message
	err = decodeBody(v, &old)
	_ = closer.Close()
	if err != nil {
		return err
	}
	text, attrs, opts, err := plan.ApplyEdit(edit, dst.Config, old.Body, old.Attributes,
		model.MessageOptions{Priority: int(m.priority), MaxAttempts: int(m.maxAttempts)})
	if err != nil {
		return &editSkip{err}
	}
	size := m.size
	if edit != nil {
		size = int32(model.MessageSize(text, attrs))
	}
	id := model.NewMessageID()
	body := encodeBody(id, &model.SendEntry{
		Body: text, Attributes: attrs, SystemAttributes: old.SystemAttributes, SenderID: old.SenderID,
	})
	nm := &msg{
		key: b.allocKey(batch), state: stateReady, visibleAt: now, sentAt: now,
		priority: int32(opts.Priority), size: size, pos: -1, agePos: -1,
		maxAttempts: int32(opts.MaxAttempts),
	}
	nm.setID(id)
	nm.setGroupID(m.groupID())
	if dst.Config.Fifo {
		nm.setSeq(nm.key)
		nm.setDedupID(id)
	}
	if d := dst.Config.Delay; d > 0 {
		nm.state, nm.visibleAt = stateDelayed, now+int64(d)
	}
	_ = batch.Set(msgKey(dst.ID, kindBody, nm.key), body, nil)
	_ = batch.Set(msgKey(dst.ID, kindMeta, nm.key), encodeMeta(nm), nil)
	deleteMessageRecords(batch, src.ID, m.key)
	b.putRecordLocked(src, m, batch, now, model.JobReplayed, nil, id) // records.go
	src.remove(m)
	dst.add(nm, now)
	b.noteExpiryLocked(dst, nm)
	return nil
}
